"""What stands around Bolt for Slack's traffic, over HTTP and Socket Mode alike: what Bolt cannot
take is refused with one log line (acked over the socket, so Slack does not retry it); the answer
is bounded by Slack's 3 seconds; an event Slack delivers again is handled once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError
from slack_bolt.adapter.socket_mode.async_internals import send_async_response
from slack_bolt.adapter.socket_mode.internals import build_headers
from slack_bolt.adapter.starlette.async_handler import to_async_bolt_request, to_starlette_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.error import BoltUnhandledRequestError
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from bot.storage.keys import Keys
from bot.storage.leases import Leases
from handlers.context import object_at, text_at
from handlers.webhooks import BodyTooLarge, read_limited

log = logging.getLogger(__name__)

EVENT_MEMORY_S = 3600
# Slack's deadline is 3 s from its side; the rest is the network's and the transport's.
ANSWER_BUDGET_S = 2.5
TOO_LONG = "queuepilot took too long to answer. Please submit again."
MAX_EVENT_ID = 100
MAX_ENVELOPE_ID = 200
MAX_BODY_BYTES = 1024 * 1024
SOCKET = "Socket Mode"
# Where the error handler leaves what failed inside Bolt, for the boundary's one log line.
_FAILURE = "queuepilot_failure"
# Listeners that overran their budget, still running so their work is done.
_overran: set[asyncio.Task[BoltResponse]] = set()


async def answer(
    bolt: AsyncApp,
    build: Callable[[], AsyncBoltRequest],
    *,
    via: str,
    signed: Callable[[], bool] = lambda: True,
) -> BoltResponse:
    """Bolt's answer, bounded in time; never an exception, never a 5xx. `signed`: Bolt parses
    before it verifies, and an unsigned request is a 401 whatever its body."""
    try:
        request = build()
    except Exception as exc:  # Bolt's parser raises on what it cannot read
        return _refusal(via, f"could not read this request ({type(exc).__name__})", signed)
    work = asyncio.ensure_future(_dispatch(bolt, request, via, signed))
    try:
        return await asyncio.wait_for(asyncio.shield(work), ANSWER_BUDGET_S)
    except TimeoutError:
        # The listener goes on (its answer reaches the person, late); Slack gets one now.
        _overran.add(work)
        work.add_done_callback(_overran.discard)
        log.warning("slack: a request over %s overran %.1f s", via, ANSWER_BUDGET_S)
        return _late_answer(request.body)


async def _dispatch(
    bolt: AsyncApp, request: AsyncBoltRequest, via: str, signed: Callable[[], bool]
) -> BoltResponse:
    try:
        answer = await bolt.async_dispatch(request)
    except Exception as exc:  # Bolt's error handling itself reads the body, and can raise
        return _refusal(via, f"could not handle this request ({type(exc).__name__})", signed)
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
    """A plain ack for a click or a command; a modal would close on it and lose what the person
    typed, so it stays open, saying under its first input that it took too long."""
    blocks = object_at(body, "view").get("blocks")
    for block in blocks if isinstance(blocks, list) else []:
        if text_at(block, "type") == "input" and (block_id := text_at(block, "block_id")):
            errors = {"response_action": "errors", "errors": {block_id: TOO_LONG}}
            return BoltResponse(status=200, body=errors)
    return BoltResponse(status=200)


def install(bolt: AsyncApp, *, redis: Redis, prefix: str) -> None:
    claims, keys = Leases(redis), Keys(prefix)

    async def handled_once(
        req: AsyncBoltRequest, next: Callable[[], Awaitable[BoltResponse]]
    ) -> BoltResponse:
        # Slack delivers an event again (`X-Slack-Retry-Num`) until it gets a fast ack: each
        # `event_id` is handled once, across replicas.
        event_id = req.body.get("event_id") if req.body.get("type") == "event_callback" else None
        if isinstance(event_id, str) and event_id:
            key = keys.slack_event(event_id[:MAX_EVENT_ID])
            try:
                first = await claims.claim_once(key, EVENT_MEMORY_S * 1000)
            except RedisError:
                first = True  # better handled twice than not at all
            if not first:
                retry = req.headers.get("x-slack-retry-num", ["?"])[0]
                again = "slack: event %s delivered again (retry %s); already handled"
                log.info(again, event_id, retry)
                return BoltResponse(status=200)
        return await next()

    async def note_failure(error: Exception, request: AsyncBoltRequest) -> None:
        if not isinstance(error, BoltUnhandledRequestError):  # that one is a 404, acked
            request.context[_FAILURE] = type(error).__name__

    bolt.use(handled_once)
    bolt.error(note_failure)
    # Bolt logs a refused signature with the request's body and headers; the boundary's line
    # says it without what an unauthenticated sender chose to put in the log.
    logging.getLogger("slack_bolt.RequestVerification").addFilter(lambda record: False)


def slack_request(request: Request, body: bytes) -> AsyncBoltRequest:
    """Bolt's request for what Slack sent, less the `X-Slack-Bolt-Lazy-*` headers (unsigned, sent
    only by Bolt's Lambda adapter): Bolt would run that lazy function here, skipping the stream."""
    built = to_async_bolt_request(request, body)
    built.lazy_only, built.lazy_function_name = False, None
    return built


