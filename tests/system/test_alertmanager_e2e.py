"""A real Alertmanager, configured as an operator would, drives one incident to resolved."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.running import WEBHOOK_TOKEN, eventually, run_bot
from tests.support.servers import Alertmanager, free_port
from tests.support.slack import CHANNEL, Slack


def queue_alert(
    runner_type: str, wait: int, queued: int, *, ends: datetime | None = None
) -> dict[str, Any]:
    alert: dict[str, Any] = {
        "labels": {
            "alertname": "RunnerQueueTimeHigh",
            "priority": "P2",
            "runner_type": runner_type,
            "team": "pytorch-dev-infra",
        },
        "annotations": {
            "summary": "Jobs are queueing in the autoscaled machines",
            "max_queue_time_mins": str(wait),
            "max_queue_size": str(queued),
            "runbook_url": "https://hud.pytorch.org/metrics",
        },
        "startsAt": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
        "generatorURL": "http://prometheus.invalid/graph?g0.expr=queue",
    }
    if ends is not None:
        alert["endsAt"] = ends.isoformat()
    return alert


@pytest.fixture
def bot_port() -> int:
    return free_port()


@pytest.fixture
def alertmanager(bot_port: int) -> Iterator[Alertmanager]:
    server = Alertmanager(
        f"http://127.0.0.1:{bot_port}/alerts/alertmanager", bearer_token=WEBHOOK_TOKEN
    )
    server.start()
    yield server
    server.stop()


@pytest.mark.slow
async def test_alertmanager_webhook_opens_updates_and_resolves_one_thread(
    settings_for: Any, slack: Slack, alertmanager: Alertmanager, bot_port: int
) -> None:
    async with run_bot(settings_for(), port=bot_port):
        await asyncio.to_thread(
            alertmanager.post_alerts, [queue_alert("linux.g5.4xlarge.nvidia.gpu", 114, 14)]
        )
        roots = await eventually(
            lambda: slack.emulator.channel_messages(CHANNEL),
            what="root from Alertmanager",
            timeout=20,
        )
        assert "linux.g5.4xlarge.nvidia.gpu" in json.dumps(roots[0].blocks)

        # A second runner type joins the same group: same thread, root edited, a reply says so.
        await asyncio.to_thread(
            alertmanager.post_alerts,
            [
                queue_alert("linux.g5.4xlarge.nvidia.gpu", 114, 14),
                queue_alert("linux.2xlarge", 71, 9),
            ],
        )
        await eventually(
            lambda: (
                "linux.2xlarge" in json.dumps(slack.emulator.channel_messages(CHANNEL)[0].blocks)
            ),
            what="second runner type on the root",
            timeout=20,
        )

        past = datetime.now(UTC) - timedelta(seconds=1)
        await asyncio.to_thread(
            alertmanager.post_alerts,
            [
                queue_alert("linux.g5.4xlarge.nvidia.gpu", 114, 14, ends=past),
                queue_alert("linux.2xlarge", 71, 9, ends=past),
            ],
        )
        await eventually(
            lambda: "resolved" in slack.emulator.channel_messages(CHANNEL)[0].text.lower(),
            what="resolved from Alertmanager",
            timeout=20,
        )
        assert len(slack.emulator.channel_messages(CHANNEL)) == 1
        calls = [
            c for c in slack.emulator.calls("chat.postMessage") if not c.params.get("thread_ts")
        ]
        assert len(calls) == 1, "one root message for the whole life of the group"
