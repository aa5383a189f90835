"""An action core for tests that drive it directly (no Slack request), on a real Redis."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import httpx
from redis.asyncio import Redis

from bot.actions.core import ActionCore
from bot.actions.diagnose import Diagnosing, Jobs
from bot.actions.early_warning import Warnings
from bot.actions.flow import Acting, Authorizer
from bot.actions.pilot import Piloting
from bot.actions.report import Report
from bot.actions.scale import Scaling
from bot.actions.scale_reverts import ScaleReverts
from bot.actions.silence import Silencing
from bot.backends.metrics import AlertMetrics, QueuedJobs, QueueHistory, QueueMetrics
from bot.backends.scale import Scaler
from bot.backends.silence import Silencer, grafana_silencer
from bot.config import Settings
from bot.domain.alerting.routes import Routing
from bot.domain.scale.scaling import ScaleTarget
from bot.fleet.readings import FleetReadings, JobsWatch
from bot.storage.early_warning import WarningStore
from bot.storage.fleet import JobArrivals
from bot.storage.incident_store import IncidentStore
from bot.storage.leases import Interactions
from bot.storage.pilot import PilotStore
from bot.telemetry import Telemetry
from sandbox.silence_api import FakeSilenceApi


async def _no_name(user: str) -> str | None:
    return None


async def _no_members(group: str) -> list[str]:
    return []


async def _no_link(channel: str, ts: str) -> str | None:
    return None


def action_core(
    redis: Redis,
    store: IncidentStore,
    *,
    silencer: Silencer | None = None,
    scaler: Scaler | None = None,
    targets: dict[str, ScaleTarget] | None = None,
    metrics: QueueMetrics | None = None,
    scale_allowed: tuple[str, ...] = (),
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    telemetry: Telemetry | None = None,
    routing: Routing | None = None,
    reverts: ScaleReverts | None = None,
    ack_on_action: bool = True,
) -> ActionCore:
    routing = routing or Routing()
    config = Settings(
        backend_timeout_seconds=2,
        scale_allowed_users=scale_allowed,
        slack_routes=routing.routes,
        slack_channel=routing.default,
        ack_on_action=ack_on_action,
    )
    interactions = Interactions(redis, store.keys.prefix)
    authorizer = Authorizer(config, group_members=_no_members)
    acting = Acting(
        store,
        telemetry or Telemetry(),
        interactions,
        authorizer,
        display_name=_no_name,
        clock=clock,
        ack_on_action=config.ack_on_action,
    )
    silencing = Silencing(acting, silencer, config=config, permalink=_no_link)
    scaling = Scaling(acting, scaler, targets or {}, config=config, reverts=reverts)
    readings = FleetReadings(
        redis, store.keys, metrics or AlertMetrics(), config=config, clock=clock
    )
    source = metrics if isinstance(metrics, QueuedJobs) else None
    watch = JobsWatch(source, JobArrivals(redis, store.keys), timeout_s=2) if source else None
    diagnosing = Diagnosing(acting, readings, config=config, jobs=watch, scaling=scaling)
    warnings = Warnings(acting, WarningStore(redis, store.keys), scaling)
    history = metrics if isinstance(metrics, QueueHistory) else None
    report = Report(acting, readings, config=config, history=history)
    return ActionCore(
        acting,
        silencing,
        scaling,
        diagnosing,
        Jobs(acting, watch, routing),
        warnings,
        report,
        Piloting(
            acting,
            scaling,
            PilotStore(redis, store.keys) if reverts else None,
            readings,
            config=config,
        ),
        config=config,
    )


def grafana_in_process(api: FakeSilenceApi) -> Silencer:
    """Grafana's silence API, in process: the bot's own HTTP client against the stand-in."""
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=api.app))
    return grafana_silencer("http://grafana", api.token, client=client)
