"""Socket Mode: Slack's traffic over a websocket, checked and dispatched as `/slack/events` is.

slack_sdk's `SocketModeClient` keeps the connection (it asks `apps.connections.open` for a URL
with the app-level token, answers pings, and reconnects after Slack's `disconnect`). Each
envelope reaches `SocketEnvelopes` as the raw decoded message, before slack_sdk builds a request
object from it, so nothing Slack sends can raise outside this module: the envelope is checked
with `handlers.slack_request.checked` (the HTTP route's own check), events Slack delivers again
are answered without being handled twice, and Bolt gets the payload through the same
`SlackDispatch` as HTTP. Every envelope is acknowledged, a refused or failing one with a plain
ack, so Slack never retries what the bot will never take (an HTTP 400's role).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from handlers.slack_events import BoltAnswer, SlackDispatch
from handlers.slack_request import SlackRequestError, checked

log = logging.getLogger(__name__)

Kind = Literal["interactive", "command", "event"]
# Envelope types (Slack's names) and the kind of request each carries.
_KINDS: dict[str, Kind] = {
    "interactive": "interactive",
    "slash_commands": "command",
    "events_api": "event",
}
MAX_ENVELOPE_ID = 200


class SocketEnvelopes:
    """A message listener for slack_sdk's client: one envelope in, one ack out."""

    def __init__(self, slack: SlackDispatch) -> None:
        self._slack = slack

    async def __call__(
        self, client: AsyncBaseSocketModeClient, message: dict[str, Any], raw: str | None
    ) -> None:
        envelope_id = message.get("envelope_id")
        if not isinstance(envelope_id, str) or not 0 < len(envelope_id) <= MAX_ENVELOPE_ID:
            return  # hello, or nothing Slack would ask an ack for
        payload = await self._answer(message)
        await client.send_socket_mode_response(SocketModeResponse(envelope_id, payload))

    async def _answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The ack's payload (a command's answer, a view's response_action), None for none."""
        kind = _KINDS.get(str(message.get("type")))
        data = message.get("payload")
        if kind is None:
            return None
        try:
            if not isinstance(data, dict):
                raise SlackRequestError(400, "envelope payload must be a JSON object")
            req = checked(kind, data)
        except SlackRequestError as exc:
            log.info("slack: refused a socket envelope: %s", exc)
            return None
        if req.kind == "ignored":
            return None
        answer = await self._slack.dispatch(req, retry=message.get("retry_attempt", "?"))
        return None if answer is None else ack_payload(answer)


def ack_payload(answer: BoltAnswer) -> dict[str, Any] | None:
    """What the HTTP route would have answered, as an ack's payload (as Bolt's own adapter
    reads it: a JSON body as the object, any other text as `{"text": ...}`)."""
    if answer.status != 200 or not answer.body:
        return None
    if answer.content_type.startswith("application/json"):
        try:
            decoded = json.loads(answer.body)
        except ValueError:
            return None
        return decoded if isinstance(decoded, dict) else None
    return {"text": answer.body}


async def start(
    app_token: str, web_client: AsyncWebClient, slack: SlackDispatch
) -> SocketModeClient:
    """Connected: the URL is asked for first, so a refused app token (`invalid_auth`,
    `not_allowed_token_type`) stops the start-up with Slack's error instead of slack_sdk's
    endless retry; the client reconnects by itself from then on."""
    client = SocketModeClient(
        app_token, web_client=web_client, logger=logging.getLogger("slack_sdk.socket_mode")
    )
    client.message_listeners.append(SocketEnvelopes(slack))
    try:
        client.wss_uri = await client.issue_new_wss_url()
        await client.connect()
    except BaseException:
        await client.close()
        raise
    return client
