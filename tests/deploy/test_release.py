"""Versions that say what they are: main carries a development version that every place naming a
version agrees on, and `make release` moves them all together (deploy/release.py), run as a
maintainer runs it, on a copy of the repository's files."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
FILES = ["pyproject.toml", "deploy/helm/queuepilot/Chart.yaml", "CHANGELOG.md", "docs/upgrading.md"]


def project_version(root: Path = REPO) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def chart(root: Path = REPO) -> dict[str, str]:
    return yaml.safe_load((root / "deploy/helm/queuepilot/Chart.yaml").read_text())


def first_heading(root: Path = REPO) -> str:
    found = re.search(r"^## (.+)$", (root / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert found is not None
    return found.group(1)


def release(root: Path, version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "deploy" / "release.py"), version],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_every_file_names_the_version_alike() -> None:
    """Main carries X.Y.Z.devN between releases; the release's own commit carries X.Y.Z, dated."""
    version = project_version()
    assert chart()["appVersion"] == version, "the image the chart deploys is this version's"
    semver = re.sub(r"\.dev(\d+)$", r"-dev.\1", version)
    assert chart()["version"] == semver, "Helm wants SemVer 2: 0.27.0.dev0 is 0.27.0-dev.0"
    if Version(version).is_devrelease:
        assert first_heading() == f"Unreleased ({version})", "CHANGELOG's newest entry is this"
    else:
        assert re.fullmatch(rf"{re.escape(version)} \(\d{{4}}-\d\d-\d\d\)", first_heading())


def test_a_release_then_the_next_development_version(checkout: Path) -> None:
    dev = Version(project_version())
    if not dev.is_devrelease:
        pytest.skip("the release's own commit: main opens the next development version after it")
    final, following = dev.base_version, f"{dev.major}.{dev.minor + 1}.0.dev0"
    notes = (checkout / "docs/upgrading.md").read_text()
    minor = f"{dev.major}.{dev.minor}"
    if not re.search(rf"^## From .* to {re.escape(minor)}\b", notes, re.MULTILINE):
        pytest.fail(f"docs/upgrading.md has no section for {minor}: a release would be refused")
    unreleased = (checkout / "CHANGELOG.md").read_text().count("\n- ")

    done = release(checkout, final)

    assert done.returncode == 0, done.stderr
    assert project_version(checkout) == final
    assert chart(checkout)["version"] == final and chart(checkout)["appVersion"] == final
    assert re.fullmatch(rf"{re.escape(final)} \(\d{{4}}-\d\d-\d\d\)", first_heading(checkout))
    assert (checkout / "CHANGELOG.md").read_text().count("\n- ") == unreleased, "no entry lost"

    done = release(checkout, following)

    assert done.returncode == 0, done.stderr
    assert project_version(checkout) == following
    assert chart(checkout)["version"] == f"{dev.major}.{dev.minor + 1}.0-dev.0"
    assert first_heading(checkout) == f"Unreleased ({following})"
    headings = re.findall(r"^## (.+)$", (checkout / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings[1].startswith(f"{final} ("), "the new heading sits above the release"


def test_a_release_without_rollback_notes_or_going_backwards_is_refused(checkout: Path) -> None:
    before = {name: (checkout / name).read_text() for name in FILES}
    dev = Version(project_version())
    if not dev.is_devrelease:
        pytest.skip("the release's own commit: main opens the next development version after it")
    upgrading = checkout / "docs/upgrading.md"
    upgrading.write_text(upgrading.read_text().replace("**Rolling back", "**Going"))

    refused = release(checkout, dev.base_version)

    assert refused.returncode == 1
    assert "rolling back" in refused.stderr
    backwards = release(checkout, "0.1.0")
    assert backwards.returncode == 1 and "is not after the current version" in backwards.stderr
    odd = release(checkout, "1.0")
    assert odd.returncode == 1 and "MAJOR.MINOR.PATCH" in odd.stderr
    after = {name: (checkout / name).read_text() for name in FILES}
    assert after == {**before, "docs/upgrading.md": upgrading.read_text()}, "nothing half-done"
