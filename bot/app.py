"""The composition root: builds every part from Settings, registers the handlers, runs the loop.

This is the one module that knows both the core (`bot/`) and the adapters (`handlers/`).
Background work (the stream consumer, the status scheduler, Socket Mode) starts and stops in the
ASGI lifespan, so an app object can be created without touching the network.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import SecretStr
from redis.asyncio import Redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from starlette.applications import Starlette

import handlers.actions
import handlers.commands
import handlers.health
import handlers.slack_events
import handlers.webhooks
from bot.actions import ActionCore
from bot.backends.metrics.alert import AlertMetrics
from bot.config import Settings
from bot.intake import Intake, IntakeConfig
from bot.leases import Leases
from bot.slack import SlackConfig, SlackGateway, build_client
from bot.status import StatusReporter, start_scheduler
from bot.store import IncidentStore
from bot.stream import NotificationStream
from bot.telemetry import Telemetry
from bot.threads import Threads

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Bot:
    """Everything one replica runs, built once and passed down."""

    settings: Settings
    redis: Redis
    telemetry: Telemetry
    stream: NotificationStream
    store: IncidentStore
    gateway: SlackGateway
    intake: Intake
    reporter: StatusReporter
    core: ActionCore
    bolt: AsyncApp
    background: list[asyncio.Task[None]] = field(default_factory=list)

    def alive(self) -> bool:
        return all(not task.done() for task in self.background)


def build_bot(settings: Settings, *, clock: Callable[[], datetime] = utcnow) -> Bot:
    redis = _redis(settings)
    prefix = settings.redis_prefix
    telemetry = Telemetry()
    stream = NotificationStream(redis, prefix)
    store = IncidentStore(redis, prefix, retention_s=settings.incident_retention_days * 86_400)
    leases = Leases(redis, prefix)
    slack_config = SlackConfig(
        token=_secret(settings.slack_bot_token) or "",
        base_url=settings.slack_api_url,
        post_interval_ms=settings.slack_post_interval_ms,
        update_interval_ms=settings.slack_update_interval_ms,
    )
    client = build_client(slack_config)
    gateway = SlackGateway(client, redis, config=slack_config, telemetry=telemetry, prefix=prefix)
    threads = Threads(
        store,
        gateway,
        channel=settings.slack_channel,
        clock=clock,
        edit_interval_ms=settings.root_edit_interval_ms,
    )
    intake_config = _intake_config(settings, consumer=f"{socket.gethostname()}-{os.getpid()}")
    intake = Intake(stream, store, leases, threads, telemetry, config=intake_config, clock=clock)
    reporter = StatusReporter(
        store,
        leases,
        threads,
        AlertMetrics(),
        telemetry,
        interval_s=settings.status_interval_seconds,
        clock=clock,
    )
    core = ActionCore(store, leases, threads, telemetry, clock=clock)
    bolt = AsyncApp(
        client=client,
        signing_secret=_secret(settings.slack_signing_secret) or "",
        logger=logging.getLogger("slack_bolt"),
    )
    _provide(bolt, core, gateway)
    return Bot(settings, redis, telemetry, stream, store, gateway, intake, reporter, core, bolt)


def _redis(settings: Settings) -> Redis:
    """Short timeouts: a webhook must answer 503 quickly when Redis is gone, not hang."""
    return Redis.from_url(
        settings.redis_url,
        decode_responses=True,
        socket_connect_timeout=2,
        socket_timeout=5,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=2),
    )


def _intake_config(settings: Settings, *, consumer: str) -> IntakeConfig:
    return IntakeConfig(
        # Unique per process, so a restarted replica's entries are reclaimed, not assumed done.
        consumer=f"{consumer}-{secrets.token_hex(3)}",
        status_interval_s=settings.status_interval_seconds,
        reopen_window_s=settings.reopen_window_seconds,
        reclaim_idle_ms=settings.intake_reclaim_idle_ms,
        max_attempts=settings.intake_max_attempts,
    )


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def _provide(bolt: AsyncApp, core: ActionCore, gateway: SlackGateway) -> None:
    """Give every listener the action core and the gateway, in HTTP and Socket Mode alike."""

    async def provide(context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        context["actions"] = core
        context["slack"] = gateway
        await next()

    bolt.middleware(provide)


def build_app(bot: Bot) -> Starlette:
    """The ASGI app: every endpoint of CONTRACT.md on one port."""
    app = Starlette(lifespan=_lifespan(bot))
    handlers.webhooks.register(app, _webhooks(bot))
    handlers.health.register(app, handlers.health.Health(bot.redis, bot.telemetry, alive=bot.alive))
    handlers.actions.register(bot.bolt)
    handlers.commands.register(bot.bolt, command=bot.settings.slash_command)
    if not bot.settings.socket_mode:
        # In Socket Mode Slack's traffic arrives over the websocket, and there is no signing
        # secret to verify an HTTP request with: the route would only ever answer errors.
        handlers.slack_events.register(app, handlers.slack_events.SlackEvents(bot.bolt))
    return app


def _webhooks(bot: Bot) -> handlers.webhooks.AlertWebhooks:
    s = bot.settings
    auth = handlers.webhooks.WebhookAuth(
        token=_secret(s.alert_webhook_token),
        hmac_secret=_secret(s.alert_webhook_hmac_secret),
        basic_user=s.alert_webhook_basic_user,
        basic_password=_secret(s.alert_webhook_basic_password),
    )
    if not (auth.token or auth.basic_user):
        open_paths = "/alerts/alertmanager" if auth.hmac_secret else "/alerts/*"
        log.warning("%s accept unauthenticated notifications: set ALERT_WEBHOOK_TOKEN", open_paths)
    return handlers.webhooks.AlertWebhooks(
        bot.stream, bot.telemetry, auth=auth, max_body_bytes=s.alert_max_body_bytes
    )


def _lifespan(bot: Bot) -> Callable[[Starlette], AsyncIterator[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop = asyncio.Event()
        consumer = asyncio.create_task(bot.intake.run(stop), name="intake")
        bot.background.append(consumer)
        scheduler = start_scheduler(bot.reporter, tick_s=bot.settings.status_tick_seconds)
        socket_mode = await _start_socket_mode(bot)
        log.info("queuepilot is up: channel %s", bot.settings.slack_channel)
        try:
            yield
        finally:
            stop.set()
            scheduler.shutdown(wait=False)
            if socket_mode is not None:
                await socket_mode.close_async()
            with suppress(asyncio.CancelledError):
                await asyncio.wait_for(consumer, timeout=5)
            await bot.redis.aclose()
            await _close_client_session(bot)

    return lifespan  # type: ignore[return-value]


async def _start_socket_mode(bot: Bot):  # type: ignore[no-untyped-def]
    """Socket Mode when SLACK_APP_TOKEN is set: Slack traffic over a websocket, no public URL."""
    if bot.settings.slack_app_token is None:
        return None
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    handler = AsyncSocketModeHandler(bot.bolt, bot.settings.slack_app_token.get_secret_value())
    await handler.connect_async()
    return handler


async def _close_client_session(bot: Bot) -> None:
    session = getattr(bot.gateway.client, "session", None)
    if session is not None and not session.closed:
        await session.close()
