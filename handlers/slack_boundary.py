"""What stands around Bolt for Slack's traffic, over HTTP (`/slack/events`) and Socket Mode alike.

Bolt does what its adapters do: it parses the body, verifies the signature (its
`RequestVerification`), answers `url_verification` and `ssl_check`, routes to the listeners and
acks. This boundary adds only what Bolt leaves to the app:
- whatever Bolt cannot take (a body its parser raises on, a middleware or a listener raising, an
  answer of 500) is refused with one log line and no traceback: over HTTP a 400
  `{"ok": false, "error": ...}`, over the socket a plain ack so Slack does not retry it;
- a request no listener wants (a shortcut, another event) is acked, as Slack expects;
- Slack's 3 seconds: the answer is bounded, and a listener that overran gets `_late_answer`;
- an event Slack delivers again (`X-Slack-Retry-Num`) is acked and not handled twice
  (`EventRetries`, a Bolt middleware).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.middleware.async_middleware import AsyncMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.storage.keys import Keys
from bot.storage.leases import Leases

log = logging.getLogger(__name__)

EVENT_MEMORY_S = 3600
# Slack's deadline is 3 s from its side; the rest is the network's and the transport's.
ANSWER_BUDGET_S = 2.5
TOO_LONG = "queuepilot took too long to answer. Please submit again."
MAX_EVENT_ID = 100
# Where the error handler leaves what failed inside Bolt, for the boundary's one log line.
_FAILURE = "queuepilot_failure"
# Listeners that overran their budget, still running so their work is done.
_overran: set[asyncio.Task[BoltResponse]] = set()


class SlackBoundary:
    """Bolt's answer to one request, bounded in time; never an exception, never a 5xx."""

    def __init__(self, bolt: AsyncApp, *, budget_s: float = ANSWER_BUDGET_S) -> None:
        self._bolt = bolt
        self._budget_s = budget_s

    async def answer(
        self,
        build: Callable[[], AsyncBoltRequest],
        *,
        via: str,
        signed: Callable[[], bool] = lambda: True,
    ) -> BoltResponse:
        """Bolt's answer to the request `build` makes (Bolt parses the body as it builds it), a
        plain 200 when no listener wants it, or a refusal (`via` names the transport in the log
        line). `signed` tells, only for a request Bolt could not take, whether it carried
        Slack's signature: Bolt parses before it verifies, and an unsigned request is a 401
        whatever its body, as Bolt answers it."""
        try:
            request = build()
        except Exception as exc:  # Bolt's parser raises on what it cannot read
            return _refusal(via, f"could not read this request ({type(exc).__name__})", signed)
        work = asyncio.ensure_future(self._dispatch(request, via, signed))
        try:
            return await asyncio.wait_for(asyncio.shield(work), self._budget_s)
        except TimeoutError:
            # The listener goes on (a command's or a click's answer still reaches the person,
            # a late one); Slack gets an answer now instead of an error.
            _overran.add(work)
            work.add_done_callback(_overran.discard)
            log.warning("slack: a request over %s overran %.1f s", via, self._budget_s)
            return _late_answer(request.body)

    async def _dispatch(
        self, request: AsyncBoltRequest, via: str, signed: Callable[[], bool]
    ) -> BoltResponse:
        try:
            answer = await self._bolt.async_dispatch(request)
        except Exception as exc:  # Bolt's error handling itself reads the body, and can raise
            reason = f"could not handle this request ({type(exc).__name__})"
            return _refusal(via, reason, signed)
        if answer.status == 404:
            return BoltResponse(status=200)  # nothing listens for it: Slack wants a plain ack
        if answer.status == 401:
            log.info("slack: refused a request over %s (401): not signed as Slack signs", via)
        if answer.status >= 500:
            failure = request.context.get(_FAILURE) or f"Bolt answered {answer.status}"
            return _refusal(via, f"could not handle this request ({failure})", signed)
        return answer


def _refusal(via: str, reason: str, signed: Callable[[], bool]) -> BoltResponse:
    if not signed():
        log.info("slack: refused a request over %s (401): not signed as Slack signs", via)
        return BoltResponse(status=401, body={"error": "invalid request"})
    log.info("slack: refused a request over %s: %s", via, reason)
    return BoltResponse(status=400, body={"ok": False, "error": reason})


def _late_answer(body: Any) -> BoltResponse:
    """What Slack gets for a listener that overran: a plain ack, which is all a click or a
    command needs (their listeners acknowledge first and answer the person afterwards). A modal
    would close on a plain ack and lose what the person typed, with nothing said: it stays open,
    saying under its first input that it took too long, so the person submits again (the work
    that overran finishes meanwhile, and what it looked up is cached)."""
    view = body.get("view") if isinstance(body, dict) else None
    blocks = view.get("blocks") if isinstance(view, dict) else None
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and block.get("type") == "input":
            block_id = block.get("block_id")
            if isinstance(block_id, str) and block_id:
                errors = {"response_action": "errors", "errors": {block_id: TOO_LONG}}
                return BoltResponse(status=200, body=errors)
    return BoltResponse(status=200)


class EventRetries(AsyncMiddleware):
    """Slack delivers an event again until it gets a fast ack (`X-Slack-Retry-Num`, or a Socket
    Mode envelope's `retry_attempt`): each `event_id` is handled once, across replicas."""

    def __init__(self, redis: Redis, *, prefix: str, memory_s: int = EVENT_MEMORY_S) -> None:
        self._claims = Leases(redis)
        self._keys = Keys(prefix)
        self._memory_s = memory_s

    async def async_process(
        self,
        *,
        req: AsyncBoltRequest,
        resp: BoltResponse,
        next: Callable[[], Awaitable[BoltResponse]],
    ) -> BoltResponse:
        event_id = req.body.get("event_id") if req.body.get("type") == "event_callback" else None
        if isinstance(event_id, str) and event_id and await self.seen(event_id):
            retry = req.headers.get("x-slack-retry-num", ["?"])[0]
            log.info("slack: event %s delivered again (retry %s); already handled", event_id, retry)
            return BoltResponse(status=200)
        return await next()

    async def seen(self, event_id: str) -> bool:
        """Whether this event was handled already; remembered as handled from now on."""
        key = self._keys.slack_event(event_id[:MAX_EVENT_ID])
        try:
            first = await self._claims.claim_once(key, self._memory_s * 1000)
        except RedisError:
            return False  # better handled twice than not at all
        return not first


def install(bolt: AsyncApp, *, redis: Redis, prefix: str) -> None:
    """What the boundary needs inside Bolt: event retries answered once, and a failure inside
    Bolt noted for the boundary's one log line instead of Bolt's traceback."""
    bolt.use(EventRetries(redis, prefix=prefix))
    bolt.error(_note_failure)
    # Bolt logs a refused signature with the request's body and headers; the boundary's line
    # says it without what an unauthenticated sender chose to put in the log. (One filter
    # object, so building several bots in a process adds it once.)
    logging.getLogger("slack_bolt.RequestVerification").addFilter(_without_bolts_line)


def _without_bolts_line(record: logging.LogRecord) -> bool:
    return False


async def _note_failure(error: Exception, request: AsyncBoltRequest) -> None:
    if isinstance(error, BoltUnhandledRequestError):
        return  # no listener wants it: answered 404, which the boundary acks
    request.context[_FAILURE] = type(error).__name__
