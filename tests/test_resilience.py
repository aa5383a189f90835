"""Nothing acknowledged is lost: Redis outages, a killed consumer, Slack rate limits and refusals.

What a sender and a channel would notice: a 503 (never a 500) while the bot cannot persist, a
recovery without a restart, every accepted notification in Slack exactly once, Retry-After
honoured, and a permanent Slack error that neither wedges intake nor gets retried forever.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from bot.config import Settings
from tests.conftest import (
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    WEBHOOK_TOKEN,
    RunningBot,
    Slack,
    eventually,
    fixture_json,
    run_bot,
)
from tests.servers import RedisServer, free_port

FIRING = "grafana/queue-alert-firing.json"
AM_FIRING = "alertmanager/runner-queue-am-00-firing.json"
REPO = Path(__file__).resolve().parent.parent
STREAM = "qp:notifications"
GROUP = "intake"


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition, 0 when absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


async def metrics_of(running: RunningBot) -> str:
    response = await running.http.get("/metrics")
    assert response.status_code == 200
    return response.text


def other_group(payload: dict[str, Any], suffix: str) -> dict[str, Any]:
    changed = copy.deepcopy(payload)
    changed["groupKey"] = f"{payload['groupKey']}/{suffix}"
    return changed


# --- 1. Redis down: 503, then recovery without a restart ---------------------------------------


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server this test may stop and start (the session one is shared)."""
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


async def test_redis_outage_answers_503_and_recovers_without_restart(
    own_redis: RedisServer, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    firing = fixture_json(FIRING)
    async with run_bot(settings_for(redis_url=own_redis.url)) as running:
        first = await running.send("grafana", firing)
        assert first.status_code == 202, first.text
        await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="first thread")

        own_redis.stop()
        # Grafana retries a failed delivery: each attempt must be told to retry (503), not 500.
        for attempt in range(3):
            response = await running.send("grafana", other_group(firing, f"outage-{attempt}"))
            assert response.status_code == 503, response.text
            assert response.json() == {
                "status": "rejected",
                "error": "cannot persist the notification now; retry",
            }
        am = await running.send("alertmanager", fixture_json(AM_FIRING))
        assert am.status_code == 503, am.text
        ready = await running.http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["status"] == "unavailable"
        assert (await running.http.get("/healthz")).status_code == 200
        text = await metrics_of(running)
        assert (
            metric(text, "queuepilot_notifications_total", source="grafana", outcome="unavailable")
            == 3
        )

        own_redis.start()  # same port, empty: no persistence

        async def ready_again() -> bool:
            return (await running.http.get("/readyz")).status_code == 200

        await eventually(ready_again, timeout=10, what="/readyz back to 200")
        response = await running.send("grafana", other_group(firing, "after-outage"))
        assert response.status_code == 202, response.text

        await eventually(
            lambda: len(slack.emulator.channel_messages(CHANNEL)) == 2,
            timeout=15,
            what="a thread for the notification accepted after the outage",
        )
        roots = slack.emulator.channel_messages(CHANNEL)
        assert len(roots) == 2, "the 503-answered notifications must not have been posted"

        async def drained() -> bool:
            return await running.bot.stream.backlog() == 0

        await eventually(drained, what="stream drained")


# --- 2. A consumer killed between accept and post ----------------------------------------------


def bot_env(slack: Slack, redis_url: str, port: int) -> dict[str, str]:
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
    )
    return env


