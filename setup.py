"""Records the commit a package is built from in the package (`bot/_commit.txt`), so that a
development build names it however it is installed (bot/telemetry.py reads it). Everything else
about the package is in pyproject.toml.

The hook is here rather than in pyproject.toml's `[tool.setuptools.cmdclass]`: both work in pip's
isolated build and in the image's `--no-build-isolation` one, but a setup.py goes into every sdist
by itself, whereas a module named there needs a MANIFEST.in line to reach it, or a wheel built from
the sdist fails.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
RECORD = Path("bot", "_commit.txt")


def _valid(text: str, source: str) -> str:
    commit = text.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{7,64}", commit):
        raise SystemExit(f"{source} is {text.strip()!r}: not a commit hash")
    return commit


def built_commit() -> str | None:
    """QUEUEPILOT_COMMIT (the image's build: its context has no .git), else the checkout's HEAD,
    else what the sdist this tree was unpacked from recorded."""
    if given := os.environ.get("QUEUEPILOT_COMMIT", "").strip():
        return _valid(given, "QUEUEPILOT_COMMIT")
    # At the checkout's top only: an unpacked sdist inside another repository is not its commit.
    if (ROOT / ".git").exists() and (head := _checkout_head()):
        return _valid(head, "git rev-parse HEAD")
    if (ROOT / RECORD).is_file():
        return _valid((ROOT / RECORD).read_text(), str(RECORD))
    return None


def _checkout_head() -> str | None:
    try:
        found = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None  # no git, or a repository without a commit yet
    return found.stdout


def record(tree: str, commit: str | None) -> None:
    # Unlinked first: an sdist's tree hard-links the sources, and build/ keeps an earlier build's.
    target = Path(tree, RECORD)
    target.unlink(missing_ok=True)
    if commit:
        target.write_text(f"{commit}\n")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        # An editable install runs the checkout itself, whose HEAD moves on after installing:
        # bot/telemetry.py asks git at run time there.
        if not self.editable_mode:
            record(self.build_lib, built_commit())


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        record(base_dir, built_commit())


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
