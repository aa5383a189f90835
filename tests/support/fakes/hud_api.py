"""A PyTorch HUD's `/api/clickhouse/<query>` route, shaped like torchci's: `parameters` is
required (the route JSON-parses it), and the bot header gets past the bot protection in front of
it (without it, an HTML challenge page, as Vercel answers). Rows are set by the test."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route


@dataclass
class FakeHud:
    token: str = "hud-bot-token"
    rows: dict[str, Any] = field(default_factory=dict)  # query name -> rows (or anything)
    seen: list[dict[str, Any]] = field(default_factory=list)  # parameters received

    @property
    def app(self) -> Starlette:
        async def query(request: Request) -> Response:
            if request.headers.get("x-hud-internal-bot") != self.token:
                return HTMLResponse("<html>Vercel Security Checkpoint</html>", status_code=403)
            name = request.path_params["name"]
            raw = request.query_params.get("parameters")
            if raw is None:
                return JSONResponse({"error": "parameters is required"}, status_code=500)
            try:
                parameters = json.loads(raw)
            except ValueError:
                return JSONResponse({"error": "Unexpected token in JSON"}, status_code=500)
            self.seen.append(parameters)
            if name not in self.rows:
                return JSONResponse({"error": f"query {name} not found"}, status_code=404)
            return JSONResponse(self.rows[name])

        return Starlette(routes=[Route("/api/clickhouse/{name}", query)])
