"""What Slack's Socket Mode refuses, as the emulator must: one table.

Slack's Socket Mode docs (docs.slack.dev/apis/events-api/using-socket-mode): only an app-level
token (`xapp-`, `connections:write`) opens a connection with `apps.connections.open`, and it is
good for nothing else (`not_allowed_token_type`); a URL it gives opens one websocket; past the
connections an app may hold, Slack says `disconnect` with `too_many_websockets`. An interaction
is never retried: unanswered within 3 seconds, the person is told the app did not respond. The
control endpoints refuse a test's own mistake, naming it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import pytest

from tests.support.refusals import Answer, Holding, Like, assert_answered
from tests.support.slack_socket import APP_TOKEN, BOT_TOKEN, CHANNEL, SocketSlack, received

Ask = Callable[[SocketSlack, aiohttp.ClientSession], Awaitable[Answer]]


def web(method: str, token: str | None, **params: str) -> Ask:
    async def ask(slack: SocketSlack, ws: aiohttp.ClientSession) -> Answer:
        return Answer(200, await slack.web(method, token, **params))

    return ask


async def handshake(ws: aiohttp.ClientSession, url: str) -> Answer:
    try:
        async with ws.ws_connect(url) as socket:
            return Answer(101, await received(socket))
    except aiohttp.WSServerHandshakeError as refused:
        return Answer(refused.status)


async def a_ticket_used_twice(slack: SocketSlack, ws: aiohttp.ClientSession) -> Answer:
    url = await slack.socket_url()
    async with ws.ws_connect(url) as first:
        assert (await received(first))["type"] == "hello"
        return await handshake(ws, url)


async def a_forged_ticket(slack: SocketSlack, ws: aiohttp.ClientSession) -> Answer:
    return await handshake(ws, (await slack.socket_url()).replace("ticket=", "ticket=forged"))


async def a_third_connection_of_two(slack: SocketSlack, ws: aiohttp.ClientSession) -> Answer:
    slack.socket.max_connections = 2
    async with (
        ws.ws_connect(await slack.socket_url()) as a,
        ws.ws_connect(await slack.socket_url()) as b,
    ):
        await received(a), await received(b)
        answer = await handshake(ws, await slack.socket_url())
        assert slack.socket.connections() == 2, "the two kept"
        return answer


async def a_click_nobody_acknowledges(slack: SocketSlack, ws: aiohttp.ClientSession) -> Answer:
    ts = await slack.post_incident()
    async with ws.ws_connect(await slack.socket_url()) as app:
        await received(app)
        answer = Answer(200, await slack.click(ts))
    assert len(slack.socket.envelopes()) == 1, "sent once, never retried"
    return answer


async def a_click_with_no_connection(slack: SocketSlack, ws: aiohttp.ClientSession) -> Answer:
    return Answer(200, await slack.click(await slack.post_incident()))


def control(path: str, body: bytes) -> Ask:
    async def ask(slack: SocketSlack, ws: aiohttp.ClientSession) -> Answer:
        return Answer.of(await slack.http.post(path, content=body))

    return ask


def mistake(detail: str) -> Answer:
    return Answer(400, {"ok": False, "error": "invalid_arguments", "detail": Like(f"{detail}.*")})


DISCONNECT, EVENT = "/_emulator/socket/disconnect", "/_emulator/socket/event"
ROWS: list[tuple[str, Ask, Answer]] = [
    ("a bot token opening a connection", web("apps.connections.open", BOT_TOKEN),
     Answer(200, {"ok": False, "error": "not_allowed_token_type"})),
    ("another app's token", web("apps.connections.open", "xapp-1-A0OTHER-1-wrong"),
     Answer(200, {"ok": False, "error": "invalid_auth"})),
    ("no token", web("apps.connections.open", None),
     Answer(200, {"ok": False, "error": "not_authed"})),
    ("the app-level token posting a message",
     web("chat.postMessage", APP_TOKEN, channel=CHANNEL, text="hi"),
     Answer(200, {"ok": False, "error": "not_allowed_token_type"})),
    ("a connection's URL used twice", a_ticket_used_twice, Answer(403)),
    ("a URL Slack did not give", a_forged_ticket, Answer(403)),
    ("a connection past the app's most", a_third_connection_of_two,
     Answer(101, Holding(type="disconnect", reason="too_many_websockets"))),
    ("an interaction nobody acknowledges", a_click_nobody_acknowledges, Answer(
        200, {"ok": False, "problem": Like(".*did not answer within 3 seconds.*")})),
    ("an interaction with the app not connected", a_click_with_no_connection, Answer(200, {
        "ok": False,
        "problem": "queuepilot did not respond: the app is not connected (Socket Mode)"})),
    ("a disconnect for no reason Slack gives", control(DISCONNECT, b'{"reason": "bored"}'),
     mistake("reason must be one of")),
    ("a disconnect that is no object", control(DISCONNECT, b"[1]"),
     mistake("the body must be a JSON object")),
    ("an event that is no object", control(EVENT, b'{"event": "hi"}'),
     mistake("event must be an object")),
    ("an event that is no JSON", control(EVENT, b"{not json"), mistake("Expecting property name")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("ask", "expected"), [pytest.param(ask, expected, id=name) for name, ask, expected in ROWS]
)
async def test_socket_mode_refuses_it_so(
    socket: SocketSlack, ws: aiohttp.ClientSession, ask: Ask, expected: Answer
) -> None:
    assert_answered(await asyncio.wait_for(ask(socket, ws), timeout=30), expected)
