"""A PyTorch HUD's `/api/clickhouse/<query>` route, shaped like torchci's: `parameters` is
required (the route JSON-parses it), and the bot header gets past the bot protection in front of
it (without it, an HTML challenge page, as Vercel answers). Only the keys a query's `params.json`
declares reach it, a missing one taking its default (`passed`). Rows are set by the test."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

# Each saved query's params.json: its parameters and their defaults (README of the fixtures).
PARAMS: dict[str, dict[str, Any]] = {
    "queued_jobs_aggregate": {
        "queuedThresholdMinutes": 30,
        "maxAgeDays": 3,
        "orgs": ["pytorch", "pytorch-labs", "meta-pytorch"],
        "repo": "",
        "runnerLabels": [],
    },
    "queued_jobs_by_label": {},
    "queued_jobs": {},
}


@dataclass
class FakeHud:
    token: str = "hud-bot-token"
    rows: dict[str, Any] = field(default_factory=dict)  # query name -> rows (or anything)
    seen: list[dict[str, Any]] = field(default_factory=list)  # parameters received
    asked: list[tuple[str, Any]] = field(default_factory=list)  # (query, parameters) received
    passed: list[dict[str, Any]] = field(default_factory=list)  # what the query ran with

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
            self.asked.append((request.path_params["name"], parameters))
            if name not in self.rows:
                return JSONResponse({"error": f"query {name} not found"}, status_code=404)
            declared = PARAMS.get(name, {})
            given = parameters if isinstance(parameters, dict) else {}
            self.passed.append({k: given.get(k, default) for k, default in declared.items()})
            return JSONResponse(self.rows[name])

        return Starlette(routes=[Route("/api/clickhouse/{name}", query)])
