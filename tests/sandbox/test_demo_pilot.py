"""`make demo DEMO_ARGS=--pilot`, end to end: the whole sandbox runs (the production bot, the
Slack emulator and its page, the simulated fleet at ×40) with the pilot on linux.2xlarge and the
GPU type, and nobody clicks. On 2xlarge the pilot acts after its hold and again while the queue
climbs, each act within its step and all within up_to, with Undo and Pause pilot on each reply;
the fleet's ARC boots its runners and the thread says they registered; the acts go back after
the drain. The GPU team's incident, whose new pods no node fits, gets no
act, and `/queue pilot` in its channel says why."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from sandbox.stack import (
    CHANNEL,
    GPU_CHANNEL,
    PILOT_TYPES,
    Sandbox,
    SandboxConfig,
    pilot_policy,
    start_sandbox,
)
from tests.support.running import eventually
from tests.support.servers import RedisServer
from tests.support.slack import shown

SPEED = 40
MAIN, GPU = PILOT_TYPES
ACT = "queuepilot (policy) scaled"
DECLINED = "runners cannot start"


@pytest.fixture
def sandbox(redis_server: RedisServer) -> Iterator[Sandbox]:
    """A fleet minute every 1.5 s, read every second, a status every 5 s; put back 2 s after the
    resolve: the two incidents in about two minutes."""
    redis_server.flush()
    config = SandboxConfig(
        speed=SPEED,
        metrics_interval_s=1,
        status_interval_s=5,
        drain_check_s=2,
        revert_settle_s=2,
        pilot=True,
    )
    with ExitStack() as stack:
        yield start_sandbox(stack, redis_server.url, "qppilot", config)


def incident_thread(sandbox: Sandbox, channel: str) -> list[Any]:
    """The replies in the channel's incident thread (not an early warning's)."""
    roots = [m for m in sandbox.emulator.channel_messages(channel) if "Early warning" not in m.text]
    return sandbox.emulator.thread(channel, roots[0].ts)[1:] if roots else []


def incident_replies(sandbox: Sandbox, channel: str) -> list[str]:
    return [shown(m) for m in incident_thread(sandbox, channel)]


def acts(sandbox: Sandbox, channel: str, runner_type: str) -> list[str]:
    """The pilot's own replies, one per act (the summary's timeline quotes them too)."""
    act = re.compile(rf"Incident \S+: {re.escape(ACT)} {re.escape(runner_type)} by \+")
    return [shown(m) for m in incident_thread(sandbox, channel) if act.match(m.text)]


async def pilot_answer(sandbox: Sandbox, channel: str) -> str:
    """`/queue pilot` typed in the channel's composer: the answer only the visitor sees."""
    asked = len(sandbox.emulator.ephemerals(channel))
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.post(
            f"{sandbox.page_url.rstrip('/')}/_page/command",
            json={"channel": channel, "text": "/queue pilot"},
        )
    assert answer.status_code == 200, answer.text
    found = await eventually(
        lambda: sandbox.emulator.ephemerals(channel)[asked:], what="/queue pilot's answer"
    )
    return str(found[-1].text)


def gpu_line(answer: str) -> str:
    """The GPU type's paragraph of a `/queue pilot` answer."""
    return next((p for p in answer.split("\n\n") if GPU in p), "")


@pytest.mark.slow
async def test_the_pilot_acts_on_2xlarge_within_its_policy_is_followed_and_declines_on_the_gpu(
    sandbox: Sandbox,
) -> None:
    policy = pilot_policy(SPEED)
    [act, *_] = await eventually(
        lambda: acts(sandbox, CHANNEL, MAIN), what="the pilot's act on 2xlarge", timeout=120
    )
    assert "pilot_undo" in act and "pilot_pause" in act, "Undo and Pause pilot on its reply"
    # The fleet's ARC boots the runners the raised maximum lets it; the thread says they came.
    came = re.compile(rf"\+\d+ on {re.escape(MAIN)} at [^\n]*?: \d+ registered by")
    await eventually(
        lambda: any(came.search(r) for r in incident_replies(sandbox, CHANNEL)),
        what="the act followed to its runners registered",
        timeout=60,
    )
    await eventually(
        lambda: any(f"Put {MAIN} back" in r for r in incident_replies(sandbox, CHANNEL)),
        what="the act put back after the drain",
        timeout=120,
    )

    await eventually(
        lambda: incident_replies(sandbox, GPU_CHANNEL) or None,
        what="the GPU team's incident",
        timeout=120,
    )

    async def declined() -> str:
        said = gpu_line(await pilot_answer(sandbox, GPU_CHANNEL))
        return said if DECLINED in said else ""

    said = await eventually(declined, what="/queue pilot saying why it declines", timeout=90)
    assert "paused" not in said, said
    await eventually(
        lambda: any(" resolved after " in r for r in incident_replies(sandbox, GPU_CHANNEL)),
        what="the GPU incident resolved",
        timeout=120,
    )
    made = [
        int(n)
        for a in acts(sandbox, CHANNEL, MAIN)
        for n in re.findall(rf"{re.escape(MAIN)} by \+(\d+)", a)[:1]
    ]
    assert made and all(n <= policy["step"] for n in made), made
    assert sum(made) <= policy["up_to"], made
    assert acts(sandbox, GPU_CHANNEL, GPU) == [], incident_replies(sandbox, GPU_CHANNEL)
    assert [c for c in sandbox.fleet.bounds_changes if c[0] == GPU] == []
