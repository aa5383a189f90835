"""A development build names the commit it was built from however it is installed: a wheel built
from a git checkout (`pip install .`), one built from that checkout's sdist (no .git left), and the
image's build (no .git, QUEUEPILOT_COMMIT given); a release names none. Each test builds and
installs the package as pip does, offline, with this environment's setuptools, and runs the
installed `queuepilot --version`. (An editable install asks its checkout at run time:
tests/checks/test_cli.py.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

from tests.deploy.test_release import project_version

REPO = Path(__file__).resolve().parents[2]
# What a build reads; the image's context holds the same (.dockerignore).
FILES = ["pyproject.toml", "setup.py", "README.md"]
PACKAGES = ["bot", "handlers"]
# A build here sees only the commit a test gives it.
ENV = {name: value for name, value in os.environ.items() if name != "QUEUEPILOT_COMMIT"}


def development_version() -> str:
    """This checkout's version, or on a release's own commit the development version after it."""
    version = Version(project_version())
    return str(version) if version.is_devrelease else f"{version.major}.{version.minor + 1}.0.dev0"


def run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] = ENV) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{command}: {done.stderr}"
    return done.stdout


def pip(*args: str | Path, env: dict[str, str] = ENV) -> None:
    offline = ["--no-deps", "--no-index", "--no-cache-dir", "--quiet"]
    run(sys.executable, "-m", "pip", *args, *offline, env=env)


def sources(to: Path, version: str | None = None) -> Path:
    """The package's files as they are in this checkout, optionally at another version."""
    to.mkdir()
    for name in FILES:
        shutil.copy(REPO / name, to / name)
    for name in PACKAGES:
        shutil.copytree(REPO / name, to / name, ignore=shutil.ignore_patterns("__pycache__"))
    if version is not None:
        pyproject = to / "pyproject.toml"
        text = pyproject.read_text()
        pyproject.write_text(re.sub(r'(?m)^version = ".*"$', f'version = "{version}"', text))
    return to


def commit_all(tree: Path) -> str:
    """`tree` as a git checkout of one new commit, whose hash this returns: a commit no other
    checkout has, so only the built package can name it."""
    git = ["git", "-C", tree, "-c", "user.name=queuepilot", "-c", "user.email=ci@example.com"]
    run(*git, "init", "--quiet")
    run(*git, "add", "--all")
    run(*git, "-c", "commit.gpgsign=false", "commit", "--quiet", "--message", "a build")
    return run(*git, "rev-parse", "HEAD").strip()


def wheel_of(source: Path, out: Path, env: dict[str, str] = ENV) -> Path:
    """`pip wheel` of a source tree or an sdist: what `pip install .` builds and installs."""
    # With this environment's setuptools (the dev extra's); --check-build-dependencies refuses an
    # older one by name rather than by a schema error halfway through the build.
    build = ["--no-build-isolation", "--check-build-dependencies"]
    pip("wheel", *build, "--wheel-dir", out, source, env=env)
    (built,) = out.glob("queuepilot-*.whl")
    return built


def installed_version(wheel: Path, tmp_path: Path) -> str:
    """`queuepilot --version` of the wheel installed (non-editable) in a directory of its own,
    with this environment's dependencies and never this checkout's package."""
    site = tmp_path / "site"
    pip("install", "--target", site, wheel)
    env = {**ENV, "PYTHONPATH": str(site)}
    return run(site / "bin" / "queuepilot", "--version", cwd=tmp_path, env=env).strip()


def test_a_wheel_built_from_a_checkout_names_its_commit(tmp_path: Path) -> None:
    checkout = sources(tmp_path / "checkout", version=development_version())
    head = commit_all(checkout)

    wheel = wheel_of(checkout, tmp_path / "dist")

    assert installed_version(wheel, tmp_path) == f"queuepilot {development_version()}+g{head[:12]}"


def test_an_sdist_carries_its_checkouts_commit_to_the_wheel_built_from_it(tmp_path: Path) -> None:
    checkout = sources(tmp_path / "checkout", version=development_version())
    head = commit_all(checkout)
    # The backend's hook itself, as `python -m build --sdist --no-isolation` calls it.
    hook = "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"
    name = run(sys.executable, "-c", hook, tmp_path / "sdist", cwd=checkout).splitlines()[-1]

    wheel = wheel_of(tmp_path / "sdist" / name, tmp_path / "dist")

    assert installed_version(wheel, tmp_path) == f"queuepilot {development_version()}+g{head[:12]}"


def test_the_images_build_names_the_commit_it_is_given_without_git(tmp_path: Path) -> None:
    context = sources(tmp_path / "context", version=development_version())
    given = {**ENV, "QUEUEPILOT_COMMIT": "0123456789abcdef0123456789abcdef01234567"}

    wheel = wheel_of(context, tmp_path / "dist", env=given)

    assert installed_version(wheel, tmp_path) == f"queuepilot {development_version()}+g0123456789ab"


def test_a_release_names_no_commit(tmp_path: Path) -> None:
    release = Version(project_version()).base_version
    checkout = sources(tmp_path / "checkout", version=release)
    commit_all(checkout)

    wheel = wheel_of(checkout, tmp_path / "dist")

    assert installed_version(wheel, tmp_path) == f"queuepilot {release}"
