"""An action core for tests that drive it directly (no Slack request), on a real Redis."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from redis.asyncio import Redis

from bot.actions.core import NO_ROUTES, ActionCore
from bot.actions.diagnose import DiagnoseConfig, Diagnosing
from bot.actions.early_warning import Warnings
from bot.actions.flow import Acting
from bot.actions.jobs import Jobs
from bot.actions.permissions import Authorizer, Rules
from bot.actions.report import Report
from bot.actions.scale import ScaleConfig, Scaling
from bot.actions.scale_reverts import ScaleReverts
from bot.actions.silence import SilenceConfig, Silencing
from bot.backends.metrics import QueuedJobs, QueueHistory, QueueMetrics
from bot.backends.metrics.alert import AlertMetrics
from bot.backends.scale import Scaler
from bot.backends.silence import Silencer
from bot.domain.routes import Routing
from bot.domain.scaling import ScaleTarget
from bot.fleet.jobs import JobsWatch
from bot.fleet.readings import FleetReadings
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import IncidentStore
from bot.storage.interactions import Interactions
from bot.storage.job_arrivals import JobArrivals
from bot.telemetry import Telemetry


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
    routing: Routing = NO_ROUTES,
    reverts: ScaleReverts | None = None,
) -> ActionCore:
    interactions = Interactions(redis, store.keys.prefix)
    authorizer = Authorizer(Rules(scale_allowed=scale_allowed), group_members=_no_members)
    acting = Acting(
        store,
        telemetry or Telemetry(),
        interactions,
        authorizer,
        display_name=_no_name,
        clock=clock,
    )
    silencing = Silencing(acting, silencer, config=SilenceConfig(timeout_s=2), permalink=_no_link)
    scaling = Scaling(
        acting,
        scaler,
        targets or {},
        config=ScaleConfig(timeout_s=2, cooldown_s=60),
        reverts=reverts,
    )
    readings = FleetReadings(
        redis,
        store.keys,
        metrics or AlertMetrics(),
        interval_s=60,
        timeout_s=2,
        clock=clock,
    )
    source = metrics if isinstance(metrics, QueuedJobs) else None
    watch = JobsWatch(source, JobArrivals(redis, store.keys), timeout_s=2) if source else None
    diagnosing = Diagnosing(
        acting, readings, config=DiagnoseConfig(timeout_s=2), jobs=watch, scaling=scaling
    )
    warnings = Warnings(acting, WarningStore(redis, store.keys), scaling)
    history = metrics if isinstance(metrics, QueueHistory) else None
    report = Report(acting, readings, history=history)
    return ActionCore(
        acting,
        silencing,
        scaling,
        diagnosing,
        Jobs(acting, watch, routing),
        warnings,
        report,
        routing=routing,
    )
