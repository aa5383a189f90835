"""The emulator's Socket Mode as an app meets it: `apps.connections.open`, the websocket's
`hello`, envelopes and their acks, the retries of an unacknowledged event, `disconnect`.

The app side is aiohttp's websocket client (what slack_sdk's `socket_mode.aiohttp` client is
built on) or slack_sdk's `SocketModeClient` itself; the page is driven over HTTP as the browser
drives it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import pytest
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator
from sandbox.stack import CHANNEL as DEMO_CHANNEL
from sandbox.stack import SandboxConfig, start_sandbox
from tests.support.running import eventually
from tests.support.servers import RedisServer, wait_until

APP_TOKEN = "xapp-1-A0QUEUEBOT-1-socket-test"
BOT_TOKEN = "xoxb-socket-test"
CHANNEL = "C0SOCKET"


@dataclass
class Slack:
    emulator: SlackEmulator
    server: RunningServer
    http: httpx.AsyncClient

    async def web(self, method: str, token: str | None, **params: Any) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = await self.http.post(f"/api/{method}", data=params, headers=headers)
        return response.json()

    async def socket_url(self) -> str:
        answer = await self.web("apps.connections.open", APP_TOKEN)
        assert answer["ok"], answer
        return str(answer["url"])

    async def post_incident(self) -> str:
        blocks = [
            {
                "type": "actions",
                "block_id": "acts",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "incident_ack",
                        "text": {"type": "plain_text", "text": "Acknowledge"},
                        "value": "1:abc",
                    }
                ],
            }
        ]
        posted = await self.web(
            "chat.postMessage", BOT_TOKEN, channel=CHANNEL, text="x", blocks=json.dumps(blocks)
        )
        return str(posted["ts"])

    async def click(self, ts: str) -> dict[str, Any]:
        body = {
            "channel": CHANNEL,
            "message_ts": ts,
            "block_id": "acts",
            "action_id": "incident_ack",
        }
        return (await self.http.post("/_page/action", json=body)).json()


@pytest.fixture
def emulator() -> Iterator[tuple[SlackEmulator, RunningServer]]:
    slack = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,), app_token=APP_TOKEN)
    assert slack.socket is not None
    # Slack's event retries come after a minute and five; the same order, sooner.
    slack.socket.retry_delays_s = (0.0, 0.2, 0.4)
    slack.socket.ack_timeout_s = 1.0
    slack.socket.disconnect_grace_s = 1.0
    with serve_in_thread(slack.app) as server:
        yield slack, server
        slack.close()


@pytest.fixture
async def slack(emulator: tuple[SlackEmulator, RunningServer]) -> AsyncIterator[Slack]:
    async with httpx.AsyncClient(base_url=emulator[1].url, timeout=10) as http:
        yield Slack(emulator[0], emulator[1], http)


@pytest.fixture
async def ws() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def received(socket: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await socket.receive(timeout=10)
    assert message.type == aiohttp.WSMsgType.TEXT, message
    return json.loads(message.data)


# -- apps.connections.open ---------------------------------------------------------------------


async def test_only_the_app_level_token_opens_a_connection(slack: Slack) -> None:
    assert await slack.web("apps.connections.open", BOT_TOKEN) == {
        "ok": False,
        "error": "not_allowed_token_type",
    }
    wrong = await slack.web("apps.connections.open", "xapp-1-A0OTHER-1-wrong")
    assert wrong == {"ok": False, "error": "invalid_auth"}
    assert (await slack.web("apps.connections.open", None))["error"] == "not_authed"
    url = await slack.socket_url()
    assert url.startswith(f"ws://127.0.0.1:{slack.server.port}/link/?ticket=")
    # And the app-level token is good for nothing else.
    posted = await slack.web("chat.postMessage", APP_TOKEN, channel=CHANNEL, text="hi")
    assert posted == {"ok": False, "error": "not_allowed_token_type"}


async def test_a_ticket_opens_one_connection_only(slack: Slack, ws: aiohttp.ClientSession) -> None:
    url = await slack.socket_url()
    async with ws.ws_connect(url) as first:
        assert (await received(first))["type"] == "hello"
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await ws.ws_connect(url)
        assert refused.value.status == 403
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await ws.ws_connect(url.replace("ticket=", "ticket=forged"))


async def test_hello_counts_the_connections_and_names_the_app(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    async with ws.ws_connect(await slack.socket_url()) as first:
        hello = await received(first)
        assert hello["type"] == "hello"
        assert hello["num_connections"] == 1
        assert hello["connection_info"] == {"app_id": "A0QUEUEBOT"}
        assert {"host", "approximate_connection_time"} <= set(hello["debug_info"])
        async with ws.ws_connect(await slack.socket_url()) as second:
            assert (await received(second))["num_connections"] == 2


# -- envelopes and acks ------------------------------------------------------------------------


async def test_a_click_is_an_interactive_envelope_and_the_ack_answers_the_page(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    ts = await slack.post_incident()
    async with ws.ws_connect(await slack.socket_url()) as app:
        await received(app)  # hello
        clicked = asyncio.create_task(slack.click(ts))
        envelope = await received(app)
        assert envelope["type"] == "interactive"
        assert envelope["accepts_response_payload"] is False
        assert envelope["payload"]["type"] == "block_actions"
        assert envelope["payload"]["actions"][0]["value"] == "1:abc"
        assert not clicked.done(), "the page waits for the app's ack"
        await app.send_json({"envelope_id": envelope["envelope_id"]})
        assert await clicked == {"ok": True}


async def test_a_slash_commands_ack_payload_is_shown_to_its_user(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    async with ws.ws_connect(await slack.socket_url()) as app:
        await received(app)
        asked = asyncio.create_task(
            slack.http.post("/_page/command", json={"channel": CHANNEL, "text": "/queue help"})
        )
        envelope = await received(app)
        assert envelope["type"] == "slash_commands"
        assert envelope["accepts_response_payload"] is True
        assert envelope["payload"]["command"] == "/queue"
        assert envelope["payload"]["text"] == "help"
        answer = {"envelope_id": envelope["envelope_id"], "payload": {"text": "How to use it"}}
        await app.send_json(answer)
        assert (await asked).json() == {"ok": True}
    [shown] = slack.emulator.ephemerals(CHANNEL)
    assert (shown.text, shown.user) == ("How to use it", "U0ALICE")


async def test_an_interaction_nobody_acknowledges_is_reported_not_retried(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    ts = await slack.post_incident()
    async with ws.ws_connect(await slack.socket_url()) as app:
        await received(app)
        answer = await slack.click(ts)
        assert answer["ok"] is False
        assert "did not answer within 3 seconds" in answer["problem"]
    assert len(slack.emulator.socket.envelopes()) == 1  # type: ignore[union-attr]


async def test_with_no_connection_the_page_says_the_app_is_not_connected(slack: Slack) -> None:
    answer = await slack.click(await slack.post_incident())
    assert answer == {
        "ok": False,
        "problem": "queuepilot did not respond: the app is not connected (Socket Mode)",
    }


async def test_each_envelope_goes_to_one_of_several_connections(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    ts = await slack.post_incident()
    async with (
        ws.ws_connect(await slack.socket_url()) as a,
        ws.ws_connect(await slack.socket_url()) as b,
    ):
        await received(a), await received(b)

        async def acknowledge(socket: aiohttp.ClientWebSocketResponse, seen: list[str]) -> None:
            async for message in socket:
                envelope = json.loads(message.data)
                seen.append(envelope["envelope_id"])
                await socket.send_json({"envelope_id": envelope["envelope_id"]})

        seen_a: list[str] = []
        seen_b: list[str] = []
        readers = [
            asyncio.create_task(acknowledge(a, seen_a)),
            asyncio.create_task(acknowledge(b, seen_b)),
        ]
        for _ in range(4):
            assert (await slack.click(ts))["ok"]
        for reader in readers:
            reader.cancel()
    assert len(seen_a) + len(seen_b) == 4, "each click reached the app once"
    assert not set(seen_a) & set(seen_b)
    assert seen_a and seen_b, "both connections take their share"


# -- retries -----------------------------------------------------------------------------------


async def test_an_unacknowledged_event_is_retried_on_the_next_connection(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    async with (
        ws.ws_connect(await slack.socket_url()) as a,
        ws.ws_connect(await slack.socket_url()) as b,
    ):
        await received(a), await received(b)
        event = {"type": "app_mention", "user": "U0ALICE", "text": "hi", "channel": CHANNEL}
        sent = asyncio.create_task(
            slack.http.post("/_emulator/socket/event", json={"event": event})
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
    attempts = [(e.retry_attempt, e.acked) for e in slack.emulator.socket.envelopes()]  # type: ignore[union-attr]
    assert attempts == [(0, False), (1, True)]


async def test_an_event_never_acknowledged_is_given_up_after_three_retries(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    async with ws.ws_connect(await slack.socket_url()) as app:
        await received(app)
        sent = await slack.http.post(
            "/_emulator/socket/event", json={"event": {"type": "app_mention", "text": "hi"}}
        )
        assert sent.json() == {"ok": True, "acknowledged": False}
        attempts = [(await received(app))["retry_attempt"] for _ in range(4)]
    assert attempts == [0, 1, 2, 3]


# -- disconnect --------------------------------------------------------------------------------


async def test_disconnect_is_said_before_the_connection_closes(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    async with ws.ws_connect(await slack.socket_url()) as app:
        await received(app)
        told = await slack.http.post("/_emulator/socket/disconnect", json={"reason": "warning"})
        assert told.json() == {"ok": True, "connections": 1}
        said = await received(app)
        assert (said["type"], said["reason"]) == ("disconnect", "warning")
        closed = await app.receive(timeout=10)
        assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
    bad = await slack.http.post("/_emulator/socket/disconnect", json={"reason": "bored"})
    assert bad.status_code == 400


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        ("/_emulator/socket/disconnect", b'{"reason": "bored"}', "reason must be one of"),
        ("/_emulator/socket/disconnect", b"[1]", "the body must be a JSON object"),
        ("/_emulator/socket/event", b'{"event": "hi"}', "event must be an object"),
        ("/_emulator/socket/event", b"{not json", "Expecting property name"),
    ],
)
async def test_a_control_call_gone_wrong_says_what_is_wrong(
    slack: Slack, path: str, body: bytes, detail: str
) -> None:
    """Both control endpoints refuse a test's mistake in one shape, naming the mistake."""
    refused = await slack.http.post(path, content=body)
    assert refused.status_code == 400
    answer = refused.json()
    assert (answer["ok"], answer["error"]) == (False, "invalid_arguments")
    assert answer["detail"].startswith(detail)


