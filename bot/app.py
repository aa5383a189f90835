"""The composition root: builds every part from Settings and registers the handlers. Background
work starts and stops in the ASGI lifespan, so an app can be built without touching the network."""

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
from functools import partial
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from starlette.applications import Starlette
from starlette.types import ASGIApp

import handlers.health
import handlers.listeners
import handlers.slack_boundary
import handlers.webhooks
from bot import factory, leader
from bot.actions.core import ActionCore
from bot.actions.diagnose import Diagnosing, Jobs
from bot.actions.early_warning import Warnings
from bot.actions.flow import Acting, Authorizer
from bot.actions.pilot import Piloting
from bot.actions.report import Report
from bot.actions.scale import Scaling
from bot.actions.scale_reverts import ScaleReverts
from bot.actions.silence import SilenceWatch, Silencing
from bot.backends.metrics import QueueHistory
from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.hud import HudMetrics
from bot.checks.watch import ProbeWatch
from bot.config import Settings, memory
from bot.domain.alerting.routes import MAX_ROUTES
from bot.fleet.cost import CostReader
from bot.fleet.readings import FleetReadings, JobsWatch
from bot.fleet.readings_history import ReadingsHistory
from bot.intake.consumer import Intake, request_loop
from bot.intake.group_loop import GroupLoop
from bot.outbound import send
from bot.outbound.desk import Outbound
from bot.outbound.gateway import SlackGateway, build_client, check_channels
from bot.outbound.home import Home
from bot.outbound.lost_state import StateGuard
from bot.pacing import Pacing
from bot.status.alert_issue import AlertIssues
from bot.status.early_warning import EarlyWarnings
from bot.status.tick import StatusReporter
from bot.storage.connection import build_redis
from bot.storage.early_warning import WarningStore
from bot.storage.fleet import JobArrivals
from bot.storage.home import HomeViewers
from bot.storage.incident_store import IncidentStore, IssueLinks
from bot.storage.keys import Keys
from bot.storage.leases import Interactions, Leadership, Leases
from bot.storage.listed_jobs import ListedJobs
from bot.storage.pilot import PilotStore
from bot.storage.send_queue import NoticeStore, SendQueue
from bot.storage.slack_cache import ChartDelivery, PermalinkCache, UserNames
from bot.storage.state_marker import StateMarker
from bot.storage.storm_queue import StormQueue
from bot.storage.streams import NotificationStream, Request, RequestStream
from bot.storage.workflow_jobs import WorkflowJobs
from bot.telemetry import Telemetry
from handlers.context import Parts
from handlers.lazy import StreamRunner
from handlers.webhooks import secret_of

log = logging.getLogger(__name__)

# The senders' doorbell connections: three a channel at most; made only as needed.
BELL_CONNECTIONS = 3 * (MAX_ROUTES + 1) + 20


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Wiring:
    """What every part is built from: the settings, the clock, the backends, and Redis as the
    parts use it (the main pool, the leases' and the doorbells' connections)."""

    settings: Settings
    clock: Callable[[], datetime]
    backends: factory.Backends
    redis: Redis
    lease_redis: Redis
    bell_redis: Redis
    keys: Keys
    retention_s: int
    consumer: str  # this process in both streams' consumer groups
    leadership: Leadership
    stream: NotificationStream
    request_stream: RequestStream
    store: IncidentStore
    queue: SendQueue
    warnings: WarningStore
    notices: NoticeStore
    marker: StateMarker
    workflow_jobs: WorkflowJobs  # GitHub's jobs as its workflow_job deliveries tell them
    listed_jobs: ListedJobs  # the HUD's queued jobs, followed from one listing to the next

    @property
    def early_warnings(self) -> WarningStore | None:
        """The warnings' store, where early warnings are on."""
        on = self.settings.early_warning_minutes > 0 and self.backends.metrics.live
        return self.warnings if on else None

    @property
    def followed(self) -> ListedJobs | None:
        """Where the HUD lists the jobs at every reading: its listings followed, for what the queue
        cost (without live readings, jobs are listed only when someone asks: no job is followed)."""
        hud = isinstance(self.backends.jobs, HudMetrics) and self.backends.metrics.live
        return self.listed_jobs if hud else None


