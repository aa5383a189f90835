"""Socket Mode as an app meets it: the emulator with an app-level token, its Web API and page over
HTTP, and a websocket client (aiohttp's, what slack_sdk's `socket_mode.aiohttp` is built on)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx

from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import SlackEmulator
from sandbox.slack_socket import SocketMode

APP_TOKEN = "xapp-1-A0QUEUEBOT-1-socket-test"
BOT_TOKEN = "xoxb-socket-test"
CHANNEL = "C0SOCKET"


@dataclass
class SocketSlack:
    emulator: SlackEmulator
    server: RunningServer
    http: httpx.AsyncClient

    @property
    def socket(self) -> SocketMode:
        assert self.emulator.socket is not None
        return self.emulator.socket

    async def web(self, method: str, token: str | None, **params: Any) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = await self.http.post(f"/api/{method}", data=params, headers=headers)
        return response.json()

    async def socket_url(self) -> str:
        answer = await self.web("apps.connections.open", APP_TOKEN)
        assert answer["ok"], answer
        return str(answer["url"])

    async def post_incident(self) -> str:
        button = {
            "type": "button",
            "action_id": "incident_ack",
            "text": {"type": "plain_text", "text": "Acknowledge"},
            "value": "1:abc",
        }
        blocks = [{"type": "actions", "block_id": "acts", "elements": [button]}]
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


@contextmanager
def socket_emulator() -> Iterator[tuple[SlackEmulator, RunningServer]]:
    slack = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL,), app_token=APP_TOKEN)
    assert slack.socket is not None
    # Slack's event retries come after a minute and five; the same order, sooner.
    slack.socket.retry_delays_s = (0.0, 0.2, 0.4)
    slack.socket.ack_timeout_s = 1.0
    slack.socket.disconnect_grace_s = 1.0
    with serve_in_thread(slack.app) as server:
        yield slack, server
        slack.close()


@asynccontextmanager
async def socket_slack() -> AsyncIterator[SocketSlack]:
    with socket_emulator() as (emulator, server):
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            yield SocketSlack(emulator, server, http)


async def received(socket: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await socket.receive(timeout=10)
    assert message.type == aiohttp.WSMsgType.TEXT, message
    return json.loads(message.data)
