"""Alert webhooks: authenticate, bound, validate, append to the stream, answer 202. Nothing waits
for Slack; a 202 only once the notification is in Redis, else a 503 so the sender retries.
GitHub's workflow_job deliveries: within the replica's rate and concurrency, verify, record the
job's state in Redis, answer 200. The bounded body read serves `/slack/events` too."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

import orjson
from pydantic import SecretStr
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from bot.config import Settings
from bot.domain.alerting.alerts import (
    ENDPOINT,
    PayloadError,
    Source,
    parse_json_body,
    parse_notification,
)
from bot.domain.queue_cost.workflow_jobs import ENDPOINT as GITHUB_PATH
from bot.domain.queue_cost.workflow_jobs import (
    EVENT,
    PING,
    JobDelivery,
    job_delivery,
    kind_of,
    payload_of,
)
from bot.intake.delivery_limits import DeliveryLimits
from bot.intake.webhook_auth import (
    GITHUB_SIGNATURE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    basic_ok,
    bearer_ok,
    github_signature_problem,
    grafana_signature_problem,
)
from bot.pacing import Pacing
from bot.storage.streams import NotificationStream
from bot.storage.workflow_jobs import WorkflowJobs
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

    def __init__(self, stream: NotificationStream, telemetry: Telemetry, *, config: Settings):
        self._stream = stream
        self._telemetry = telemetry
        self._config = config
        self._token = secret_of(config.alert_webhook_token)
        self._hmac_secret = secret_of(config.alert_webhook_hmac_secret)
        user = config.alert_webhook_basic_user
        password = secret_of(config.alert_webhook_basic_password)
        self._basic = (user, password) if user is not None and password is not None else None

    async def answer(self, request: Request, source: Source) -> JsonAnswer:
        try:
            self._authenticate(request, source)
            media_type = _media_type(request)
            if media_type != "application/json" and not media_type.endswith("+json"):
                message = f"expected Content-Type application/json, got {media_type or 'none'}"
                raise _Rejected(415, "content_type", message)
            body = await _body(request, self._config.alert_max_body_bytes)
            if source == "grafana" and self._hmac_secret:
                problem = grafana_signature_problem(
                    body,
                    request.headers.get(SIGNATURE_HEADER),
                    request.headers.get(TIMESTAMP_HEADER),
                    self._hmac_secret,
                    now=time.time(),
                    require_timestamp=not self._config.alert_webhook_hmac_allow_no_timestamp,
                )
                if problem is not None:
                    raise _Rejected(401, "bad_signature", problem)
            notification = parse_notification(source, parse_json_body(body))
            entry_id = await self._stream.append(notification, body, time.time())
        except (_Rejected, PayloadError) as exc:
            return rejected(self._telemetry, source, exc)
        except RedisError as exc:
            log.error("webhook: cannot persist a %s notification: %s", source, exc)
            message = "cannot persist the notification now; retry"
            return rejected(self._telemetry, source, _Rejected(503, "unavailable", message))
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
            message = (
                f"no credential is configured for {ENDPOINT[source]}: set ALERT_WEBHOOK_TOKEN "
                "or basic auth on the bot, and send it"
            )
            raise _Rejected(401, "unauthorized", message)
        header = request.headers.get("authorization")
        allowed = [bearer_ok(header, self._token)] if self._token else []
        if self._basic is not None:
            allowed.append(basic_ok(header, *self._basic))
        if allowed and not any(allowed):
            reason = "missing" if header is None else "wrong"
            message = f"{reason} credentials in the Authorization header"
            raise _Rejected(401, "unauthorized", message)


GITHUB_CONTENT_TYPES = ("application/json", "application/x-www-form-urlencoded")
DELIVERY_ID_CAP = 100  # GitHub's are UUIDs: anything far longer is not one of its deliveries
KIND_CAP = 60  # an event or action name kept as a kind heard
# A workflow_job delivery is 10 to 30 KB: within the rate, a forged one then costs at most this
# read and its HMAC on the loop Slack's clicks share, not ALERT_MAX_BODY_BYTES' mebibyte.
GITHUB_MAX_BODY_BYTES = 256 * 1024
# GitHub gives up on an answer after 10 s; a sender slower with its body than that holds a place
# of GITHUB_WEBHOOK_CONCURRENCY for nothing (uvicorn sets no deadline on a body).
GITHUB_BODY_WAIT_S = 10.0


class GithubWebhooks:
    """`/webhooks/github`, on every replica: GitHub's deliveries taken within the replica's limits,
    verified by their signature, each recorded once by its body as signed (a workflow_job's state,
    or the kind of another). Closed without a secret."""

    def __init__(
        self,
        jobs: WorkflowJobs,
        telemetry: Telemetry,
        *,
        config: Settings,
        pacing: Pacing | None = None,
        body_wait_s: float = GITHUB_BODY_WAIT_S,
    ) -> None:
        self._jobs = jobs
        self._telemetry = telemetry
        self._secret = secret_of(config.github_webhook_secret)
        self._max_body = min(config.alert_max_body_bytes, GITHUB_MAX_BODY_BYTES)
        self._body_wait_s = body_wait_s
        self._limits = DeliveryLimits(
            config.github_webhook_rate, config.github_webhook_concurrency, pacing=pacing
        )

    async def answer(self, request: Request) -> JsonAnswer:
        refusal = self._limits.admit()
        if refusal is not None:
            # Counted, not logged: `DeliveryLimits` sums them up in a line a minute.
            self._telemetry.notifications.labels("github", refusal.reason).inc()
            said = {"status": "rejected", "error": refusal.message}
            retry = {"Retry-After": str(refusal.retry_after_s)}
            return JsonAnswer(said, status_code=refusal.status, headers=retry)
        try:
            return await self._taken(request)
        finally:
            self._limits.done()

    async def _taken(self, request: Request) -> JsonAnswer:
        try:
            event, delivery_id, body, signed = await self._verified(request)
            delivered: JobDelivery | None = None
            if event == PING:
                kind, counted, said = PING, "ping", {"status": "pong"}
            elif event != EVENT:
                reason = f"queuepilot reads only workflow_job deliveries, not {event!r}"
                kind, counted, said = event, "ignored", {"status": "ignored", "reason": reason}
            else:
                payload = payload_of(body, _media_type(request))
                found, kind = job_delivery(payload), kind_of(payload)
                if isinstance(found, str):
                    counted, said = "ignored", {"status": "ignored", "reason": found}
                else:
                    delivered, counted, said = found, "accepted", {"status": "recorded"}
            # Once by its body as signed: a redelivery, or a replay under a fresh ID or event
            # (headers GitHub does not sign), is the same body again. Any other delivery is
            # recorded as heard, so `check` can say the webhook sends more than queuepilot reads.
            outcome = await self._jobs.record(signed, kind[:KIND_CAP], delivered, time.time())
            if outcome == "duplicate":
                message = (
                    f"delivery {delivery_id} (or another of the same body) was already recorded: "
                    "nothing changed"
                )
                raise _Rejected(409, "duplicate", message)
            if outcome == "stale":
                message = "the job's state is older than the day queuepilot keeps: nothing changed"
                raise _Rejected(422, "stale", message)
        except (_Rejected, PayloadError) as exc:
            return rejected(self._telemetry, "github", exc)
        except RedisError as exc:  # only the record reaches Redis: the delivery is verified
            log.error("github webhook: cannot record delivery %s: %s", delivery_id, exc)
            message = "cannot record the delivery now; redeliver it"
            return rejected(self._telemetry, "github", _Rejected(503, "unavailable", message))
        self._telemetry.notifications.labels("github", counted).inc()
        # Debug: a line per job state would be most of the log in a busy organization's push.
        log.debug("github webhook: delivery %s, %s: %s", delivery_id, kind, said["status"])
        return JsonAnswer(said)

    async def _verified(self, request: Request) -> tuple[str, str, bytes, str]:
        """The event, the delivery's ID, the body of a delivery GitHub signed and its signature,
        or _Rejected."""
        if not self._secret:
            message = "GITHUB_WEBHOOK_SECRET is not set on the bot: every delivery is refused"
            raise _Rejected(401, "unauthorized", message)
        headers = request.headers
        signature = headers.get(GITHUB_SIGNATURE_HEADER)
        if signature is None:
            raise _Rejected(401, "unauthorized", f"missing {GITHUB_SIGNATURE_HEADER}")
        event = headers.get("x-github-event", "").strip()
        delivery_id = headers.get("x-github-delivery", "").strip()
        if not event or not delivery_id:
            raise _Rejected(400, "invalid", "missing X-GitHub-Event or X-GitHub-Delivery")
        if len(delivery_id) > DELIVERY_ID_CAP or len(event) > KIND_CAP:
            raise _Rejected(400, "invalid", "X-GitHub-Event or X-GitHub-Delivery is too long")
        media_type = _media_type(request)
        if media_type not in GITHUB_CONTENT_TYPES:
            message = (
                f"expected Content-Type application/json (or GitHub's form encoding), got "
                f"{media_type or 'none'}"
            )
            raise _Rejected(415, "content_type", message)
        try:
            async with asyncio.timeout(self._body_wait_s):
                body = await _body(request, self._max_body)
        except TimeoutError:
            message = f"the body did not arrive within {self._body_wait_s:g} s"
            raise _Rejected(408, "slow_body", message) from None
        problem = github_signature_problem(body, signature, self._secret)
        if problem is not None:
            raise _Rejected(401, "bad_signature", problem)
        return event, delivery_id, body, signature.strip().lower()


def rejected(telemetry: Telemetry, source: str, refusal: _Rejected | PayloadError) -> JsonAnswer:
    """A refusal of a webhook's delivery: counted by why, logged without its body, said."""
    invalid = (400, "invalid", str(refusal))
    status, reason, message = refusal.args if isinstance(refusal, _Rejected) else invalid
    telemetry.notifications.labels(source, reason).inc()
    log.info("webhook: refused a %s delivery (%d): %s", source, status, message)
    return JsonAnswer({"status": "rejected", "error": message}, status_code=status)


