"""A receiver for the `webhook` scaler, verifying requests as its documentation tells one to:
the signature over `<timestamp>:<body>`, the replay window, and each `request_id` once."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.backends.scale.webhook import verify


@dataclass
class ScaleReceiver:
    secret: str = "scaler-test-secret"
    accepted: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    raw: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)
    hanging: threading.Event | None = None
    capacity: dict[str, int] = field(default_factory=dict)  # runner type -> runners now
    _seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.app = Starlette(routes=[Route("/scale", self._scale, methods=["POST"])])

    def hang(self) -> threading.Event:
        self.hanging = threading.Event()
        return self.hanging

    async def _scale(self, request: Request) -> Response:
        body = await request.body()
        headers = dict(request.headers)
        self.raw.append((headers, body))
        problem = verify(self.secret, headers, body, now=time.time())
        if problem is None:
            data = json.loads(body)
            if data["request_id"] in self._seen:
                problem = "replayed request"
            self._seen.add(data["request_id"])
        if problem is not None:
            self.refused.append(problem)
            return JSONResponse({"message": problem}, status_code=401)
        if self.hanging is not None:
            await asyncio.to_thread(self.hanging.wait, 30)
        if self.failures:
            return JSONResponse({"message": "scaler broke"}, status_code=self.failures.pop(0))
        self.accepted.append(data)
        before = self.capacity.get(data["runner_type"])
        if before is None:
            return JSONResponse({"ok": True})
        self.capacity[data["runner_type"]] = before + data["delta"]
        return JSONResponse({"before": before, "after": before + data["delta"], "maximum": 50})
