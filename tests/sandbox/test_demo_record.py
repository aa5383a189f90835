"""The demo's incident on the record, as a visitor reads it: the whole sandbox runs (the production
bot, the Slack emulator and its page, the simulated fleet at ×60), the 2xlarge story is left
alone, and once the queue drained `/queue postmortem` is typed in the page's composer. Every
number is on the wall clock's minutes, as the incident's duration is: no job waited longer than
the demo has been running. The write-up keeps the early warning the incident took on."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from sandbox.stack import CHANNEL, Sandbox, SandboxConfig, start_sandbox
from tests.support.running import eventually
from tests.support.servers import RedisServer


@pytest.fixture
def sandbox(redis_server: RedisServer) -> Iterator[Sandbox]:
    """A fleet minute a second, read every second (the early warning's readings come before the
    alert), a status every 5 s and drain checks 2 s apart: the story in under a minute."""
    redis_server.flush()
    config = SandboxConfig(speed=60, metrics_interval_s=1, status_interval_s=5, drain_check_s=2)
    with ExitStack() as stack:
        yield start_sandbox(stack, redis_server.url, "qprecord", config)


def incident_thread(sandbox: Sandbox) -> list[Any]:
    roots = [m for m in sandbox.emulator.channel_messages(CHANNEL) if "Early warning" not in m.text]
    return sandbox.emulator.thread(CHANNEL, roots[0].ts) if roots else []


def text_of(message: Any) -> str:
    return message.text + str(message.blocks)


def summary(sandbox: Sandbox) -> str | None:
    found = [text_of(m) for m in incident_thread(sandbox) if " resolved after " in m.text]
    return found[0] if found else None


def postmortem(sandbox: Sandbox) -> str | None:
    for message in incident_thread(sandbox):
        for file in message.files:
            return (sandbox.emulator.file_bytes(file["id"]) or b"").decode()
    return None


def minutes_said(text: str, label: str) -> float:
    found = re.search(rf"{label}: \*([0-9.]+) (min|s)\*", text)
    assert found is not None, (label, text)
    return float(found[1]) / (60 if found[2] == "s" else 1)


async def test_the_demos_numbers_are_real_minutes_and_the_record_keeps_its_early_warning(
    sandbox: Sandbox,
) -> None:
    started = time.monotonic()
    said = await eventually(lambda: summary(sandbox), what="the drained incident", timeout=240)
    running_mins = (time.monotonic() - started) / 60
    # A wait in fleet minutes (10 and more at ×30) is longer than the demo has been running.
    assert 0 < minutes_said(said, "Peak longest wait") <= running_mins, (running_mins, said)
    assert "Took on the early warning raised" in said, "the summary's timeline has it"

    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.post(
            f"{sandbox.page_url.rstrip('/')}/_page/command",
            json={"channel": CHANNEL, "text": "/queue postmortem 1"},
        )
    assert answer.status_code == 200, answer.text
    markdown = await eventually(lambda: postmortem(sandbox), what="the postmortem", timeout=60)
    assert "| Took on the early warning raised " in markdown
    assert "which said: linux.2xlarge: queue building" in markdown
    # The queue at its peak (the readings' or, higher, the alert's own figure), not as it ended.
    assert re.search(r"\n(The queue at its peak|At its peak), 20", markdown), markdown
