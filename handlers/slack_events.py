"""`POST /slack/events`: Slack's one Request URL, handed to Bolt.

Bolt verifies the signature and routes to the listeners in `handlers.actions` and
`handlers.commands`. This adapter only refuses what Bolt would turn into a 500: oversized or
non-UTF-8 bodies.
"""

from __future__ import annotations

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

MAX_BODY_BYTES = 1024 * 1024


class SlackEvents:
    def __init__(self, bolt: AsyncApp) -> None:
        self._handler = AsyncSlackRequestHandler(bolt)

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return JSONResponse({"error": "body too large"}, status_code=413)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return JSONResponse({"error": "body is not UTF-8"}, status_code=400)
        return await self._handler.handle(request)


def register(app: Starlette, events: SlackEvents) -> None:
    app.add_route("/slack/events", events.handle, methods=["POST"])
