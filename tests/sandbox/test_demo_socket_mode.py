"""`make demo` in Socket Mode: the bot connects over the emulator's socket as it starts, opens the
incident, and a click on the page reaches it as an `interactive` envelope."""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any

import httpx
import pytest

from sandbox.stack import CHANNEL as DEMO_CHANNEL
from sandbox.stack import SandboxConfig, start_sandbox
from tests.support.servers import RedisServer, wait_until


@pytest.mark.slow
def test_the_demo_in_socket_mode_opens_an_incident_and_takes_a_click(
    redis_server: RedisServer,
) -> None:
    redis_server.flush()
    with ExitStack() as stack:
        # A fleet minute a second: the alert fires some 8 s in; the story after it is the bot's.
        config = SandboxConfig(speed=60, socket_mode=True)
        sandbox = start_sandbox(stack, redis_server.url, "qpsocketdemo", config)
        socket = sandbox.emulator.socket
        assert socket is not None and socket.connections() == 1, "connected as it started"
        page = stack.enter_context(httpx.Client(base_url=sandbox.page_url, timeout=10))
        # The incident's root (an early warning may come first, as a message of its own).
        [root] = wait_for(
            lambda: incident_roots(sandbox.emulator.channel_messages(DEMO_CHANNEL)), 120, "root"
        )
        [block_id] = [
            b["block_id"]
            for b in root.blocks
            if any(e.get("action_id") == "incident_ack" for e in b.get("elements", []))
        ]
        ask = {
            "channel": DEMO_CHANNEL,
            "message_ts": root.ts,
            "block_id": block_id,
            "action_id": "incident_ack",
        }
        assert page.post("/_page/action", json=ask).json() == {"ok": True}
        wait_for(
            lambda: "acknowledged by" in page_root_text(page).lower(), 30, "the root acknowledged"
        )
        assert [e.type for e in socket.envelopes()] == ["interactive"]


def incident_roots(messages: list[Any]) -> list[Any]:
    return [m for m in messages if TITLE in m.text + str(m.blocks)]


def page_root_text(page: httpx.Client) -> str:
    state = page.get("/_page/state").json()
    [channel] = [c for c in state["channels"] if c["id"] == DEMO_CHANNEL]
    [root] = [m for m in channel["messages"] if TITLE in json.dumps(m)]
    return json.dumps(root)


TITLE = "Jobs queueing in autoscaled machines"


def wait_for(check: Any, timeout: float, what: str) -> Any:
    found: list[Any] = []

    def holds() -> bool:
        found[:] = [check()]
        return bool(found[0])

    wait_until(holds, timeout=timeout, what=what)
    return found[0]