@dataclass(kw_only=True)
class Bot(Wiring):
    """Everything one replica runs, built once and passed down: its stores and their users."""

    telemetry: Telemetry
    gateway: SlackGateway
    intake: Intake
    requests: GroupLoop[Request]
    outbound: Outbound
    readings: FleetReadings
    core: ActionCore
    bolt: AsyncApp
    lazy: StreamRunner
    home: Home
    guard: StateGuard
    ticks: dict[str, leader.Tick]
    probes: ProbeWatch
    memory: memory.Limit  # resolved once at the start: the caches' sizes follow it
    background: list[asyncio.Task[None]] = field(default_factory=list)

    def alive(self) -> bool:
        return all(not task.done() for task in self.background)

    async def backlogs(self) -> None:
        self.telemetry.intake_backlog.set(await self.stream.backlog())
        self.telemetry.requests_backlog.set(await self.request_stream.backlog())
        for channel in await self.queue.channels():
            self.telemetry.send_queue.labels(channel).set(await self.queue.waiting(channel))

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        stop = asyncio.Event()
        self.gateway.open()
        campaign = asyncio.create_task(
            leader.campaign(self.leadership, self.lead, self.telemetry, stop), name="campaign"
        )
        self.background.append(campaign)
        socket_mode = None
        if self.settings.slack_app_token is not None:
            token = self.settings.slack_app_token.get_secret_value()
            socket_mode = await handlers.slack_boundary.start_socket_mode(token, self.bolt)
        log.info("queuepilot is up: channel %s", self.settings.slack_channel)
        log.info("memory: %s", memory.described(self.memory))
        for n, route in enumerate(self.settings.slack_routes, 1):
            log.info("route %d: %s -> channel %s", n, route.text, route.channel)
        # Not one of the tasks health watches: a slow Slack does not hold up the start, and a
        # check that ended is not a replica that stopped working.
        uses = self.settings.channel_uses
        check = asyncio.create_task(check_channels(self.gateway, uses), name="channel-check")
        try:
            yield
        finally:
            # Stop taking requests, hand off what Slack was answered for; if leading, let the work
            # finish and give the lease up, so another replica leads at once.
            stop.set()
            check.cancel()
            if socket_mode is not None:
                await socket_mode.close()
            await self.lazy.drain(self.settings.shutdown_grace_seconds)
            with suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(campaign, timeout=leader.STOP_WORK_S + 5)
            with suppress(OSError):
                await self.readings.aclose()
            for client in (self.redis, self.lease_redis, self.bell_redis):
                with suppress(RedisError, OSError):
                    await client.aclose()
            await self.gateway.aclose()
            log.info("queuepilot stopped cleanly")

    async def lead(self, deposed: asyncio.Event) -> None:
        take_over_ms = self.settings.leader_lease_ms // 2

        async def intake() -> None:
            # A missing state marker starts a read of Slack's history beside the intake, which
            # holds back only what a root found there may concern (`Intake.held`).
            await self.guard.at_start_of_term(deposed)
            try:
                await self.intake.run(deposed, take_over_ms=take_over_ms)
            finally:
                await self.guard.end_of_term()

        tasks = {
            asyncio.create_task(intake(), name="intake"),
            asyncio.create_task(
                self.requests.run(deposed, take_over_ms=take_over_ms), name="requests"
            ),
            asyncio.create_task(send.run(self.outbound, deposed), name="senders"),
        }
        schedule = self.settings.report_schedule
        weekly = (schedule, self.core.report.post_weekly) if schedule else None
        scheduler = leader.start(
            self.ticks, every_s=self.settings.status_tick_seconds, weekly=weekly
        )
        stopping = asyncio.create_task(deposed.wait())
        try:
            await asyncio.wait({stopping, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # One part that ended on its own ends the term: the next one starts everything afresh.
            deposed.set()
            stopping.cancel()
            scheduler.shutdown(wait=False)
            self.probes.forget()
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, Exception):
                    log.error("leader: %r", outcome)


def build_bot(settings: Settings, *, clock: Callable[[], datetime] = utcnow) -> Bot:
    """The parts in order, each built from the ones before it."""
    telemetry = Telemetry()
    limit = memory.memory_limit(settings.memory_limit_mib)
    caches = memory.cache_bytes(limit.mib)
    backends = factory.build_backends(settings, os.environ, telemetry.backend_called, caches)
    w = _wiring(settings, clock, backends)
    client, names = build_client(settings), UserNames(w.redis, w.keys)
    links = PermalinkCache(w.redis, w.keys, keep_s=w.retention_s)
    gateway = SlackGateway(
        client, telemetry=telemetry, pacing=Pacing(), user_names=names, permalinks=links
    )
    readings, jobs, history = _readings(w)
    core = _core(w, readings, jobs, history, gateway)
    bolt, lazy, requests = _listeners(w, core, gateway)
    guard = StateGuard(w.marker, gateway, telemetry, config=settings, clock=clock)
    viewers = HomeViewers(w.redis, w.keys)
    home = Home(
        w.store,
        w.warnings,
        readings,
        viewers,
        gateway,
        config=settings,
        clock=clock,
        marker=w.marker,
        pilots=core.piloting.states,
    )
    # What `queuepilot check` finds, said by serve too (`bot.checks.watch`).
    probes = ProbeWatch(settings, w.redis, telemetry)
    intake = Intake(
        w.stream,
        w.store,
        telemetry,
        config=settings,
        consumer=w.consumer,
        clock=clock,
        held=guard.held,
    )
    return Bot(
        **vars(w),
        telemetry=telemetry,
        gateway=gateway,
        intake=intake,
        requests=requests,
        outbound=Outbound(
            store=w.store,
            queue=w.queue,
            storms=StormQueue(w.redis, settings.redis_prefix, retention_s=w.retention_s),
            slack=gateway,
            telemetry=telemetry,
            charts=ChartDelivery(w.redis, w.keys, settings.chart_style),
            notices=w.notices,
            warnings=w.early_warnings,
            config=settings,
            clock=clock,
        ),
        readings=readings,
        core=core,
        bolt=bolt,
        lazy=lazy,
        home=home,
        guard=guard,
        ticks=_ticks(w, readings, core, gateway, guard, home, probes),
        probes=probes,
        memory=limit,
    )


def _wiring(
    settings: Settings, clock: Callable[[], datetime], backends: factory.Backends
) -> Wiring:
    def connect(**options: Any) -> Redis:
        return build_redis(settings.redis_url, settings.sentinel(), **options)

    # The leases are renewed over connections of their own: a crowd that keeps the main pool busy
    # must not cost the leader its lead (tests/storage/test_redis_conn).
    # Each idle channel sender blocks on up to three doorbells: on a client of their own, so with
    # many channels the main pool stays free for commands (tests/system/test_many_channels).
    redis, lease_redis = connect(), connect(client_name="queuepilot-leases")
    bells = connect(max_connections=BELL_CONNECTIONS, client_name="queuepilot-bells")
    prefix, keys, waits = settings.redis_prefix, Keys(settings.redis_prefix), settings.wait_replicas
    name = f"{socket.gethostname()}-{os.getpid()}"
    kept_s = round(settings.incident_retention_days * 86_400)
    leadership = Leadership(lease_redis, keys, name=name, ttl_ms=settings.leader_lease_ms)
    # Every commit is the leader's: a replica that does not lead (any more) is refused.
    fence, issues = leadership.fence, backends.issues is not None
    return Wiring(
        settings,
        clock,
        backends,
        redis,
        lease_redis,
        bells,
        keys,
        kept_s,
        # Unique per process, so a restarted replica's entries are reclaimed, not assumed done.
        f"{name}-{secrets.token_hex(3)}",
        leadership,
        NotificationStream(redis, prefix, wait_replicas=waits),
        RequestStream(redis, prefix, wait_replicas=waits),
        IncidentStore(redis, prefix, retention_s=kept_s, issues=issues, fence=fence),
        SendQueue(redis, prefix, retention_s=kept_s, bells=bells, fence=fence),
        WarningStore(redis, keys, bells=bells),
        NoticeStore(redis, keys),
        StateMarker(redis, keys, retention_s=kept_s, fence=fence),
        WorkflowJobs(redis, keys),
        ListedJobs(redis, keys),
    )


def _readings(w: Wiring) -> tuple[FleetReadings, JobsWatch | None, QueueHistory | None]:
    """The fleet's readings, the jobs behind the queue and the report's history: the backend's own
    (Prometheus, the HUD), else the readings queuepilot keeps; none with the `alert` backend."""
    settings, metrics, jobs, kept = w.settings, w.backends.metrics, None, None
    if w.backends.jobs is not None:
        arrivals, timeout_s = JobArrivals(w.redis, w.keys), settings.backend_timeout_seconds
        jobs = JobsWatch(w.backends.jobs, arrivals, timeout_s=timeout_s, followed=w.followed)
    if not isinstance(metrics, QueueHistory) and metrics.live:
        kept = ReadingsHistory(w.redis, w.keys, interval_s=settings.metrics_interval_seconds)
    # GitHub's deliveries come (they are refused without the secret): its jobs are read from
    # their record, and GitHub's API only reconciles it.
    for source in (metrics, w.backends.jobs) if settings.github_webhook_secret else ():
        if isinstance(source, GithubMetrics):
            source.fed_by(w.workflow_jobs)
    fence = w.leadership.fence
    # Advice is capped where queuepilot scales: past one request's cap nobody can act on it.
    caps = {t.runner_type: t.cap for t in w.backends.targets.values()} if w.backends.scaler else {}
    readings = FleetReadings(
        w.redis,
        w.keys,
        metrics,
        config=settings,
        clock=w.clock,
        jobs=jobs,
        kept=kept,
        leads=lambda: fence.held is not None,
        caps=caps,
    )
    return readings, jobs, metrics if isinstance(metrics, QueueHistory) else kept


def _core(
    w: Wiring,
    readings: FleetReadings,
    jobs: JobsWatch | None,
    history: QueueHistory | None,
    gateway: SlackGateway,
) -> ActionCore:
    """The one action core that every button, command and form acts through."""
    settings, backends, store, redis, warnings = (
        w.settings,
        w.backends,
        w.store,
        w.redis,
        w.warnings,
    )
    acting = Acting(
        store,
        gateway.telemetry,
        Interactions(redis, settings.redis_prefix),
        Authorizer(settings, group_members=gateway.usergroup_members),
        display_name=gateway.display_name,
        clock=w.clock,
        ack_on_action=settings.ack_on_action,
    )
    reverts = None
    if backends.scaler is not None:
        reverts = ScaleReverts(
            redis,
            w.keys,
            store,
            backends.scaler,
            config=settings,
            clock=w.clock,
            warnings=warnings,
            readings=readings,
        )
    scaling = Scaling(acting, backends.scaler, backends.targets, config=settings, reverts=reverts)
    pilots = PilotStore(redis, w.keys) if reverts is not None else None
    return ActionCore(
        acting,
        Silencing(acting, backends.silencer, config=settings, permalink=gateway.link),
        scaling,
        Diagnosing(acting, readings, config=settings, jobs=jobs, scaling=scaling),
        Jobs(acting, jobs, settings.routing),
        Warnings(acting, warnings, scaling, readings if backends.metrics.live else None),
        Report(acting, readings, config=settings, notices=w.notices, history=history),
        Piloting(acting, scaling, pilots, readings, config=settings, warnings=w.early_warnings),
        config=settings,
    )


def _listeners(
    w: Wiring, core: ActionCore, gateway: SlackGateway
) -> tuple[AsyncApp, StreamRunner, GroupLoop[Request]]:
    """Bolt, whose listeners' work waits in the requests stream, and the leader's loop over it."""
    bolt = AsyncApp(
        # A client of Bolt's own, without the gateway's shared session: Bolt deep-copies each
        # request, its client too, for the lazy listeners (an aiohttp session cannot be copied).
        client=build_client(w.settings),
        signing_secret=secret_of(w.settings.slack_signing_secret) or "unused",
        logger=logging.getLogger("slack_bolt"),
        # Bolt's 404 for a request no listener wants (which the boundary acks), without its
        # warning that quotes the body.
        raise_error_for_unhandled_request=True,
        # Bolt answers `ssl_check` before it verifies the signature: an unsigned one is a 401.
        ssl_check_enabled=False,
        # Slack's answer goes out when a listener's ack function returns, not at Bolt's next
        # 10 ms poll of `ack`; the lazy work goes on in `handlers.lazy`.
        process_before_response=True,
    )
    handlers.slack_boundary.install(bolt, redis=w.redis, prefix=w.settings.redis_prefix)
    lazy = StreamRunner(w.request_stream, handlers.listeners.WORK, bolt.logger)
    bolt.listener_runner.lazy_listener_runner = lazy
    parts = Parts(core, gateway)

    @bolt.middleware
    async def provide(context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        context["parts"] = parts
        await next()

    # What the leader performs, by the key a listener's runner appended it with: a key not in
    # the table is dead-lettered by the consumer, never guessed at.
    performed = AsyncBoltContext(parts=parts)
    works = {
        key: partial(work.perform, context=performed)
        for key, work in handlers.listeners.WORK.items()
    }
    requests = request_loop(w.request_stream, works, config=w.settings, consumer=w.consumer)
    return bolt, lazy, requests


def _ticks(
    w: Wiring,
    readings: FleetReadings,
    core: ActionCore,
    gateway: SlackGateway,
    guard: StateGuard,
    home: Home,
    probes: ProbeWatch,
) -> dict[str, leader.Tick]:
    """The leader's periodic work, by the name its scheduler runs it under."""
    settings, backends, store, link, clock = w.settings, w.backends, w.store, gateway.link, w.clock
    says = core.scaling.since if core.scaling.scaler is not None else None
    cost = CostReader(settings, backends.metrics, w.workflow_jobs, w.followed)
    reporter = StatusReporter(
        store,
        readings,
        gateway.telemetry,
        config=settings,
        clock=clock,
        scaler_says=says,
        cost=cost,
    )
    ticks: dict[str, leader.Tick] = {"status-tick": reporter.tick}
    if backends.silencer is not None:
        watch = SilenceWatch(store, backends.silencer, config=settings, clock=clock)
        ticks["silence-watch"] = watch.tick
    if core.scaling.reverts is not None:
        ticks["scale-reverts"] = core.scaling.reverts.tick
    if core.piloting.policies:
        ticks["pilot"] = core.piloting.tick
    if w.early_warnings is not None:
        ticks["early-warning"] = EarlyWarnings(
            readings, store, w.warnings, config=settings, clock=clock, permalink=link
        ).tick
    if backends.issues is not None:
        links = IssueLinks(w.redis, w.keys, retention_s=w.retention_s)
        ticks["alert-issue"] = AlertIssues(
            store,
            links,
            backends.issues,
            gateway.pacing,
            Leases(w.redis),
            config=settings,
            permalink=link,
            clock=clock,
        ).tick
    ticks["state-marker"] = guard.tick
    ticks["app-home"] = home.tick
    # The report's history read every interval where nothing else reads on a schedule (the
    # early warning does): a week read only during incidents is not the week.
    if readings.keeps_history and w.early_warnings is None:
        ticks["fleet-reading"] = readings.tick
    if settings.probe_interval_seconds:
        ticks["probes"] = probes.tick
    return ticks


def build_app(bot: Bot) -> ASGIApp:
    """Every endpoint on one port: Slack's, the alert webhooks, GitHub's, health and metrics."""
    app = Starlette(lifespan=bot.lifespan)
    webhooks = handlers.webhooks.AlertWebhooks(bot.stream, bot.telemetry, config=bot.settings)
    github = handlers.webhooks.GithubWebhooks(bot.workflow_jobs, bot.telemetry, config=bot.settings)

    async def role() -> dict[str, Any]:
        # A read of Slack's history after a possible loss, said by every replica while it lasts.
        said = await bot.guard.marker.checking()
        return {**await bot.leadership.role(), **({"state": said} if said else {})}

    handlers.health.register(
        app, bot.redis, bot.telemetry, alive=bot.alive, backlogs=bot.backlogs, role=role
    )
    handlers.listeners.register(bot.bolt, command=bot.settings.slash_command, home_tab=bot.home)
    if not bot.settings.socket_mode:
        # In Socket Mode there is no signing secret to verify an HTTP request with.
        secret = secret_of(bot.settings.slack_signing_secret) or ""
        handlers.slack_boundary.register(app, bot.bolt, signing_secret=secret)
    return handlers.webhooks.register(app, webhooks, github)
