"""`POST /slack/events`: Slack's one Request URL, read within its size limit and handed to Bolt
through `handlers.slack_boundary`, with the two calls Bolt's Starlette adapter makes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from slack_bolt.adapter.starlette.async_handler import to_async_bolt_request, to_starlette_response
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from handlers.body import BodyTooLarge, read_limited
from handlers.slack_boundary import SlackBoundary

MAX_BODY_BYTES = 1024 * 1024


class SlackEvents:
    def __init__(
        self,
        boundary: SlackBoundary,
        *,
        signing_secret: str,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._boundary = boundary
        self._verifier = SignatureVerifier(signing_secret)
        self._max_body_bytes = max_body_bytes

    async def handle(self, request: Request) -> Response:
        # Bolt's adapter reads the whole body whatever its size: the limit is read here first.
        try:
            body = await read_limited(request, self._max_body_bytes)
        except BodyTooLarge:
            return _error(413, "body too large")
        except ClientDisconnect:
            return _error(400, "the client went away mid-body")
        answer = await self._boundary.answer(
            lambda: to_async_bolt_request(request, body),
            via="HTTP",
            signed=lambda: self._signed(body, request),
        )
        return to_starlette_response(answer)

    def _signed(self, body: bytes, request: Request) -> bool:
        """slack_sdk's check, as Bolt makes it, for a request Bolt could not take."""
        try:
            return self._verifier.is_valid(
                body.decode("utf-8", "replace"),
                request.headers.get("x-slack-request-timestamp", ""),
                request.headers.get("x-slack-signature", ""),
            )
        except (ValueError, TypeError, OverflowError):  # a timestamp int() refuses
            return False


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


def register(app: Starlette, events: SlackEvents) -> None:
    handle: Callable[[Request], Awaitable[Response]] = events.handle
    app.add_route("/slack/events", handle, methods=["POST"])