def register(app: Starlette, bolt: AsyncApp, *, signing_secret: str) -> None:
    """`POST /slack/events`, read within its size limit (Bolt's adapter reads any size)."""
    verifier = SignatureVerifier(signing_secret)

    async def slack_events(request: Request) -> Response:
        try:
            body = await read_limited(request, MAX_BODY_BYTES)
        except BodyTooLarge:
            return JSONResponse({"ok": False, "error": "body too large"}, status_code=413)
        except ClientDisconnect:
            error = {"ok": False, "error": "the client went away mid-body"}
            return JSONResponse(error, status_code=400)

        def signed() -> bool:
            try:
                return verifier.is_valid(
                    body.decode("utf-8", "replace"),
                    request.headers.get("x-slack-request-timestamp", ""),
                    request.headers.get("x-slack-signature", ""),
                )
            except (ValueError, TypeError, OverflowError):  # a timestamp int() refuses
                return False

        build = partial(slack_request, request, body)
        return to_starlette_response(await answer(bolt, build, via="HTTP", signed=signed))

    app.add_route("/slack/events", slack_events, methods=["POST"])


class SocketEnvelopes:
    """slack_sdk's message listener, through the same boundary. It takes the decoded message before
    slack_sdk builds its request object, which raises outside our handlers on an odd payload."""

    def __init__(self, bolt: AsyncApp) -> None:
        self._bolt = bolt

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
            log.info("slack: refused an envelope over %s: not a request", SOCKET)
            await client.send_socket_mode_response(SocketModeResponse(envelope_id))
            return

        def build() -> AsyncBoltRequest:  # as Bolt's `run_async_bolt_app` builds it
            headers = build_headers(envelope)  # its retry headers, as over HTTP
            return AsyncBoltRequest(mode="socket_mode", body=envelope.payload, headers=headers)

        response = await answer(self._bolt, build, via=SOCKET)
        if response.status != 200:
            response = BoltResponse(status=200)  # refused: acked, so Slack does not resend it
        await send_async_response(client, envelope, response, started)


async def start_socket_mode(app_token: str, bolt: AsyncApp) -> SocketModeClient:
    """The URL is asked for first, so a refused app token stops the start with Slack's error
    instead of slack_sdk's endless retry."""
    client = SocketModeClient(
        app_token, web_client=bolt.client, logger=logging.getLogger("slack_sdk.socket_mode")
    )
    client.message_listeners.append(SocketEnvelopes(bolt))
    try:
        client.wss_uri = await client.issue_new_wss_url()
        await client.connect()
    except BaseException:
        await client.close()
        raise
    return client