async def _body(request: Request, limit: int) -> bytes:
    try:
        return await read_limited(request, limit)
    except BodyTooLarge:
        raise _Rejected(413, "too_large", f"body over the {limit}-byte limit") from None
    except ClientDisconnect:
        raise _Rejected(400, "disconnected", "the client went away mid-body") from None


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


Answer = Callable[[Request], Awaitable[Response]]


class WebhookRoutes:
    """Webhook POSTs go straight to their handler, the rest to `app`: in a flood, Starlette's
    middleware and routing would cost every delivery for nothing the handler needs."""

    def __init__(self, app: ASGIApp, answers: dict[str, Answer]) -> None:
        self.app = app
        self._answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self._answers.get(scope.get("path", "")) if scope["type"] == "http" else None
        if answer is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        response = await answer(Request(scope, receive))
        await response(scope, receive, send)


def register(
    app: Starlette, webhooks: AlertWebhooks, github: GithubWebhooks | None = None
) -> WebhookRoutes:
    answers: dict[str, Answer] = {
        path: partial(webhooks.answer, source=source) for source, path in ENDPOINT.items()
    }
    if github is not None:
        answers[GITHUB_PATH] = github.answer
    for path, answer in answers.items():
        app.add_route(path, answer, methods=["POST"])
    return WebhookRoutes(app, answers)


def secret_of(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


class BodyTooLarge(Exception):
    """The body (declared or actual) is over the limit; answered with 413."""


async def read_limited(request: Request, limit: int) -> bytes:
    """The whole body, refusing early on Content-Length and while streaming a body without one."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge
    return bytes(body)
