"""`/queue jobs [runner-type]`: which jobs are queueing, from where, and what changed.

Read-only and answered ephemerally: the metrics backend lists the queued jobs (when it can:
`QueuedJobs`), the arrival history counts the new ones and says how many arrived in the last
hour against the same hour a day before, and the answer shows the affected runner types (the
one asked for, else the open incidents', else the worst queues). Diagnostics reuse `view()`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.actions.flow import Acting, Actor, Outcome, failed
from bot.backends.errors import BackendError, within
from bot.backends.metrics import QueuedJobs
from bot.domain.jobs import Arrivals, JobsView, jobs_view
from bot.fleet.jobs import JobArrivals
from bot.fleet.readings import FleetReadings
from bot.render.jobs import MAX_TYPES, render_jobs
from bot.render.mrkdwn import escape

OPEN_INCIDENTS = 20  # whose runner types count as affected


@dataclass(frozen=True)
class JobsConfig:
    timeout_s: float = 10.0


class Jobs:
    def __init__(
        self,
        acting: Acting,
        readings: FleetReadings,
        arrivals: JobArrivals | None,
        *,
        config: JobsConfig | None = None,
    ) -> None:
        self._acting = acting
        self._readings = readings
        self._arrivals = arrivals
        self._config = config or JobsConfig()

    @property
    def can_list(self) -> bool:
        return isinstance(self._readings.metrics, QueuedJobs)

    async def view(self) -> JobsView:
        """The queued jobs now, with what arrived; raises `BackendError` when the source
        cannot say (its note says why it sees no jobs, e.g. the alert backend)."""
        metrics = self._readings.metrics
        now = self._acting.clock()
        if not isinstance(metrics, QueuedJobs):
            raise BackendError(f"{metrics.name} cannot list queued jobs", retryable=False)
        listing = await within(metrics.queued_jobs(now=now), self._config.timeout_s, metrics.name)
        if listing.arrivals is not None:
            arrivals = listing.arrivals
        elif self._arrivals is not None:
            arrivals = await self._arrivals.record(listing.jobs, now=now)
        else:
            arrivals = Arrivals()
        return jobs_view(listing, arrivals, source=metrics.name, at=now)

    async def jobs(
        self,
        actor: Actor,
        runner_type: str | None = None,
        *,
        limit: int = 2900,
        interaction: str | None = None,
    ) -> Outcome:
        return await self._acting.guarded(
            "jobs", actor, interaction, lambda: self._answer(runner_type, limit)
        )

    async def _answer(self, runner_type: str | None, limit: int) -> Outcome:
        try:
            view = await self.view()
        except BackendError as exc:
            return failed(f"No queued jobs to show: {escape(str(exc))}")
        types = [runner_type] if runner_type else await self._affected(view)
        return Outcome(True, render_jobs(view, types, limit=limit))

    async def _affected(self, view: JobsView) -> list[str]:
        """The open incidents' runner types that have jobs in the view, else the worst queues."""
        store = self._acting.store
        incidents = await store.get_many((await store.open_ids())[:OPEN_INCIDENTS])
        named = {name.casefold() for i in incidents for name in i.runner_types}
        ranked = sorted(view.runner_types.values(), key=lambda q: (-q.queued, q.runner_type))
        affected = [q.runner_type for q in ranked if q.runner_type.casefold() in named]
        return (affected or [q.runner_type for q in ranked])[:MAX_TYPES]
