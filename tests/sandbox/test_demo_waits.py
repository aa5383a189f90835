"""The demo's longest wait, as a visitor reads the root: the whole sandbox runs (the production
bot, the Slack emulator, the simulated fleet at ×60) and the 2xlarge story is left alone. While
its jobs queue and start, every version of the root says a wait: never "not known", which only
a wait nothing knows may say. The jobs the HUD lists are said over its threshold on the wall
clock's minutes, as the waits beside them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from sandbox.stack import CHANNEL, FLEET_MINUTES, Sandbox, SandboxConfig, start_sandbox
from sandbox.transcript import mrkdwn_to_text
from tests.support.running import eventually
from tests.support.servers import RedisServer

SPEED = 60


@pytest.fixture
def sandbox(redis_server: RedisServer) -> Iterator[Sandbox]:
    """A fleet minute a second, read every second, drain checks 2 s apart: the story in under
    a minute."""
    redis_server.flush()
    config = SandboxConfig(speed=SPEED, metrics_interval_s=1, status_interval_s=5, drain_check_s=2)
    with ExitStack() as stack:
        yield start_sandbox(stack, redis_server.url, "qpwaits", config)


def incident_root(sandbox: Sandbox) -> Any | None:
    roots = [m for m in sandbox.emulator.channel_messages(CHANNEL) if "Early warning" not in m.text]
    return roots[0] if roots else None


def shown(message: Any) -> str:
    """The root as a reader sees it: its blocks' text, mrkdwn rendered."""
    found: list[str] = []

    def texts(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("text"), str):
                found.append(value["text"])
            for item in value.values():
                texts(item)
        elif isinstance(value, list):
            for item in value:
                texts(item)

    texts(message.blocks)
    return "\n".join(mrkdwn_to_text(text) for text in found)


async def test_the_demos_root_says_a_wait_whenever_its_jobs_queue_and_start(
    sandbox: Sandbox,
) -> None:
    versions: list[str] = []

    def root_said(wanted: str) -> bool:
        root = incident_root(sandbox)
        if root is None:
            return False
        text = shown(root)
        if not versions or versions[-1] != text:
            versions.append(text)
        return wanted in text

    await eventually(lambda: root_said(" queued"), what="the 2xlarge incident", timeout=120)
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.post(
            f"{sandbox.page_url.rstrip('/')}/_page/command",
            json={"channel": CHANNEL, "text": "/queue jobs linux.2xlarge"},
        )
    assert answer.status_code == 200, answer.text
    await eventually(lambda: root_said("Resolved"), what="the incident resolved", timeout=240)
    queueing = [text for text in versions if re.search(r"linux\.2xlarge: [1-9]\d* queued", text)]
    assert queueing, versions
    assert [text for text in versions if "not known" in text] == []
    assert all("longest wait" in text or "slowest recent start" in text for text in queueing)

    def jobs_answer() -> str:
        found = [m.text for m in sandbox.emulator.ephemerals(CHANNEL) if "Queued jobs" in m.text]
        return found[0] if found else ""

    # The HUD's 5 fleet minutes, said in the wall clock's as every wait is: 5 s at ×60.
    jobs = await eventually(jobs_answer, what="the jobs behind the queue", timeout=30)
    over = FLEET_MINUTES["hud_jobs_over_minutes"] / SPEED
    assert f"waiting over {over:.1f} min" in jobs and "over 5 min" not in jobs, jobs
