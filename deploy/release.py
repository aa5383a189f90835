"""`make release VERSION=…`: writes one version everywhere a release names it, together.

- pyproject.toml's `version` (PEP 440): what `--version` and `queuepilot_build_info` say;
- the chart's `appVersion` (the image tag it deploys by default) and `version` (SemVer 2, as Helm
  requires: 0.27.0.dev0 is 0.27.0-dev.0);
- CHANGELOG.md: a release renames the "Unreleased" heading to the version and the day; a
  development version opens a new "Unreleased" heading above the last release.

A release is refused while docs/upgrading.md has no section for it that says whether rolling back
to the release before is safe: every release's upgrade notes say so. Run from the repository's
root; it prints what it changed. docs/releasing.md has the whole procedure.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

PYPROJECT = Path("pyproject.toml")
CHART = Path("deploy/helm/queuepilot/Chart.yaml")
CHANGELOG = Path("CHANGELOG.md")
UPGRADING = Path("docs/upgrading.md")

_UNRELEASED = re.compile(r"^## Unreleased \((?P<version>[^)]+)\)$", re.MULTILINE)
_RELEASED = re.compile(r"^## (?P<version>\d+\.\d+\.\d+\S*)", re.MULTILINE)


class ReleaseError(Exception):
    pass


def chart_version(version: Version) -> str:
    """The SemVer 2 Helm requires of a chart, for a PEP 440 version this project uses."""
    # SemVer orders pre-releases by their words: "dev" before "rc" as PEP 440 does, but after
    # "alpha" and "beta", and rc1.dev0 after rc1. Those forms are refused, not mis-ordered.
    odd = version.pre is not None and (version.pre[0] != "rc" or version.dev is not None)
    unusual = version.epoch or version.post is not None or version.local
    if odd or unusual or len(version.release) != 3:
        raise ReleaseError(f"{version}: use MAJOR.MINOR.PATCH, with rcN or .devN at most")
    text = version.base_version
    if version.pre is not None:
        return f"{text}-rc.{version.pre[1]}"
    return f"{text}-dev.{version.dev}" if version.dev is not None else text


def current(pyproject: str) -> Version:
    found = re.search(r'^version = "([^"]+)"$', pyproject, re.MULTILINE)
    if found is None:
        raise ReleaseError(f"{PYPROJECT} has no version line")
    return Version(found.group(1))


def release(root: Path, wanted: str, today: datetime.date) -> list[str]:
    """Writes `wanted` into the files under `root`; what it changed, one line a file."""
    try:
        version = Version(wanted)
    except InvalidVersion:
        raise ReleaseError(f"{wanted!r} is not a PEP 440 version (e.g. 0.27.0)") from None
    if str(version) != wanted:
        raise ReleaseError(f"write the version as {version} (PEP 440's normal form)")
    semver = chart_version(version)
    pyproject, chart = (root / PYPROJECT).read_text(), (root / CHART).read_text()
    changelog = (root / CHANGELOG).read_text()
    was = current(pyproject)
    if version <= was:
        raise ReleaseError(f"{version} is not after the current version {was}")
    unreleased = _UNRELEASED.search(changelog)
    if version.is_devrelease:
        changelog = _open_unreleased(changelog, unreleased, version)
    else:
        if unreleased is None:
            raise ReleaseError(f"{CHANGELOG} has no '## Unreleased (…)' heading to release")
        _check_upgrade_notes((root / UPGRADING).read_text(), version)
        heading = f"## {version} ({today.isoformat()})"
        changelog = changelog[: unreleased.start()] + heading + changelog[unreleased.end() :]
    pyproject = re.sub(
        r'^version = "[^"]+"$', f'version = "{version}"', pyproject, count=1, flags=re.MULTILINE
    )
    chart = re.sub(r"^version: .*$", f"version: {semver}", chart, count=1, flags=re.MULTILINE)
    chart = re.sub(
        r"^appVersion: .*$", f'appVersion: "{version}"', chart, count=1, flags=re.MULTILINE
    )
    (root / PYPROJECT).write_text(pyproject)
    (root / CHART).write_text(chart)
    (root / CHANGELOG).write_text(changelog)
    return [
        f"{PYPROJECT}: version {was} -> {version}",
        f"{CHART}: version {semver}, appVersion {version}",
        f"{CHANGELOG}: "
        + ("'## Unreleased' for " if version.is_devrelease else "released as ")
        + str(version),
    ]


def _open_unreleased(changelog: str, unreleased: re.Match[str] | None, version: Version) -> str:
    heading = f"## Unreleased ({version})"
    if unreleased is not None:  # a later development version of the same release
        return changelog[: unreleased.start()] + heading + changelog[unreleased.end() :]
    last = _RELEASED.search(changelog)
    at = last.start() if last else len(changelog)
    return f"{changelog[:at]}{heading}\n\n{changelog[at:]}"


def _check_upgrade_notes(upgrading: str, version: Version) -> None:
    """The section "From X.Y to <this X.Y>" must say whether rolling back is safe."""
    minor = f"{version.major}.{version.minor}"
    section = re.search(
        rf"^## From [^\n]*\bto {re.escape(minor)}\b[^\n]*\n(?P<body>.*?)(?=^## |\Z)",
        upgrading,
        re.MULTILINE | re.DOTALL,
    )
    if section is None:
        raise ReleaseError(f"{UPGRADING} has no '## From … to {minor}' section")
    if "**Rolling back" not in section.group("body"):
        raise ReleaseError(
            f"{UPGRADING}'s section for {minor} does not say whether rolling back is safe "
            "(a paragraph starting '**Rolling back')"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="PEP 440: 0.27.0 to release, 0.28.0.dev0 to open the next")
    args = parser.parse_args(argv)
    try:
        changed = release(Path.cwd(), args.version, datetime.date.today())
    except (ReleaseError, OSError) as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 1
    print("\n".join(changed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
