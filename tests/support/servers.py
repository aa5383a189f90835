"""Real servers for the tests, each on a free loopback port in its own temporary directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from sandbox import redis_server
from sandbox.redis_server import free_port

__all__ = ["Alertmanager", "Prometheus", "RedisServer", "free_port", "require_binary", "wait_until"]


def require_binary(name: str) -> str:
    """The binary's path; a skip on a developer machine without it, a failure in CI."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (make test installs it with apt)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def wait_until(predicate, *, timeout: float = 30.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.02)
    raise TimeoutError(f"timed out waiting for {what}")


class RedisServer(redis_server.RedisServer):
    """The sandbox's redis-server, skipped (failed under CI) where it is not installed."""

    def __init__(self) -> None:
        super().__init__(binary=require_binary("redis-server"))


class _ReadyServer:
    """A server binary on a free port in its own temp dir, ready once GET /-/ready is 200."""

    def __init__(self, name: str) -> None:
        self.binary = require_binary(name)
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"qp-{name}-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, *args: str, timeout: float) -> None:
        self._launch(*args)
        self.wait_ready(timeout)

    def _launch(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [self.binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def wait_ready(self, timeout: float) -> None:
        wait_until(
            lambda: httpx.get(f"{self.url}/-/ready", timeout=0.5).status_code == 200,
            what=f"{Path(self.binary).name} ready",
            timeout=timeout,
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


class Alertmanager(_ReadyServer):
    """`prometheus-alertmanager` with one webhook receiver, grouping fast enough for tests."""

    def __init__(self, webhook_url: str, *, bearer_token: str | None = None) -> None:
        super().__init__("prometheus-alertmanager")
        auth = (
            f"\n    http_config:\n      authorization:\n        credentials: {bearer_token}"
            if bearer_token
            else ""
        )
        (self.dir / "alertmanager.yml").write_text(
            "route:\n"
            "  receiver: queuepilot\n"
            "  group_by: [alertname]\n"
            "  group_wait: 1s\n"
            "  group_interval: 2s\n"
            "  repeat_interval: 1h\n"
            "receivers:\n"
            "- name: queuepilot\n"
            "  webhook_configs:\n"
            f"  - url: {webhook_url}\n"
            f"    send_resolved: true{auth}\n"
        )

    def start(self) -> None:
        self._run(
            f"--config.file={self.dir / 'alertmanager.yml'}",
            f"--storage.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            # One Alertmanager, no HA peers: in HA mode it holds notifications back until its
            # cluster settles (seconds), and it would take a cluster port besides.
            "--cluster.listen-address=",
            "--log.level=warn",
            timeout=20,
        )

    def post_alerts(self, alerts: list[dict[str, object]]) -> None:
        httpx.post(f"{self.url}/api/v2/alerts", json=alerts, timeout=5).raise_for_status()


class Prometheus(_ReadyServer):
    """`prometheus` scraping its targets each second (or each `scrape_interval`, in Prometheus's
    duration syntax), sending alerts to an Alertmanager if given. `labelled`: more targets, each
    with the labels its every series gets (`{"cluster": "prod"}`, as a Thanos or Mimir holding
    several clusters' series has them)."""

    def __init__(
        self,
        *,
        target: str | None = None,
        targets: list[str] | None = None,
        alertmanager: str | None = None,
        rules: str = "",
        scrape_interval: str = "1s",
        labelled: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__("prometheus")
        scraped = [*(targets or []), *([target] if target else [])]
        groups = [
            f"{{targets: ['{t}'], labels: {json.dumps(dict(labels))}}}"
            for t, labels in (labelled or {}).items()
        ]
        (self.dir / "rules.yml").write_text(rules or "groups: []\n")
        alerting = (
            f"alerting:\n  alertmanagers:\n  - static_configs: [{{targets: ['{alertmanager}']}}]\n"
            if alertmanager
            else ""
        )
        listed = ", ".join(f"'{t}'" for t in scraped)
        static = ", ".join([f"{{targets: [{listed}]}}", *groups])
        (self.dir / "prometheus.yml").write_text(
            "global:\n"
            f"  scrape_interval: {scrape_interval}\n"
            "  evaluation_interval: 1s\n"
            "rule_files: [rules.yml]\n"
            f"{alerting}"
            "scrape_configs:\n"
            "- job_name: fleet\n"
            f"  static_configs: [{static}]\n"
        )

    def backfill(self, openmetrics: str) -> None:
        """Past samples written as blocks before `start` (`promtool tsdb create-blocks-from
        openmetrics`, Prometheus's own backfill): a week of history without waiting a week.
        In blocks of up to eight days rather than promtool's default two hours: a week is then
        one or two blocks written and synced, not 85 (seconds instead of most of a minute)."""
        source = self.dir / "backfill.om"
        source.write_text(openmetrics)
        subprocess.run(
            [require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet",
             "--max-block-duration=192h", str(source), str(self.dir / "data")],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def start(self) -> None:
        self.launch()
        self.wait_ready(timeout=30)

    def launch(self) -> None:
        """Start the process; `wait_ready` waits for it to answer."""
        self._launch(
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--rules.alert.resend-delay=1s",
            "--log.level=warn",
        )


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's server mode on a free loopback port (AWS's APIs, SQS and Auto Scaling among
    them, as moto answers them); its URL."""
    from moto.server import ThreadedMotoServer  # the AWS tests' alone: imported when used

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
