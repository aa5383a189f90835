"""Liveness, readiness and the bot's own metrics."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.asyncio import Redis
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.telemetry import Telemetry


class Health:
    def __init__(self, redis: Redis, telemetry: Telemetry, *, alive: Callable[[], bool]) -> None:
        self._redis = redis
        self._telemetry = telemetry
        self._alive = alive

    async def healthz(self, request: Request) -> JSONResponse:
        """Alive while the process serves and its background work runs; else restart it."""
        if not self._alive():
            return JSONResponse({"status": "background work stopped"}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> JSONResponse:
        """Ready only when Redis answers: without it no notification can be accepted."""
        try:
            await self._redis.ping()
        except (RedisError, OSError) as exc:
            return JSONResponse({"status": "unavailable", "redis": str(exc)}, status_code=503)
        return JSONResponse({"status": "ok", "redis": "ok"})

    async def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self._telemetry.registry), media_type=CONTENT_TYPE_LATEST)


def register(app: Starlette, health: Health) -> None:
    app.add_route("/healthz", health.healthz, methods=["GET"])
    app.add_route("/readyz", health.readyz, methods=["GET"])
    app.add_route("/metrics", health.metrics, methods=["GET"])
