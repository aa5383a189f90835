"""Socket Mode: Slack's traffic over a websocket, handed to Bolt as Bolt's own socket adapter
hands it, through the same `handlers.slack_boundary` as `/slack/events`.

slack_sdk's `SocketModeClient` keeps the connection (it asks `apps.connections.open` for a URL
with the app-level token, answers pings, and reconnects after Slack's `disconnect`). Each
envelope reaches `SocketEnvelopes` as the decoded message, before slack_sdk builds its request
object (which raises on a payload that is neither an object nor a string, outside any handler
of ours): here it is built, given to Bolt, and acknowledged with Bolt's answer. Every envelope
is acknowledged, a refused one with a plain ack, so Slack never retries what the bot will never
take (an HTTP 400's role).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from slack_bolt.adapter.socket_mode.async_internals import send_async_response
from slack_bolt.adapter.socket_mode.internals import build_headers
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from handlers.slack_boundary import SlackBoundary

log = logging.getLogger(__name__)

MAX_ENVELOPE_ID = 200
VIA = "Socket Mode"


class SocketEnvelopes:
    """A message listener for slack_sdk's client: one envelope in, one ack out."""

    def __init__(self, boundary: SlackBoundary) -> None:
        self._boundary = boundary

    async def __call__(
        self, client: AsyncBaseSocketModeClient, message: dict[str, Any], raw: str | None
    ) -> None:
        envelope_id = message.get("envelope_id")
        if not isinstance(envelope_id, str) or not 0 < len(envelope_id) <= MAX_ENVELOPE_ID:
            return  # hello, or nothing Slack would ask an ack for
        started = time.time()
        try:
            envelope = SocketModeRequest.from_dict(message)
        except ValueError:
            envelope = None
        if envelope is None:
            log.info("slack: refused an envelope over %s: not a request", VIA)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id))
            return
        answer = await self._boundary.answer(lambda: _bolt_request(envelope), via=VIA)
        if answer.status != 200:
            answer = BoltResponse(status=200)  # refused: acked, so Slack does not send it again
        await send_async_response(client, envelope, answer, started)


def _bolt_request(envelope: SocketModeRequest) -> AsyncBoltRequest:
    """As Bolt's `run_async_bolt_app` builds it (its retry headers as over HTTP)."""
    return AsyncBoltRequest(
        mode="socket_mode", body=envelope.payload, headers=build_headers(envelope)
    )


async def start(
    app_token: str, web_client: AsyncWebClient, boundary: SlackBoundary
) -> SocketModeClient:
    """Connected: the URL is asked for first, so a refused app token (`invalid_auth`,
    `not_allowed_token_type`) stops the start-up with Slack's error instead of slack_sdk's
    endless retry; the client reconnects by itself from then on."""
    client = SocketModeClient(
        app_token, web_client=web_client, logger=logging.getLogger("slack_sdk.socket_mode")
    )
    client.message_listeners.append(SocketEnvelopes(boundary))
    try:
        client.wss_uri = await client.issue_new_wss_url()
        await client.connect()
    except BaseException:
        await client.close()
        raise
    return client
