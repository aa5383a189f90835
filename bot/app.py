"""The composition root: builds every part from Settings, registers the handlers, runs the loop.

This is the one module that knows both the core (`bot/`) and the adapters (`handlers/`).
Background work (the stream consumer, the senders, the status scheduler, Socket Mode) starts and
stops in the ASGI lifespan, so an app object can be created without touching the network.
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
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from starlette.applications import Starlette
from starlette.types import ASGIApp

import handlers.actions
import handlers.commands
import handlers.health
import handlers.home
import handlers.slack_boundary
import handlers.slack_events
import handlers.socket_mode
import handlers.views
import handlers.webhooks
from bot import periodic
from bot.actions.core import ActionCore
from bot.actions.diagnose import DiagnoseConfig, Diagnosing
from bot.actions.early_warning import Warnings
from bot.actions.flow import Acting
from bot.actions.jobs import Jobs
from bot.actions.permissions import Authorizer, Rules
from bot.actions.report import Report, ReportConfig
from bot.actions.scale import ScaleConfig, Scaling
from bot.actions.scale_reverts import RevertConfig, ScaleReverts
from bot.actions.silence import SilenceConfig, Silencing
from bot.actions.silence_watch import SilenceWatch
from bot.backends.metrics import QueueHistory
from bot.config import ScalerBackend, Settings
from bot.domain.early_warning import Thresholds
from bot.domain.incident_fleet import DrainConfig
from bot.domain.routes import MAX_ROUTES, Routing
from bot.factory import (
    build_issues,
    build_jobs_source,
    build_metrics,
    build_scaler,
    build_silencer,
    github_auth,
    runner_names,
    scale_targets,
)
from bot.fleet.jobs import JobsWatch
from bot.fleet.readings import FleetReadings
from bot.fleet.readings_history import ReadingsHistory
from bot.intake.consumer import Intake, IntakeConfig
from bot.outbound.gateway import SlackConfig, SlackGateway, build_client
from bot.outbound.home import Home, HomeConfig
from bot.outbound.membership import check_channels
from bot.outbound.permalinks import Permalinks
from bot.outbound.sender import Outbound, SenderConfig
from bot.outbound.senders import Senders
from bot.outbound.storm import StormConfig
from bot.status.alert_issue import AlertIssues, IssueConfig
from bot.status.early_warning import EarlyWarnings, WarningConfig
from bot.status.tick import StatusConfig, StatusReporter
from bot.storage.chart_delivery import ChartDelivery
from bot.storage.connection import build_redis
from bot.storage.early_warning import WarningStore
from bot.storage.home import HomeViewers
from bot.storage.incident_store import IncidentStore
from bot.storage.interactions import Interactions
from bot.storage.issue_links import IssueLinks
from bot.storage.job_arrivals import JobArrivals
from bot.storage.leases import Leases
from bot.storage.notices import NoticeStore
from bot.storage.pacing import Pacing
from bot.storage.permalinks import PermalinkCache
from bot.storage.send_queue import SendQueue
from bot.storage.storm_queue import StormQueue
from bot.storage.stream import NotificationStream
from bot.storage.user_names import UserNames
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

# The senders' doorbell connections: three a channel at most; made only as needed.
BELL_CONNECTIONS = 3 * (MAX_ROUTES + 1) + 20


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(kw_only=True)
class Bot:
    """Everything one replica runs, built once and passed down."""

    settings: Settings
    redis: Redis
    telemetry: Telemetry
    stream: NotificationStream
    store: IncidentStore
    queue: SendQueue
    gateway: SlackGateway
    intake: Intake
    senders: Senders
    reporter: StatusReporter
    core: ActionCore
    bolt: AsyncApp
    silence_watch: SilenceWatch | None = None
    readings: FleetReadings | None = None
    scale_reverts: ScaleReverts | None = None
    lease_redis: Redis | None = None
    early_warnings: EarlyWarnings | None = None
    bell_redis: Redis | None = None
    alert_issues: AlertIssues | None = None
    home: Home | None = None
    background: list[asyncio.Task[None]] = field(default_factory=list)

    def alive(self) -> bool:
        return all(not task.done() for task in self.background)


def build_bot(settings: Settings, *, clock: Callable[[], datetime] = utcnow) -> Bot:
    redis = build_redis(settings.redis_url, settings.sentinel())
    prefix = settings.redis_prefix
    telemetry = Telemetry()
    retention_s = settings.incident_retention_days * 86_400
    stream = NotificationStream(redis, prefix, wait_replicas=settings.wait_replicas)
    # One token source for both GitHub readers: an App's installation token is minted once.
    github = github_auth(settings)
    issues = build_issues(settings, github)
    store = IncidentStore(redis, prefix, retention_s=retention_s, issues=issues is not None)
    # Each channel's sender blocks on up to three doorbells while idle: on connections of a
    # client of their own (made as needed; its bound only stops a runaway), so with many team
    # channels the main pool's connections stay free for commands (tests/system/
    # test_many_channels). Not a speed-up: on the main client the intake measured the same.
    bells = build_redis(
        settings.redis_url,
        settings.sentinel(),
        max_connections=BELL_CONNECTIONS,
        client_name="queuepilot-bells",
    )
    queue = SendQueue(redis, prefix, retention_s=retention_s, bells=bells)
    slack_config = SlackConfig(
        token=_secret(settings.slack_bot_token) or "",
        base_url=settings.slack_api_url,
        timeout_s=settings.slack_timeout_seconds,
    )
    client = build_client(slack_config)
    pacing = Pacing(redis, store.keys)
    gateway = SlackGateway(
        client,
        config=slack_config,
        telemetry=telemetry,
        pacing=pacing,
        user_names=UserNames(redis, store.keys),
    )
    permalinks = Permalinks(PermalinkCache(redis, store.keys, keep_s=retention_s), gateway)
    intake = Intake(stream, store, telemetry, config=_intake_config(settings), clock=clock)
    sender_config = SenderConfig(
        post_interval_s=settings.slack_post_interval_ms / 1000,
        post_burst=settings.slack_post_burst,
        update_interval_ms=settings.slack_update_interval_ms,
        root_edit_interval_ms=settings.root_edit_interval_ms,
        storm=StormConfig(
            threshold=settings.storm_digest_threshold,
            quiet_s=settings.storm_quiet_seconds,
            edit_interval_s=settings.root_edit_interval_ms / 1000,
            command=settings.slash_command,
        ),
        within_mins=settings.drain_target_minutes,
    )
    storms = StormQueue(redis, prefix, retention_s=retention_s)
    charts = ChartDelivery(redis, store.keys, settings.chart_style)
    warnings = WarningStore(redis, store.keys, bells=bells)

    async def channels() -> list[str]:
        routed = {route.channel for route in settings.slack_routes}
        return sorted({settings.slack_channel, *routed, *await queue.channels()} - {""})

    metrics = build_metrics(settings, github)
    jobs_source = build_jobs_source(settings, metrics, github)
    jobs = None
    if jobs_source is not None:
        arrivals = JobArrivals(redis, store.keys)
        jobs = JobsWatch(jobs_source, arrivals, timeout_s=settings.backend_timeout_seconds)
    # The capacity report's history: the backend's own (Prometheus, the HUD), else the readings
    # queuepilot keeps itself (`METRICS_BACKEND=github`); none with the `alert` backend.
    history: QueueHistory | None = None
    kept = None
    if isinstance(metrics, QueueHistory):
        history = metrics
    elif metrics.live:
        kept = ReadingsHistory(redis, store.keys, interval_s=settings.metrics_interval_seconds)
        history = kept
    readings = FleetReadings(
        redis,
        store.keys,
        metrics,
        interval_s=settings.metrics_interval_seconds,
        timeout_s=settings.backend_timeout_seconds,
        clock=clock,
        jobs=jobs,
        kept=kept,
        within_mins=settings.drain_target_minutes,
    )
    reporter = StatusReporter(
        store, readings, telemetry, config=status_config(settings), clock=clock
    )
    core, silence_watch, scale_reverts = _action_core(
        settings,
        readings=readings,
        jobs=jobs,
        warnings=warnings,
        store=store,
        telemetry=telemetry,
        gateway=gateway,
        permalinks=permalinks,
        redis=redis,
        clock=clock,
        history=history,
    )
    early_warnings = None
    if settings.early_warning_minutes > 0 and metrics.live:
        early_warnings = EarlyWarnings(
            readings,
            store,
            warnings,
            config=warning_config(settings),
            clock=clock,
            permalink=permalinks.link,
        )
    alert_issues = None
    if issues is not None:
        alert_issues = AlertIssues(
            store,
            IssueLinks(redis, store.keys, retention_s=retention_s),
            issues,
            pacing,
            Leases(redis),
            config=IssueConfig(
                repo=issues.repo,
                open=settings.github_issues_open,
                interval_ms=settings.github_issues_interval_ms,
            ),
            permalink=permalinks.link,
            postmortem=core.postmortem_markdown,
            clock=clock,
        )
    # The channels' leases are renewed over connections of their own: a crowd that keeps every
    # connection of the main pool busy (`bot.storage.connection`) must not cost a channel its
    # sender (tests/storage/test_redis_conn). Not a speed-up: on the main client the intake
    # measured the same.
    lease_redis = build_redis(
        settings.redis_url, settings.sentinel(), client_name="queuepilot-leases"
    )
    outbound = Outbound(
        store=store,
        queue=queue,
        storms=storms,
        slack=gateway,
        permalinks=permalinks,
        telemetry=telemetry,
        charts=charts,
        notices=NoticeStore(redis, store.keys),
        warnings=warnings if early_warnings is not None else None,
        config=sender_config,
        clock=clock,
    )
    senders = Senders(
        channels,
        outbound.sender,
        Leases(lease_redis),
        queue.keys,
        lease_ttl_ms=sender_config.lease_ttl_ms,
    )
    bolt = AsyncApp(
        client=client,
        signing_secret=_secret(settings.slack_signing_secret) or "unused",
        logger=logging.getLogger("slack_bolt"),
        # No listener for it: Bolt's 404 (which the boundary acks) without its warning that
        # quotes the body.
        raise_error_for_unhandled_request=True,
        # Bolt answers `ssl_check` before it verifies the signature: without it, a signed
        # ssl_check reaches no listener and is acked, and an unsigned one is a 401 like any.
        ssl_check_enabled=False,
        # Listeners acknowledge and hand their work to `handlers.context.after_ack`; Slack's
        # answer goes out when they return, not at Bolt's next 10 ms poll of `ack`.
        process_before_response=True,
    )
    handlers.slack_boundary.install(bolt, redis=redis, prefix=settings.redis_prefix)
    _provide(bolt, core, gateway)
    home = Home(
        store,
        warnings,
        readings,
        HomeViewers(redis, store.keys),
        permalinks,
        gateway,
        config=HomeConfig(settings.slash_command, settings.home_numbers_seconds),
        clock=clock,
    )
    return Bot(
        settings=settings,
        redis=redis,
        telemetry=telemetry,
        stream=stream,
        store=store,
        queue=queue,
        gateway=gateway,
        intake=intake,
        senders=senders,
        reporter=reporter,
        core=core,
        bolt=bolt,
        silence_watch=silence_watch,
        readings=readings,
        scale_reverts=scale_reverts,
        lease_redis=lease_redis,
        early_warnings=early_warnings,
        bell_redis=bells,
        alert_issues=alert_issues,
        home=home,
    )


def warning_config(settings: Settings) -> WarningConfig:
    return WarningConfig(
        channel=settings.slack_channel,
        horizon_mins=settings.early_warning_minutes,
        boot_mins=settings.runner_boot_minutes,
        thresholds=Thresholds(settings.early_warning_queued, settings.early_warning_wait_minutes),
        routes=settings.slack_routes,
        # An early warning offers Scale up for the types an operator gave a scale target.
        scalable=(
            frozenset(settings.scaler_targets)
            if settings.scaler_backend is not ScalerBackend.NONE
            else frozenset()
        ),
    )


def status_config(settings: Settings) -> StatusConfig:
    drain = DrainConfig(
        checks=settings.drain_checks,
        max_queued=settings.drain_max_queued,
        max_wait_mins=settings.drain_max_wait_minutes,
        check_interval_s=settings.drain_check_seconds,
    )
    return StatusConfig(
        interval_s=settings.status_interval_seconds,
        drain=drain,
        chart_every=settings.status_chart_every,
        within_mins=settings.drain_target_minutes,
        routing=routing(settings),
    )


def routing(settings: Settings) -> Routing:
    return Routing(settings.slack_routes, settings.slack_channel)


def _action_core(
    settings: Settings,
    *,
    readings: FleetReadings,
    jobs: JobsWatch | None,
    warnings: WarningStore,
    store: IncidentStore,
    telemetry: Telemetry,
    gateway: SlackGateway,
    permalinks: Permalinks,
    redis: Redis,
    clock: Callable[[], datetime],
    history: QueueHistory | None,
) -> tuple[ActionCore, SilenceWatch | None, ScaleReverts | None]:
    """The action core with its backends, the watch over the silences it makes, and the sweep
    that puts its scale-ups back."""
    interactions = Interactions(redis, settings.redis_prefix)
    authorizer = Authorizer(
        Rules(scale_allowed=settings.scale_allowed_users), group_members=gateway.usergroup_members
    )
    acting = Acting(
        store, telemetry, interactions, authorizer, display_name=gateway.display_name, clock=clock
    )
    silencer = build_silencer(settings)
    silence_config = SilenceConfig(
        timeout_s=settings.backend_timeout_seconds, check_s=settings.silence_check_seconds
    )
    silencing = Silencing(acting, silencer, config=silence_config, permalink=permalinks.link)
    watch = None
    if silencer is not None:
        watch = SilenceWatch(store, silencer, config=silence_config, clock=clock)
    scale_config = ScaleConfig(
        timeout_s=settings.backend_timeout_seconds,
        cooldown_s=settings.scale_cooldown_seconds,
    )
    scaler = build_scaler(settings, os.environ)
    reverts = None
    if scaler is not None:
        revert_config = RevertConfig(
            after_s=settings.scale_revert_after,
            # Resolution is noticed within a few ticks; the record costs one Redis read a look.
            check_s=settings.status_tick_seconds * 3,
            timeout_s=settings.backend_timeout_seconds,
            settle_s=settings.scale_revert_settle,
            drain=status_config(settings).drain,
        )
        reverts = ScaleReverts(
            redis,
            store.keys,
            store,
            scaler,
            config=revert_config,
            clock=clock,
            warnings=warnings,
            readings=readings,
        )
    scaling = Scaling(
        acting,
        scaler,
        scale_targets(settings),
        config=scale_config,
        reverts=reverts,
        names=runner_names(settings),
    )
    routes = routing(settings)
    diagnose_config = DiagnoseConfig(
        timeout_s=settings.backend_timeout_seconds,
        boot_mins=settings.runner_boot_minutes,
        stall_mins=settings.listener_stall_minutes,
        routing=routes,
        within_mins=settings.drain_target_minutes,
    )
    diagnosing = Diagnosing(acting, readings, config=diagnose_config, jobs=jobs, scaling=scaling)
    report = Report(
        acting,
        readings,
        config=ReportConfig(
            kept_days=settings.incident_retention_days,
            channel=settings.slack_channel,
            routes=settings.slack_routes,
            thresholds=Thresholds(
                settings.early_warning_queued, settings.early_warning_wait_minutes
            ),
            timeout_s=settings.backend_timeout_seconds,
        ),
        notices=NoticeStore(redis, store.keys),
        history=history,
    )
    core = ActionCore(
        acting,
        silencing,
        scaling,
        diagnosing,
        Jobs(acting, jobs, routes),
        Warnings(acting, warnings, scaling),
        report,
        routing=routes,
        within_mins=settings.drain_target_minutes,
    )
    return core, watch, reverts


def _intake_config(settings: Settings) -> IntakeConfig:
    host = f"{socket.gethostname()}-{os.getpid()}"
    return IntakeConfig(
        # Unique per process, so a restarted replica's entries are reclaimed, not assumed done.
        consumer=f"{host}-{secrets.token_hex(3)}",
        channel=settings.slack_channel,
        routes=settings.slack_routes,
        names=runner_names(settings),
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


def build_app(bot: Bot) -> ASGIApp:
    """The ASGI app: every endpoint on one port (Slack's events, the alert webhooks, health and
    metrics; docs/operations.md lists them)."""
    app = Starlette(lifespan=_lifespan(bot))
    alert_routes = handlers.webhooks.register(app, _webhooks(bot))
    health = handlers.health.Health(
        bot.redis, bot.telemetry, alive=bot.alive, backlogs=lambda: _backlogs(bot)
    )
    handlers.health.register(app, health)
    handlers.actions.register(bot.bolt)
    handlers.views.register(bot.bolt)
    handlers.commands.register(bot.bolt, command=bot.settings.slash_command)
    if bot.home is not None:
        handlers.home.register(bot.bolt, bot.home)
    if not bot.settings.socket_mode:
        # In Socket Mode Slack's traffic arrives over the websocket, and there is no signing
        # secret to verify an HTTP request with: the route would only ever answer errors.
        events = handlers.slack_events.SlackEvents(
            handlers.slack_boundary.SlackBoundary(bot.bolt),
            signing_secret=_secret(bot.settings.slack_signing_secret) or "",
        )
        handlers.slack_events.register(app, events)
    return alert_routes


async def _backlogs(bot: Bot) -> None:
    bot.telemetry.intake_backlog.set(await bot.stream.backlog())
    for channel in await bot.queue.channels():
        bot.telemetry.send_queue.labels(channel).set(await bot.queue.waiting(channel))


def _webhooks(bot: Bot) -> handlers.webhooks.AlertWebhooks:
    s = bot.settings
    auth = handlers.webhooks.WebhookAuth(
        token=_secret(s.alert_webhook_token),
        hmac_secret=_secret(s.alert_webhook_hmac_secret),
        basic_user=s.alert_webhook_basic_user,
        basic_password=_secret(s.alert_webhook_basic_password),
        allow_unauthenticated=s.alert_webhook_allow_unauthenticated,
        hmac_allow_no_timestamp=s.alert_webhook_hmac_allow_no_timestamp,
    )
    return handlers.webhooks.AlertWebhooks(
        bot.stream,
        bot.telemetry,
        auth=auth,
        max_body_bytes=s.alert_max_body_bytes,
    )


def _lifespan(bot: Bot) -> Callable[[Starlette], AsyncIterator[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop = asyncio.Event()
        bot.gateway.open()
        consumer = asyncio.create_task(bot.intake.run(stop), name="intake")
        senders = asyncio.create_task(bot.senders.run(stop), name="senders")
        bot.background += [consumer, senders]
        scheduler = periodic.start(
            _ticks(bot), every_s=bot.settings.status_tick_seconds, weekly=_weekly(bot)
        )
        socket_mode = await _start_socket_mode(bot)
        log.info("queuepilot is up: channel %s", bot.settings.slack_channel)
        uses = {bot.settings.slack_channel: "SLACK_CHANNEL"}
        for n, route in enumerate(bot.settings.slack_routes, 1):
            log.info("route %d: %s -> channel %s", n, route.text, route.channel)
            uses.setdefault(route.channel, f"route {n}: {route.text}")
        # Aside, and not one of the tasks health watches: a Slack slow to answer does not hold
        # up the start, and a check that ended is not a replica that stopped working.
        check = asyncio.create_task(check_channels(bot.gateway, uses), name="channel-check")
        try:
            yield
        finally:
            # Stop taking work, let in-flight entries finish (or hand them back to the group),
            # give up the channels this replica sends to so another takes over at once.
            stop.set()
            check.cancel()
            scheduler.shutdown(wait=False)
            if socket_mode is not None:
                await socket_mode.close()
            with suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.gather(consumer, senders), timeout=10)
            if bot.readings is not None:
                with suppress(OSError):
                    await bot.readings.aclose()
            for client in (bot.redis, bot.lease_redis, bot.bell_redis):
                if client is not None:
                    with suppress(RedisError, OSError):
                        await client.aclose()
            await bot.gateway.aclose()
            log.info("queuepilot stopped cleanly")

    return lifespan  # type: ignore[return-value]


def _ticks(bot: Bot) -> dict[str, periodic.Tick]:
    """The replica's periodic jobs: each looks only at what is due in Redis."""
    ticks: dict[str, periodic.Tick] = {"status-tick": bot.reporter.tick}
    if bot.silence_watch is not None:
        ticks["silence-watch"] = bot.silence_watch.tick
    if bot.scale_reverts is not None:
        ticks["scale-reverts"] = bot.scale_reverts.tick
    if bot.early_warnings is not None:
        ticks["early-warning"] = bot.early_warnings.tick
    if bot.alert_issues is not None:
        ticks["alert-issue"] = bot.alert_issues.tick
    if bot.home is not None:
        ticks["app-home"] = bot.home.tick
    # A reading every interval where the readings are the report's history and nothing else
    # reads on a schedule (the early warning does): a week read only during incidents is not
    # the week.
    if bot.readings is not None and bot.readings.keeps_history and bot.early_warnings is None:
        ticks["fleet-reading"] = bot.readings.tick
    return ticks


def _weekly(bot: Bot) -> periodic.Weekly | None:
    schedule = bot.settings.report_schedule
    return periodic.Weekly(schedule, bot.core.post_weekly_report) if schedule else None


async def _start_socket_mode(bot: Bot) -> SocketModeClient | None:
    """Socket Mode when SLACK_APP_TOKEN is set: Slack traffic over a websocket, no public URL.

    Envelopes go to Bolt through the HTTP route's boundary (`handlers.socket_mode`); the
    websocket URL comes from SLACK_API_URL's `apps.connections.open`, asked with the app-level
    token."""
    if bot.settings.slack_app_token is None:
        return None
    boundary = handlers.slack_boundary.SlackBoundary(bot.bolt)
    token = bot.settings.slack_app_token.get_secret_value()
    return await handlers.socket_mode.start(token, bot.bolt.client, boundary)
