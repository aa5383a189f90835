"""Real servers for the tests, each on a free loopback port in its own temporary directory."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_binary(name: str) -> str:
    """The binary's path; a skip on a developer machine without it, a failure in CI."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (make test installs it with apt)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def wait_until(predicate, *, timeout: float = 10.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.02)
    raise TimeoutError(f"timed out waiting for {what}")


class RedisServer:
    """`redis-server` without persistence; stop() and start() keep the port, like a restart."""

    def __init__(self) -> None:
        self.binary = require_binary("redis-server")
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="qp-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, what=f"redis-server on {self.port}")

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None

    def flush(self) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"FLUSHALL\r\n")
            sock.recv(16)


class Alertmanager:
    """`prometheus-alertmanager` with one webhook receiver, grouping fast enough for tests."""

    def __init__(self, webhook_url: str, *, bearer_token: str | None = None) -> None:
        self.binary = require_binary("prometheus-alertmanager")
        self.port = free_port()
        self.cluster_port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="qp-am-"))
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
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.dir / 'alertmanager.yml'}",
                f"--storage.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                f"--cluster.listen-address=127.0.0.1:{self.cluster_port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(
            lambda: httpx.get(f"{self.url}/-/ready", timeout=0.5).status_code == 200,
            what="alertmanager ready",
            timeout=20,
        )

    def post_alerts(self, alerts: list[dict[str, object]]) -> None:
        httpx.post(f"{self.url}/api/v2/alerts", json=alerts, timeout=5).raise_for_status()

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


class Prometheus:
    """`prometheus` scraping one target each second and sending its alerts to an Alertmanager."""

    def __init__(self, *, target: str, alertmanager: str, rules: str) -> None:
        self.binary = require_binary("prometheus")
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="qp-prom-"))
        (self.dir / "rules.yml").write_text(rules)
        (self.dir / "prometheus.yml").write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  evaluation_interval: 1s\n"
            "rule_files: [rules.yml]\n"
            "alerting:\n"
            "  alertmanagers:\n"
            f"  - static_configs: [{{targets: ['{alertmanager}']}}]\n"
            "scrape_configs:\n"
            "- job_name: fleet\n"
            f"  static_configs: [{{targets: ['{target}']}}]\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--rules.alert.resend-delay=1s",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(
            lambda: httpx.get(f"{self.url}/-/ready", timeout=0.5).status_code == 200,
            what="prometheus ready",
            timeout=30,
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)
