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


def register(
    app: Starlette,
    redis: Redis,
    telemetry: Telemetry,
    *,
    alive: Callable[[], bool],
    backlogs: Callable[[], Awaitable[None]],
    role: Callable[[], Awaitable[dict[str, Any]]],
) -> None:
    async def healthz(request: Request) -> JSONResponse:
        """Alive while the process serves and its background work runs; else restart it."""
        if not alive():
            return JSONResponse({"status": "background work stopped"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        """Ready when Redis answers (without it no notification can be accepted), a follower as
        much as the leader; the body names the leader and what it holds back (`state`)."""
        try:
            await redis.ping()
            leading = await role()
        except (RedisError, OSError):
            # The cause (hosts, ports, auth errors) is for the logs, not for whoever asks.
            return JSONResponse({"status": "not ready"}, status_code=503)
        return JSONResponse({"status": "ready", **leading})

    async def metrics(request: Request) -> Response:
        """The backlogs are read from Redis at scrape time: a gauge nobody scrapes costs nothing."""
        with suppress(RedisError, OSError):
            await backlogs()
        return Response(generate_latest(telemetry.registry), media_type=CONTENT_TYPE_LATEST)

    for path, route in (("/healthz", healthz), ("/readyz", readyz), ("/metrics", metrics)):
        app.add_route(path, route, methods=["GET"])
