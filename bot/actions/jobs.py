"""`/queue jobs [runner-type]`: which jobs are queueing, from where, and what changed.

Read-only and answered ephemerally: the jobs source lists the queued jobs and the arrival history
counts the new ones (`bot.fleet.jobs.JobsWatch`, which diagnostics read too), and the answer
shows the affected runner types (the one asked for, else the open incidents', else the worst
queues), what arrived in the last hour against the same hour a day before, and the source's note.
"""

from __future__ import annotations

from bot.actions.flow import Acting, Actor, Outcome, failed
from bot.backends.errors import BackendError
from bot.domain.jobs import JobsView
from bot.domain.runner_names import runner_key
from bot.fleet.jobs import JobsWatch
from bot.render.jobs import MAX_TYPES, render_jobs
from bot.render.mrkdwn import escape

OPEN_INCIDENTS = 20  # whose runner types count as affected
NO_SOURCE = (
    "the metrics backend cannot list jobs: `JOBS_BACKEND=github` or `hud` (or "
    "`METRICS_BACKEND=github` or `hud`) lists them"
)


class Jobs:
    def __init__(self, acting: Acting, watch: JobsWatch | None) -> None:
        self._acting = acting
        self._watch = watch

    @property
    def watch(self) -> JobsWatch | None:
        return self._watch

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
        if self._watch is None:
            return failed(f"No queued jobs to show: {NO_SOURCE}.")
        try:
            view = await self._watch.view(now=self._acting.clock())
        except BackendError as exc:
            return failed(f"No queued jobs to show: {escape(str(exc))}")
        types = [view.name_of(runner_type)] if runner_type else await self._affected(view)
        return Outcome(True, render_jobs(view, types, limit=limit))

    async def _affected(self, view: JobsView) -> list[str]:
        """The open incidents' runner types that have jobs in the view, else the worst queues."""
        store = self._acting.store
        incidents = await store.get_many((await store.open_ids())[:OPEN_INCIDENTS])
        named = {runner_key(name) for i in incidents for name in i.runner_types}
        ranked = sorted(view.runner_types.values(), key=lambda q: (-q.queued, q.runner_type))
        affected = [q.runner_type for q in ranked if runner_key(q.runner_type) in named]
        return (affected or [q.runner_type for q in ranked])[:MAX_TYPES]
