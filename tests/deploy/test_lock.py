"""The image's lock file (deploy/image/requirements.txt, `make lock`): every dependency the package
declares for run time, its extras the image carries and its build backend are pinned there at a
version pyproject.toml allows, each with its hashes, and the Dockerfile installs exactly that."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.deploy.manifests import REPO

LOCK = REPO / "deploy" / "image" / "requirements.txt"
# The extras the image installs (the Dockerfile's comment says why).
IMAGE_EXTRAS = ("aws", "github-app")


def declared() -> list[Requirement]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    extras = [r for extra in IMAGE_EXTRAS for r in project["optional-dependencies"][extra]]
    wanted = [*project["dependencies"], *extras, *pyproject["build-system"]["requires"]]
    return [Requirement(text) for text in wanted]


def entries() -> list[tuple[str, str, str, list[str]]]:
    """(name, version, marker, hashes) of every requirement in the lock."""
    text = re.sub(r"\s*\\\n\s*", " ", LOCK.read_text())
    found = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.fullmatch(
            r"(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)(?: ; (?P<marker>[^-]+?))?"
            r"(?P<hashes>(?: --hash=sha256:[0-9a-f]{64})*)",
            line.strip(),
        )
        assert match, f"not a pinned, hashed requirement: {line[:100]}"
        hashes = re.findall(r"sha256:([0-9a-f]{64})", match["hashes"])
        found.append((match["name"], match["version"], match["marker"] or "", hashes))
    return found


def test_every_locked_requirement_is_pinned_with_its_hashes() -> None:
    locked = entries()
    assert len(locked) > 30
    for name, _, _, hashes in locked:
        assert hashes, f"{name} has no hash: pip --require-hashes would refuse the whole file"


def test_the_lock_covers_every_runtime_dependency_at_a_version_pyproject_allows() -> None:
    versions: dict[str, list[Version]] = {}
    for name, version, _, _ in entries():
        versions.setdefault(canonicalize_name(name), []).append(Version(version))
    missing, refused = [], []
    for requirement in declared():
        pinned = versions.get(canonicalize_name(requirement.name))
        if not pinned:
            missing.append(requirement.name)
        elif not all(requirement.specifier.contains(v, prereleases=True) for v in pinned):
            refused.append(f"{requirement} (locked: {', '.join(map(str, pinned))})")
    assert not missing, f"not in {LOCK.name}: {missing}: run `make lock`"
    assert not refused, f"locked outside pyproject.toml's range: {refused}: run `make lock`"


def test_the_extras_the_image_needs_are_locked_too() -> None:
    # redis[hiredis] and uvicorn[standard] bring these: pip --no-deps would not.
    locked = {canonicalize_name(name) for name, _, _, _ in entries()}
    assert {"hiredis", "uvloop", "httptools"} <= locked


def test_the_image_installs_the_lock_with_hashes_and_the_package_without_dependencies() -> None:
    dockerfile = re.sub(r"\\\n\s*", "", (REPO / "Dockerfile").read_text())
    installs = re.findall(r"pip install ([^&\n]+)", dockerfile)
    assert len(installs) == 2, installs
    lock, package = (set(words.split()) for words in installs)
    assert {"--require-hashes", "--no-deps", "/tmp/requirements.txt"} <= lock
    assert {"--no-deps", "--no-build-isolation", "/src"} <= package
    assert "COPY deploy/image/requirements.txt /tmp/requirements.txt" in dockerfile
    assert "!deploy/image/requirements.txt" in (REPO / ".dockerignore").read_text().splitlines()