class BotProcess:
    """`python -m bot serve` in a temporary directory (so no `.env` is read), output to a file."""

    def __init__(self, slack: Slack, redis_url: str, workdir: Path, name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        self.name = name
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bot", "serve"],
                cwd=workdir,
                env=bot_env(slack, redis_url, self.port),
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

        await eventually(healthy, timeout=20, what=f"{self.name} /healthz")

    async def send(self, payload: dict[str, Any]) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            return await http.post(
                "/alerts/grafana",
                json=payload,
                headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}"},
            )

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="qp-resilience-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
async def test_consumer_killed_between_accept_and_post_loses_nothing(
    redis_url: str, slack: Slack, workdir: Path
) -> None:
    processes: list[BotProcess] = []
    store = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        first = BotProcess(slack, redis_url, workdir, "first")
        processes.append(first)
        await first.wait_healthy()
        slack.emulator.fail_next("chat.postMessage", status=503, count=1000)

        response = await first.send(fixture_json(FIRING))
        assert response.status_code == 202, response.text
        await eventually(
            lambda: slack.emulator.calls("chat.postMessage"),
            what="the consumer trying to post the root",
        )
        first.kill()

        # The 202 was a promise: the entry is still in Redis, pending for the dead consumer.
        assert store.xlen(STREAM) == 1
        pending = store.xpending(STREAM, GROUP)
        assert pending["pending"] == 1
        owners = {c["name"]: c["pending"] for c in pending["consumers"]}
        assert len(owners) == 1
        [(owner, count)] = owners.items()
        assert owner.startswith(first.consumer_prefix) and count == 1
        assert slack.emulator.channel_messages(CHANNEL) == []

        slack.emulator.reset()  # Slack is healthy again (this also forgets the logged calls)
        second = BotProcess(slack, redis_url, workdir, "second")
        processes.append(second)
        await second.wait_healthy()

        await eventually(
            lambda: slack.emulator.channel_messages(CHANNEL),
            timeout=20,
            what="the root message, posted by the second process",
        )
        await eventually(lambda: store.xlen(STREAM) == 0, what="stream drained")
        roots = slack.emulator.channel_messages(CHANNEL)
        assert len(roots) == 1
        assert "Jobs queueing in autoscaled machines" in roots[0].text + str(roots[0].blocks)
        posted = [c for c in slack.emulator.calls("chat.postMessage") if c.ok]
        assert len(posted) == 1, "the root was posted exactly once"
    except BaseException:
        for bot in processes:
            print(f"--- {bot.name} bot output ---\n{bot.output()}")
        raise
    finally:
        for bot in processes:
            bot.kill()
        store.close()


# --- 3. Slack 429: waited out, not hammered ----------------------------------------------------


async def test_slack_429_is_waited_out(running_bot: RunningBot, slack: Slack) -> None:
    slack.emulator.fail_next("chat.postMessage", status=429, retry_after=1)
    response = await running_bot.send("grafana", fixture_json(FIRING))
    assert response.status_code == 202, response.text

    await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root message")
    calls = slack.emulator.calls("chat.postMessage")
    assert [c.status for c in calls] == [429, 200]
    assert calls[1].at - calls[0].at >= 0.95, "the retry must wait for Retry-After: 1"
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1

    text = await metrics_of(running_bot)
    assert metric(text, "queuepilot_slack_rate_limited_total", method="chat.postMessage") >= 1


# --- 4. Permanent Slack errors don't wedge intake ----------------------------------------------


async def test_permanent_slack_error_does_not_wedge_intake(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    firing = fixture_json(FIRING)
    async with run_bot(settings_for(slack_channel="C0MISSING")) as running:

        async def drained() -> bool:
            return await running.bot.stream.backlog() == 0

        for attempt in range(2):
            response = await running.send("grafana", other_group(firing, f"g{attempt}"))
            assert response.status_code == 202, response.text
            await eventually(drained, what=f"notification {attempt} acknowledged")

        calls = slack.emulator.calls("chat.postMessage")
        assert [c.error for c in calls] == ["channel_not_found"] * 2, "one try per notification"
        assert await running.bot.redis.xlen(running.bot.stream.dead_key) == 0

        # Showing that something does NOT happen takes a wait: several reclaim cycles
        # (reclaim idle 500 ms) and status ticks (0.1 s), in which a retry would show up.
        await asyncio.sleep(1.5)
        assert len(slack.emulator.calls("chat.postMessage")) == 2, "refusals must not be retried"

        assert (await running.http.get("/healthz")).status_code == 200
        assert (await running.http.get("/readyz")).status_code == 200
        text = await metrics_of(running)
        assert (
            metric(
                text,
                "queuepilot_slack_calls_total",
                method="chat.postMessage",
                outcome="channel_not_found",
            )
            == 2
        )


# --- 5. One notification the consumer cannot process does not stop intake ---------------------


async def test_unprocessable_notification_does_not_stop_intake(
    running_bot: RunningBot, slack: Slack
) -> None:
    """A lone UTF-16 surrogate (`\\ud800`) is valid JSON syntax; whether the bot refuses it (400)
    or accepts and sets it aside, the notifications after it must still reach Slack."""
    firing = fixture_json(FIRING)
    poison = other_group(firing, "\ud800")
    response = await running_bot.send("grafana", json.dumps(poison).encode())
    assert response.status_code in (202, 400), response.text

    response = await running_bot.send("grafana", other_group(firing, "next"))
    assert response.status_code == 202, response.text
    await eventually(
        lambda: slack.emulator.channel_messages(CHANNEL),
        timeout=5,
        what="a thread for the notification after the unprocessable one",
    )

    async def drained() -> bool:
        return await running_bot.bot.stream.backlog() == 0

    await eventually(drained, what="stream drained (the bad entry set aside, not retried forever)")
