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
import handlers.requests
import handlers.slack_boundary
import handlers.slack_events
import handlers.socket_mode
import handlers.views
import handlers.webhooks
from bot import leader, periodic
from bot.actions.core import ActionCore
from bot.actions.diagnose import Diagnosing
from bot.actions.early_warning import Warnings
from bot.actions.flow import Acting
from bot.actions.jobs import Jobs
from bot.actions.permissions import Authorizer
from bot.actions.report import Report
from bot.actions.scale import Scaling
from bot.actions.scale_reverts import ScaleReverts
from bot.actions.silence import Silencing
from bot.actions.silence_watch import SilenceWatch
from bot.backends.metrics import QueueHistory
from bot.config import Settings
from bot.domain.routes import MAX_ROUTES
from bot.factory import (
    build_issues,
    build_jobs_source,
    build_metrics,
    build_scaler,
    build_silencer,
    github_auth,
    scale_targets,
)
from bot.fleet.jobs import JobsWatch
from bot.fleet.readings import FleetReadings
from bot.fleet.readings_history import ReadingsHistory
from bot.intake.consumer import Intake
from bot.intake.requests import Requests
from bot.outbound import send
from bot.outbound.gateway import SlackGateway, build_client
from bot.outbound.home import Home
from bot.outbound.membership import check_channels
from bot.outbound.permalinks import Permalinks
from bot.outbound.send import Outbound
from bot.pacing import Pacing
from bot.status.alert_issue import AlertIssues
from bot.status.early_warning import EarlyWarnings
from bot.status.tick import StatusReporter
from bot.storage.connection import build_redis
from bot.storage.early_warning import WarningStore
from bot.storage.home import HomeViewers
from bot.storage.incident_store import IncidentStore, IssueLinks
from bot.storage.interactions import Interactions
from bot.storage.job_arrivals import JobArrivals
from bot.storage.keys import Keys
from bot.storage.leader import Leadership
from bot.storage.leases import Leases
from bot.storage.requests import RequestStream
from bot.storage.send_queue import NoticeStore, SendQueue
from bot.storage.slack_cache import ChartDelivery, PermalinkCache, UserNames
from bot.storage.storm_queue import StormQueue
from bot.storage.stream import NotificationStream
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
    request_stream: RequestStream
    requests: Requests
    outbound: Outbound
    reporter: StatusReporter
    core: ActionCore
    bolt: AsyncApp
    leadership: Leadership
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
    name = f"{socket.gethostname()}-{os.getpid()}"
    consumer = _consumer_name(name)  # this process in both streams' consumer groups
    telemetry = Telemetry()
    retention_s = settings.incident_retention_days * 86_400
    stream = NotificationStream(redis, prefix, wait_replicas=settings.wait_replicas)
    # One token source for both GitHub readers: an App's installation token is minted once.
    github = github_auth(settings)
    issues = build_issues(settings, github)
    # The leases (the leader's, the channels') are renewed over connections of their own: a
    # crowd that keeps every connection of the main pool busy (`bot.storage.connection`) must
    # not cost the leader its lead, nor a channel its sender (tests/storage/test_redis_conn).
    lease_redis = build_redis(
        settings.redis_url, settings.sentinel(), client_name="queuepilot-leases"
    )
    leadership = Leadership(lease_redis, Keys(prefix), name=name, ttl_ms=settings.leader_lease_ms)
    # Every commit is the leader's: a replica that does not lead (any more) is refused.
    store = IncidentStore(
        redis,
        prefix,
        retention_s=retention_s,
        issues=issues is not None,
        fence=leadership.fence,
    )
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
    client = build_client(settings)
    pacing = Pacing()
    gateway = SlackGateway(
        client, telemetry=telemetry, pacing=pacing, user_names=UserNames(redis, store.keys)
    )
    permalinks = Permalinks(PermalinkCache(redis, store.keys, keep_s=retention_s), gateway)
    intake = Intake(stream, store, telemetry, config=settings, consumer=consumer, clock=clock)
    storms = StormQueue(redis, prefix, retention_s=retention_s)
    charts = ChartDelivery(redis, store.keys, settings.chart_style)
    warnings = WarningStore(redis, store.keys, bells=bells)

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
        redis, store.keys, metrics, config=settings, clock=clock, jobs=jobs, kept=kept
    )
    reporter = StatusReporter(store, readings, telemetry, config=settings, clock=clock)
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
            config=settings,
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
            config=settings,
            permalink=permalinks.link,
            postmortem=core.postmortem_markdown,
            clock=clock,
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
        leases=Leases(lease_redis),
        config=settings,
        clock=clock,
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
    request_stream = RequestStream(redis, prefix, wait_replicas=settings.wait_replicas)
    _provide(bolt, core, gateway, request_stream)
    requests = Requests(
        request_stream,
        handlers.requests.works(core, gateway),
        config=settings,
        consumer=consumer,
    )
    home = Home(
        store,
        warnings,
        readings,
        HomeViewers(redis, store.keys),
        permalinks,
        gateway,
        config=settings,
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
        request_stream=request_stream,
        requests=requests,
        outbound=outbound,
        reporter=reporter,
        core=core,
        bolt=bolt,
        leadership=leadership,
        silence_watch=silence_watch,
        readings=readings,
        scale_reverts=scale_reverts,
        lease_redis=lease_redis,
        early_warnings=early_warnings,
        bell_redis=bells,
        alert_issues=alert_issues,
        home=home,
    )


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
    authorizer = Authorizer(settings, group_members=gateway.usergroup_members)
    acting = Acting(
        store, telemetry, interactions, authorizer, display_name=gateway.display_name, clock=clock
    )
    silencer = build_silencer(settings)
    silencing = Silencing(acting, silencer, config=settings, permalink=permalinks.link)
    watch = None
    if silencer is not None:
        watch = SilenceWatch(store, silencer, config=settings, clock=clock)
    scaler = build_scaler(settings, os.environ)
    reverts = None
    if scaler is not None:
        reverts = ScaleReverts(
            redis,
            store.keys,
            store,
            scaler,
            config=settings,
            clock=clock,
            warnings=warnings,
            readings=readings,
        )
    scaling = Scaling(acting, scaler, scale_targets(settings), config=settings, reverts=reverts)
    diagnosing = Diagnosing(acting, readings, config=settings, jobs=jobs, scaling=scaling)
    report = Report(
        acting, readings, config=settings, notices=NoticeStore(redis, store.keys), history=history
    )
    core = ActionCore(
        acting,
        silencing,
        scaling,
        diagnosing,
        Jobs(acting, jobs, settings.routing),
        Warnings(acting, warnings, scaling),
        report,
        config=settings,
    )
    return core, watch, reverts


