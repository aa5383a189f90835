"""`queuepilot check` as an operator runs it (`python -m bot check` with an environment of its
own), and a Redis that keeps its data, which the suite's Redis does not."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from tests.support.running import WEBHOOK_TOKEN
from tests.support.servers import free_port, require_binary, wait_until
from tests.support.slack import BOT_TOKEN, CHANNEL, SIGNING_SECRET, Slack

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 120


def check_env(slack: Slack, redis_url: str, **settings: str) -> dict[str, str]:
    """Only what an operator would set (nothing of the developer's own environment), for the
    session's Slack emulator and the given Redis."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO),
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_API_URL": slack.api_url,
        "SLACK_CHANNEL": CHANNEL,
        "REDIS_URL": redis_url,
        "ALERT_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        "BACKEND_TIMEOUT_SECONDS": "5",
        "SLACK_TIMEOUT_SECONDS": "5",
    }
    env.update(settings)
    return env


def run_check(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bot check` (or other arguments) in `cwd`, where no `.env` is."""
    return subprocess.run(
        [sys.executable, "-m", "bot", *(args or ("check",))],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def lines(result: subprocess.CompletedProcess[str], verdict: str = "") -> list[str]:
    """The report's finding lines (of one verdict: "ok", "warn", "FAIL")."""
    found = [line for line in result.stdout.splitlines() if not line.startswith("queuepilot ")]
    return [line for line in found if line.split(" ", 1)[0] == verdict] if verdict else found


@pytest.fixture
def persistent_redis() -> Iterator[str]:
    """A redis-server with AOF on: the configuration `check` finds nothing to say about."""
    binary = require_binary("redis-server")
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="qp-redis-aof-"))
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--appendonly", "yes"]
    command += ["--dir", str(workdir), "--logfile", "redis.log"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def answers() -> bool:
        with Redis(port=port, socket_timeout=1) as client:
            return bool(client.ping())

    try:
        wait_until(answers, what="redis-server with AOF")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def evicting_redis() -> Iterator[str]:
    """A redis-server that may evict keys (allkeys-lru), with RDB snapshots."""
    binary = require_binary("redis-server")
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="qp-redis-lru-"))
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "60 1"]
    command += ["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru", "--dir", str(workdir)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: Redis(port=port, socket_timeout=1).ping(), what="redis-server")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def empty_prometheus() -> Iterator[str]:
    """A real Prometheus that scrapes nothing: ARC's listeners are not among its targets."""
    from tests.support.servers import Prometheus

    prometheus = Prometheus(targets=[])
    prometheus.start()
    yield prometheus.url
    prometheus.stop()
