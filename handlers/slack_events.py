"""`POST /slack/events`: Slack's one Request URL, handed to Bolt.

Bolt verifies the signature and routes to the listeners in `handlers.actions` and
`handlers.commands`. This adapter only refuses what Bolt would turn into a 500: oversized or
non-UTF-8 bodies.
"""

from __future__ import annotations

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from handlers.body import BodyTooLarge, read_limited

MAX_BODY_BYTES = 1024 * 1024


class SlackEvents:
    def __init__(self, bolt: AsyncApp) -> None:
        self._handler = AsyncSlackRequestHandler(bolt)

    async def handle(self, request: Request) -> Response:
        try:
            body = await read_limited(request, MAX_BODY_BYTES)
            body.decode("utf-8")
        except BodyTooLarge:
            return JSONResponse({"error": "body too large"}, status_code=413)
        except UnicodeDecodeError:
            return JSONResponse({"error": "body is not UTF-8"}, status_code=400)
        except ClientDisconnect:
            return JSONResponse({"error": "the client went away mid-body"}, status_code=400)
        # Bolt's adapter calls request.body() after the stream is consumed; Starlette answers that
        # from `_body`, which its own body() would have set.
        request._body = body
        return await self._handler.handle(request)


def register(app: Starlette, events: SlackEvents) -> None:
    app.add_route("/slack/events", events.handle, methods=["POST"])
