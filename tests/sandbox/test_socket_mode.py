"""What the emulator's Socket Mode does that no test of the bot reaches: `hello` counts the app's
connections and names it, and an event nobody acknowledges is sent again on the next connection,
then given up after Slack's three retries. What it refuses is test_socket_mode_refusals.py; the
rest (envelopes and their acks, several connections, `disconnect` and reconnecting) is tested
through the bot in tests/handlers/test_socket_mode.py.
"""

from __future__ import annotations

import asyncio

import aiohttp

from tests.support.slack_socket import CHANNEL, SocketSlack, received


async def test_hello_counts_the_connections_and_names_the_app(
    socket: SocketSlack, ws: aiohttp.ClientSession
) -> None:
    async with ws.ws_connect(await socket.socket_url()) as first:
        hello = await received(first)
        assert hello["type"] == "hello"
        assert hello["num_connections"] == 1
        assert hello["connection_info"] == {"app_id": "A0QUEUEBOT"}
        assert {"host", "approximate_connection_time"} <= set(hello["debug_info"])
        async with ws.ws_connect(await socket.socket_url()) as second:
            assert (await received(second))["num_connections"] == 2


async def test_an_unacknowledged_event_is_retried_on_the_next_connection(
    socket: SocketSlack, ws: aiohttp.ClientSession
) -> None:
    async with (
        ws.ws_connect(await socket.socket_url()) as a,
        ws.ws_connect(await socket.socket_url()) as b,
    ):
        await received(a), await received(b)
        event = {"type": "app_mention", "user": "U0ALICE", "text": "hi", "channel": CHANNEL}
        sent = asyncio.create_task(
            socket.http.post("/_emulator/socket/event", json={"event": event})
        )
        first = await received(a)
        assert (first["type"], first["retry_attempt"], first["retry_reason"]) == (
            "events_api",
            0,
            "",
        )
        retry = await received(b)  # never acknowledged on a: the next goes to b
        assert retry["envelope_id"] == first["envelope_id"]
        assert (retry["retry_attempt"], retry["retry_reason"]) == (1, "timeout")
        assert retry["payload"]["event_id"] == first["payload"]["event_id"]
        await b.send_json({"envelope_id": retry["envelope_id"]})
        assert (await sent).json() == {"ok": True, "acknowledged": True}
    attempts = [(e.retry_attempt, e.acked) for e in socket.socket.envelopes()]
    assert attempts == [(0, False), (1, True)]


async def test_an_event_never_acknowledged_is_given_up_after_three_retries(
    socket: SocketSlack, ws: aiohttp.ClientSession
) -> None:
    async with ws.ws_connect(await socket.socket_url()) as app:
        await received(app)
        sent = await socket.http.post(
            "/_emulator/socket/event", json={"event": {"type": "app_mention", "text": "hi"}}
        )
        assert sent.json() == {"ok": True, "acknowledged": False}
        attempts = [(await received(app))["retry_attempt"] for _ in range(4)]
    assert attempts == [0, 1, 2, 3]
