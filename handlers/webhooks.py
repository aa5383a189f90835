"""Alert webhooks: authenticate, bound, validate, append to the stream, answer 202. Nothing waits
for Slack; a 202 only once the notification is in Redis, else a 503 so the sender retries.
The bounded body read serves `/slack/events` too."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial

import orjson
from pydantic import SecretStr
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.config import Settings
from bot.domain.alerts import ENDPOINT, PayloadError, Source, parse_json_body, parse_notification
from bot.intake.webhook_auth import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    basic_ok,
    bearer_ok,
    grafana_signature_problem,
)
from bot.storage.streams import NotificationStream
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)


class JsonAnswer(JSONResponse):
    """JSON rendered by orjson: the stdlib encoder would be a tenth of the webhook's own CPU."""

    def render(self, content: object) -> bytes:
        return orjson.dumps(content)


class _Rejected(Exception):
    """(HTTP status, the counter's reason, the message for the sender)."""


class AlertWebhooks:
    """Each endpoint requires every credential configured for it; one with none refuses everything
    unless ALERT_WEBHOOK_ALLOW_UNAUTHENTICATED says the network is private."""

    def __init__(
        self,
        stream: NotificationStream,
        telemetry: Telemetry,
        *,
        config: Settings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._stream = stream
        self._telemetry = telemetry
        self._config = config
        self._token = secret_of(config.alert_webhook_token)
        self._hmac_secret = secret_of(config.alert_webhook_hmac_secret)
        user, password = (
            config.alert_webhook_basic_user,
            secret_of(config.alert_webhook_basic_password),
        )
        self._basic = (user, password) if user is not None and password is not None else None
        self._max_body = config.alert_max_body_bytes
        self._clock = clock

    async def answer(self, request: Request, source: Source) -> JsonAnswer:
        try:
            self._authenticate(request, source)
            media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if media_type != "application/json" and not media_type.endswith("+json"):
                shown = media_type or "none"
                message = f"expected Content-Type application/json, got {shown}"
                raise _Rejected(415, "content_type", message)
            try:
                body = await read_limited(request, self._max_body)
            except BodyTooLarge:
                message = f"body over the {self._max_body}-byte limit"
                raise _Rejected(413, "too_large", message) from None
            except ClientDisconnect:
                raise _Rejected(400, "disconnected", "the client went away mid-body") from None
            if source == "grafana" and self._hmac_secret:
                problem = grafana_signature_problem(
                    body,
                    request.headers.get(SIGNATURE_HEADER),
                    request.headers.get(TIMESTAMP_HEADER),
                    self._hmac_secret,
                    now=self._clock(),
                    require_timestamp=not self._config.alert_webhook_hmac_allow_no_timestamp,
                )
                if problem is not None:
                    raise _Rejected(401, "bad_signature", problem)
            notification = parse_notification(source, parse_json_body(body))
        except _Rejected as exc:
            return self._reject(source, *exc.args)
        except PayloadError as exc:
            return self._reject(source, 400, "invalid", str(exc))
        try:
            entry_id = await self._stream.append(notification, body, self._clock())
        except RedisError as exc:
            log.error("webhook: cannot persist a %s notification: %s", source, exc)
            return self._reject(
                source, 503, "unavailable", "cannot persist the notification now; retry"
            )
        self._telemetry.notifications.labels(source, "accepted").inc()
        # Debug: a line per notification is a fifth of the intake's CPU in a flood.
        log.debug(
            "webhook: accepted %s notification %s (%s, %d alerts)",
            source,
            entry_id,
            notification.status,
            len(notification.alerts),
        )
        # `id` is the notification's entry in the stream it waits in to be applied.
        return JsonAnswer({"status": "accepted", "id": entry_id}, status_code=202)

    def _authenticate(self, request: Request, source: Source) -> None:
        basic = self._basic is not None and self._basic[1]
        configured = self._token or basic or (source == "grafana" and self._hmac_secret)
        if not configured and not self._config.alert_webhook_allow_unauthenticated:
            raise _Rejected(
                401,
                "unauthorized",
                f"no credential is configured for {ENDPOINT[source]}: set ALERT_WEBHOOK_TOKEN "
                "or basic auth on the bot, and send it",
            )
        header = request.headers.get("authorization")
        allowed = [bearer_ok(header, self._token)] if self._token else []
        if self._basic is not None:
            allowed.append(basic_ok(header, *self._basic))
        if allowed and not any(allowed):
            reason = "missing" if header is None else "wrong"
            raise _Rejected(
                401, "unauthorized", f"{reason} credentials in the Authorization header"
            )

    def _reject(self, source: Source, status: int, reason: str, message: str) -> JsonAnswer:
        self._telemetry.notifications.labels(source, reason).inc()
        log.info("webhook: rejected a %s notification (%d): %s", source, status, message)
        return JsonAnswer({"status": "rejected", "error": message}, status_code=status)


class AlertRoutes:
    """Alert POSTs go straight to their handler, the rest to `app`: in a flood, Starlette's
    middleware and routing would cost every notification for nothing the handler needs."""

    def __init__(self, app: ASGIApp, webhooks: AlertWebhooks) -> None:
        self.app = app
        self._sources: dict[str, Source] = {path: source for source, path in ENDPOINT.items()}
        self._webhooks = webhooks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        source = self._sources.get(scope.get("path", "")) if scope["type"] == "http" else None
        if source is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        response = await self._webhooks.answer(Request(scope, receive), source)
        await response(scope, receive, send)


def register(app: Starlette, webhooks: AlertWebhooks) -> AlertRoutes:
    for source, path in ENDPOINT.items():
        app.add_route(path, partial(webhooks.answer, source=source), methods=["POST"])
    return AlertRoutes(app, webhooks)


def secret_of(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


class BodyTooLarge(Exception):
    """The body (declared or actual) is over the limit; answered with 413."""


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, refusing early on Content-Length and while streaming a body without one."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)
