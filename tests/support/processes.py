"""`python -m bot serve` as real processes, for tests that kill, pause or stop replicas."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bot.config import Settings
from tests.support.running import WEBHOOK_TOKEN, eventually
from tests.support.servers import free_port
from tests.support.slack import BOT_TOKEN, CHANNEL, SIGNING_SECRET, Slack

REPO = Path(__file__).resolve().parents[2]


def bot_env(slack: Slack, redis_url: str, port: int, **overrides: str) -> dict[str, str]:
    """The environment `queuepilot serve` reads, without any of the developer's own settings."""
    fields = {name.upper() for name in Settings.model_fields}
    env = {k: v for k, v in os.environ.items() if k.upper() not in fields}
    env.update(
        PYTHONPATH=str(REPO),
        PYTHONUNBUFFERED="1",
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack.api_url,
        SLACK_CHANNEL=CHANNEL,
        REDIS_URL=redis_url,
        HOST="127.0.0.1",
        PORT=str(port),
        ALERT_WEBHOOK_TOKEN=WEBHOOK_TOKEN,
        INTAKE_RECLAIM_IDLE_MS="500",
        SLACK_POST_INTERVAL_MS="20",
        SLACK_UPDATE_INTERVAL_MS="20",
        STATUS_TICK_SECONDS="0.2",
        # A replica killed or paused is taken over from within 2 s, not the default's 6.
        LEADER_LEASE_MS="2000",
    )
    env.update(overrides)
    return env


class BotProcess:
    """`python -m bot serve` in a temporary directory (so no `.env` is read), output to a file."""

    def __init__(
        self,
        slack: Slack,
        redis_url: str,
        workdir: Path,
        name: str,
        *,
        argv: Sequence[str] = ("-m", "bot", "serve"),
        **env: str,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        self.name = name
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, *argv],
                cwd=workdir,
                env=bot_env(slack, redis_url, self.port, **env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def consumer_prefix(self) -> str:
        """Consumer names are `<hostname>-<pid>-<id>` (bot/app.py)."""
        return f"{socket.gethostname()}-{self.process.pid}-"

    async def wait_healthy(self) -> None:
        async def healthy() -> bool:
            assert self.process.poll() is None, f"{self.name} exited: {self.output()}"
            try:
                async with httpx.AsyncClient(timeout=1) as http:
                    return (await http.get(f"{self.url}/healthz")).status_code == 200
            except httpx.TransportError:
                return False

        # Long: a new process imports a second of CPU's worth before it serves, and with the
        # suite's workers and two busy loops on two cores it gets a tenth of one (20 s ran out).
        await eventually(healthy, timeout=60, what=f"{self.name} /healthz")

    async def send(self, payload: dict[str, Any]) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            return await http.post(
                "/alerts/grafana",
                json=payload,
                headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"},
            )

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused process must die too
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""
