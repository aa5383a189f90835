"""`POST /slack/events`: Slack's one Request URL, verified and parsed here, then routed by Bolt.

The adapter verifies the signature on the raw body and validates the payload itself
(`handlers.slack_request`), and gives Bolt the parsed body: Bolt never sees bytes it could fail
on, so no request is answered 500 or leaves a traceback. Bolt's `socket_mode` request mode is
what takes an already-verified, already-parsed body; the listeners (`handlers.actions`,
`handlers.commands`) are the same as in Socket Mode. Event retries (`X-Slack-Retry-Num`) are
recognised by their `event_id` and answered without being handled twice.

Slack waits 3 seconds for the answer (the HTTP 200, or a Socket Mode envelope's ack) and Bolt runs
with `process_before_response`, so the answer waits for the listener: `SlackDispatch` bounds the
whole of it, and answers for a listener that overran (see `_late_answer`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from bot.storage.keys import Keys
from handlers.body import BodyTooLarge, read_limited
from handlers.slack_request import SlackRequest, SlackRequestError, parse, verify

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
EVENT_MEMORY_S = 3600
# Slack's deadline is 3 s from its side; the rest is the network's and the transport's.
ANSWER_BUDGET_S = 2.5
TOO_LONG = "queuepilot took too long to answer. Please submit again."
# Listeners that overran their budget, still running so their work is done.
_overran: set[asyncio.Task[BoltAnswer | None]] = set()


@dataclass(frozen=True)
class BoltAnswer:
    """What Bolt answered a checked request: `body` is what Slack shows (a command's text, a
    view's `response_action`); empty when there is nothing to show."""

    status: int
    body: str = ""
    content_type: str = "text/plain"


class SlackDispatch:
    """The one route from a checked request to Bolt, for both ways Slack's traffic arrives (an
    HTTP request here, a Socket Mode envelope in `handlers.socket_mode`)."""

    def __init__(
        self,
        bolt: AsyncApp,
        *,
        redis: Redis,
        prefix: str,
        memory_s: int = EVENT_MEMORY_S,
        budget_s: float = ANSWER_BUDGET_S,
    ) -> None:
        self._bolt = bolt
        self._redis = redis
        self._keys = Keys(prefix)
        self._memory_s = memory_s
        self._budget_s = budget_s

    async def seen(self, event_id: str) -> bool:
        """Whether this event was handled already (Slack retries until it gets a fast ack)."""
        try:
            first = await self._redis.set(
                self._keys.slack_event(event_id[:100]), "1", nx=True, ex=self._memory_s
            )
        except RedisError:
            return False  # better handled twice than not at all
        return not first

    async def dispatch(self, req: SlackRequest, *, retry: object = "?") -> BoltAnswer | None:
        """Bolt's answer within `budget_s`; 200 and nothing when no listener wants it or the
        event was handled already (`retry` is Slack's count of deliveries, for the log); None
        when handling failed (the caller answers without crashing: a 400 over HTTP, a plain ack
        over the socket)."""
        work = asyncio.ensure_future(self._answer(req, retry))
        try:
            return await asyncio.wait_for(asyncio.shield(work), self._budget_s)
        except TimeoutError:
            # The listener goes on (a command's or a click's answer still reaches the person,
            # a late one); Slack gets an answer now instead of an error.
            _overran.add(work)
            work.add_done_callback(_overran.discard)
            log.warning("slack: a %s request overran %.1f s", req.kind, self._budget_s)
            return _late_answer(req.body)

    async def _answer(self, req: SlackRequest, retry: object) -> BoltAnswer | None:
        if req.kind == "event" and req.event_id and await self.seen(req.event_id):
            log.info(
                "slack: event %s delivered again (retry %s); already handled", req.event_id, retry
            )
            return BoltAnswer(200)
        bolt_request = AsyncBoltRequest(body=req.body, mode="socket_mode")
        try:
            answer = await self._bolt.async_dispatch(bolt_request)
        except Exception as exc:
            log.error("slack: could not handle a %s request: %s", req.kind, type(exc).__name__)
            return None
        if answer.status == 404:
            return BoltAnswer(200)  # nothing listens for it: Slack wants a plain ack
        if answer.status >= 500:
            log.error("slack: a %s request failed inside the listener", req.kind)
            return None
        content_type = answer.headers.get("content-type", ["text/plain"])[0]
        body = answer.body if isinstance(answer.body, str) else ""
        return BoltAnswer(answer.status, body, content_type)


def _late_answer(body: dict[str, Any]) -> BoltAnswer:
    """What Slack gets for a listener that overran: a plain ack, which is all a click or a
    command needs (their listeners acknowledge first and answer the person afterwards). A modal
    would close on a plain ack and lose what the person typed, with nothing said: it stays open,
    saying under its first input that it took too long, so the person submits again (the work
    that overran finishes meanwhile, and what it looked up is cached)."""
    view = body.get("view")
    blocks = view.get("blocks") if isinstance(view, dict) else None
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and block.get("type") == "input":
            block_id = block.get("block_id")
            if isinstance(block_id, str) and block_id:
                answer = {"response_action": "errors", "errors": {block_id: TOO_LONG}}
                return BoltAnswer(200, json.dumps(answer), "application/json")
    return BoltAnswer(200)


class SlackEvents:
    def __init__(
        self,
        bolt: AsyncApp,
        *,
        signing_secret: str,
        redis: Redis,
        prefix: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._slack = SlackDispatch(bolt, redis=redis, prefix=prefix)
        self._secret = signing_secret
        self._clock = clock

    async def handle(self, request: Request) -> Response:
        try:
            body = await read_limited(request, MAX_BODY_BYTES)
            headers = {k.lower(): v for k, v in request.headers.items()}
            verify(headers, body, self._secret, now=self._clock())
            slack_request = parse(body, headers.get("content-type", ""))
        except BodyTooLarge:
            return _error(413, "body too large")
        except ClientDisconnect:
            return _error(400, "the client went away mid-body")
        except SlackRequestError as exc:
            log.info("slack: refused a request (%d): %s", exc.status, exc)
            return _error(exc.status, str(exc))
        return await self._route(slack_request, headers)

    async def _route(self, req: SlackRequest, headers: dict[str, str]) -> Response:
        if req.kind == "url_verification":
            return JSONResponse({"challenge": req.body["challenge"]})
        if req.kind in ("ssl_check", "ignored"):
            return Response(status_code=200)
        answer = await self._slack.dispatch(req, retry=headers.get("x-slack-retry-num", "?"))
        if answer is None:
            return _error(400, "could not handle this request")
        return Response(answer.body, status_code=answer.status, media_type=answer.content_type)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


def register(app: Starlette, events: SlackEvents) -> None:
    handle: Callable[[Request], Awaitable[Response]] = events.handle
    app.add_route("/slack/events", handle, methods=["POST"])
