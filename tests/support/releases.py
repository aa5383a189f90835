"""A released version's code, taken from git, to run as a replica beside the checkout's: what an
upgrade looks like from Redis and Slack, where a Deployment's pods run both for a while."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import REPO

# The packages a replica imports; the rest of a release (sandbox, tests, docs) is not shipped.
SHIPPED = ("bot", "handlers")

# `python -m bot serve`, after saying which code it imported: PYTHONPATH or the working
# directory decides, and an editable install of the checkout is one import away.
SERVE_SAYING_WHICH_CODE = (
    "-c",
    "import json, runpy, bot.app, handlers; "
    "print(json.dumps({'imported': {'bot': bot.app.__file__, 'handlers': handlers.__file__}}), "
    "flush=True); "
    "runpy.run_module('bot', run_name='__main__', alter_sys=True)",
    "serve",
)


def release_tree(commit: str, into: Path) -> Path:
    """The shipped packages as they were at `commit`, written under `into`; a skip where this
    clone lacks the commit (a shallow clone: CI fetches the whole history)."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the previous release's code comes from git")
    known = subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True
    )
    if known.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone (shallow?): git fetch --unshallow")
    archive = subprocess.run(
        [git, "-C", str(REPO), "archive", "--format=tar", commit, *SHIPPED],
        capture_output=True,
        check=True,
    )
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def imported_from(output: str) -> dict[str, str]:
    """Where a replica started with `SERVE_SAYING_WHICH_CODE` found `bot` and `handlers`."""
    for line in output.splitlines():
        if line.startswith('{"imported"'):
            return dict(json.loads(line)["imported"])
    raise AssertionError(f"the replica did not say which code it imported:\n{output[-2000:]}")
