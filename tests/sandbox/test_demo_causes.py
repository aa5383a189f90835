"""The demo's fleet gives diagnostics the causes a CI engineer recognises, end to end: the whole
sandbox runs (the production bot, the Slack emulator and its page, the simulated fleet), and
`/queue diagnose` is typed in the page's composer as a visitor would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from sandbox.stack import CHANNEL, Sandbox, SandboxConfig, start_sandbox
from tests.support.running import eventually
from tests.support.servers import RedisServer


@pytest.fixture
def stalled(redis_server: RedisServer) -> Iterator[Sandbox]:
    """linux.2xlarge's listener stops acting on jobs three fleet minutes in (6 s); a listener
    frozen for 6 s counts as stalled, read every second: by the time the alert fires (fleet
    minute ~8), the first diagnostics can name it, not one refused for 30 s after a first run
    that came too early."""
    redis_server.flush()
    with ExitStack() as stack:
        config = SandboxConfig(
            speed=30,
            stall_listener=True,
            listener_stall_minutes=0.1,
            metrics_interval_s=1,
        )
        yield start_sandbox(stack, redis_server.url, "qpstall", config)


def incident_roots(sandbox: Sandbox) -> list[Any]:
    """The channel's incident roots (an early warning may come first, as a message of its own)."""
    return [m for m in sandbox.emulator.channel_messages(CHANNEL) if "Early warning" not in m.text]


def replies_text(sandbox: Sandbox) -> str:
    """The thread's replies, not its root: the root shows the likely cause as soon as the
    diagnosis is committed, before the diagnostics reply with its advice is posted."""
    roots = incident_roots(sandbox)
    if not roots:
        return ""
    replies = sandbox.emulator.thread(CHANNEL, roots[0].ts)[1:]
    return "\n".join(m.text + str(m.blocks) for m in replies)


@pytest.mark.slow
async def test_a_stalled_listener_is_named_and_the_advice_is_to_restart_it(
    stalled: Sandbox,
) -> None:
    await eventually(lambda: incident_roots(stalled), what="the incident", timeout=120)
    async with httpx.AsyncClient(timeout=10) as client:

        async def diagnosed() -> bool:
            await client.post(
                f"{stalled.page_url.rstrip('/')}/_page/command",
                json={"channel": CHANNEL, "text": "/queue diagnose"},
            )
            return "Likely cause:* Listener stalled" in replies_text(stalled)

        # Each run is refused for 30 s after the last ("just run"); the stall needs its 6 s.
        await eventually(diagnosed, what="the stalled listener named", timeout=150)
    text = replies_text(stalled)
    assert "restart the ARC listener of linux.2xlarge" in text
    assert "jobs assigned and unchanged for" in text