async def test_slack_sdks_client_reconnects_after_disconnect_and_still_gets_clicks(
    slack: Slack,
) -> None:
    ts = await slack.post_incident()
    web = AsyncWebClient(base_url=f"{slack.server.url}/api/")
    client = SocketModeClient(APP_TOKEN, web_client=web, ping_interval=1)
    clicks: list[str] = []

    async def on_request(client: SocketModeClient, request: SocketModeRequest) -> None:
        clicks.append(request.payload["actions"][0]["action_id"])
        await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))

    client.socket_mode_request_listeners.append(on_request)  # type: ignore[arg-type]
    try:
        await client.connect()
        assert (await slack.click(ts))["ok"]
        told = await slack.http.post("/_emulator/socket/disconnect", json={})
        assert told.json()["connections"] == 1
        socket = slack.emulator.socket
        assert socket is not None
        await eventually(lambda: socket.connections() == 1, what="a new connection")
        assert (await slack.click(ts))["ok"]
    finally:
        await client.close()
    assert clicks == ["incident_ack", "incident_ack"]
    connections = [e.connection for e in slack.emulator.socket.envelopes()]  # type: ignore[union-attr]
    assert connections[0] != connections[1], "the second click came over the new connection"


async def test_more_connections_than_slack_allows_are_turned_away(
    slack: Slack, ws: aiohttp.ClientSession
) -> None:
    socket = slack.emulator.socket
    assert socket is not None
    socket.max_connections = 2
    async with (
        ws.ws_connect(await slack.socket_url()) as a,
        ws.ws_connect(await slack.socket_url()) as b,
    ):
        await received(a), await received(b)
        async with ws.ws_connect(await slack.socket_url()) as third:
            said = await received(third)
            assert (said["type"], said["reason"]) == ("disconnect", "too_many_websockets")
        assert socket.connections() == 2


# -- the demo in Socket Mode -------------------------------------------------------------------


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
