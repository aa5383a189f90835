"""Liveness, readiness and the bot's own metrics."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.telemetry import Telemetry


class Health:
    def __init__(
        self,
        redis: Redis,
        telemetry: Telemetry,
        *,
        alive: Callable[[], bool],
        backlogs: Callable[[], Awaitable[None]] | None = None,
        role: Callable[[], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self._redis = redis
        self._telemetry = telemetry
        self._alive = alive
        self._backlogs = backlogs
        self._role = role

    async def healthz(self, request: Request) -> JSONResponse:
        """Alive while the process serves and its background work runs; else restart it."""
        if not self._alive():
            return JSONResponse({"status": "background work stopped"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> JSONResponse:
        """Ready only when Redis answers: without it no notification can be accepted. Every
        replica takes requests, so a follower is as ready as the leader; the body says which
        replica leads (does the work), for whoever looks at one that does not."""
        try:
            await self._redis.ping()
            role = await self._role() if self._role is not None else {}
        except (RedisError, OSError):
            # The cause (hosts, ports, auth errors) is for the logs, not for whoever asks.
            return JSONResponse({"status": "not ready"}, status_code=503)
        return JSONResponse({"status": "ready", **role})

    async def metrics(self, request: Request) -> Response:
        """The bot's counters, and the backlogs read from Redis at scrape time (not on every
        notification: a gauge nobody scrapes costs nothing)."""
        if self._backlogs is not None:
            with suppress(RedisError, OSError):
                await self._backlogs()
        return Response(generate_latest(self._telemetry.registry), media_type=CONTENT_TYPE_LATEST)


def register(app: Starlette, health: Health) -> None:
    app.add_route("/healthz", health.healthz, methods=["GET"])
    app.add_route("/readyz", health.readyz, methods=["GET"])
    app.add_route("/metrics", health.metrics, methods=["GET"])