def _consumer_name(name: str) -> str:
    """This process's name in the stream's consumer group: unique per process, so a restarted
    replica's entries are reclaimed, not assumed done."""
    return f"{name}-{secrets.token_hex(3)}"


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def _provide(
    bolt: AsyncApp, core: ActionCore, gateway: SlackGateway, requests: RequestStream
) -> None:
    """Give every listener the action core, the gateway and the requests stream, in HTTP and
    Socket Mode alike."""

    async def provide(context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        context["actions"] = core
        context["slack"] = gateway
        context["requests"] = requests
        await next()

    bolt.middleware(provide)


def build_app(bot: Bot) -> ASGIApp:
    """The ASGI app: every endpoint on one port (Slack's events, the alert webhooks, health and
    metrics; docs/operations.md lists them)."""
    app = Starlette(lifespan=_lifespan(bot))
    alert_routes = handlers.webhooks.register(app, _webhooks(bot))
    health = handlers.health.Health(
        bot.redis,
        bot.telemetry,
        alive=bot.alive,
        backlogs=lambda: _backlogs(bot),
        role=bot.leadership.role,
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
    bot.telemetry.requests_backlog.set(await bot.request_stream.backlog())
    for channel in await bot.queue.channels():
        bot.telemetry.send_queue.labels(channel).set(await bot.queue.waiting(channel))


def _webhooks(bot: Bot) -> handlers.webhooks.AlertWebhooks:
    return handlers.webhooks.AlertWebhooks(bot.stream, bot.telemetry, config=bot.settings)


def _lifespan(bot: Bot) -> Callable[[Starlette], AsyncIterator[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        stop = asyncio.Event()
        bot.gateway.open()
        campaign = asyncio.create_task(
            leader.campaign(bot.leadership, _leader_work(bot), bot.telemetry, stop),
            name="campaign",
        )
        bot.background.append(campaign)
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
            # Stop taking requests and, if leading, let the work finish what it is doing (or
            # hand it back to the streams) and give the lease up, so another replica leads at
            # once.
            stop.set()
            check.cancel()
            if socket_mode is not None:
                await socket_mode.close()
            with suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(campaign, timeout=leader.STOP_WORK_S + 5)
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


def _leader_work(bot: Bot) -> leader.Work:
    """What the leader does: apply the stream, send to Slack, run the periodic jobs."""

    async def work(deposed: asyncio.Event) -> None:
        take_over_ms = bot.settings.leader_lease_ms // 2
        tasks = {
            asyncio.create_task(bot.intake.run(deposed, take_over_ms=take_over_ms), name="intake"),
            asyncio.create_task(
                bot.requests.run(deposed, take_over_ms=take_over_ms), name="requests"
            ),
            asyncio.create_task(send.run(bot.outbound, deposed), name="senders"),
        }
        scheduler = periodic.start(
            _ticks(bot), every_s=bot.settings.status_tick_seconds, weekly=_weekly(bot)
        )
        stopping = asyncio.create_task(deposed.wait())
        try:
            await asyncio.wait({stopping, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # One part that ended on its own ends the term: another replica (or this one,
            # again) leads with everything started afresh.
            deposed.set()
            stopping.cancel()
            scheduler.shutdown(wait=False)
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, Exception):
                    log.error("leader: %r", outcome)

    return work


def _ticks(bot: Bot) -> dict[str, periodic.Tick]:
    """The leader's periodic jobs: each looks only at what is due in Redis."""
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
