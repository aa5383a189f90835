"""`/queue jobs [runner-type]`: which jobs are queueing, from where, and what changed: the type
asked for, else the channel's open incidents' types, else its worst queues."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.actions.flow import Acting, Actor, Outcome, failed
from bot.backends.http import BackendError
from bot.domain.jobs import JobsView
from bot.domain.routes import Routing
from bot.domain.runner_names import runner_key
from bot.fleet.readings import JobsWatch
from bot.render.jobs import MAX_TYPES, render_jobs
from bot.render.mrkdwn import escape

OPEN_INCIDENTS = 20  # whose runner types count as affected
NO_SOURCE = (
    "the metrics backend cannot list jobs: `JOBS_BACKEND=github` or `hud` (or "
    "`METRICS_BACKEND=github` or `hud`) lists them"
)


@dataclass
class Jobs:
    acting: Acting
    watch: JobsWatch | None
    routing: Routing

    async def jobs(
        self,
        actor: Actor,
        runner_type: str | None = None,
        *,
        channel: str = "",
        limit: int = 2900,
        interaction: str | None = None,
    ) -> Outcome:
        return await self.acting.guarded(
            "jobs", actor, interaction, lambda: self._answer(runner_type, channel, limit)
        )

    async def _answer(self, runner_type: str | None, channel: str, limit: int) -> Outcome:
        now = self.acting.clock()
        view, why = await read_jobs(self.watch, now, unset=f"{NO_SOURCE}.", unread="{exc}")
        if view is None:
            return failed(f"No queued jobs to show: {escape(why)}")
        if runner_type:
            return Outcome(True, render_jobs(view, [view.name_of(runner_type)], limit=limit))
        owned = self.routing.types_of(channel, view.runner_types)
        others = len(view.runner_types) - len(owned) if owned is not None else 0
        types = await self._affected(view, set(view.runner_types if owned is None else owned))
        return Outcome(True, render_jobs(view, types, limit=limit, others=others))

    async def _affected(self, view: JobsView, owned: set[str]) -> list[str]:
        """Of the `owned` types, the open incidents' with jobs in the view, else the worst."""
        store = self.acting.store
        incidents = await store.get_many((await store.open_ids())[:OPEN_INCIDENTS])
        named = {runner_key(name) for i in incidents for name in i.runner_types}
        queues = (q for name, q in view.runner_types.items() if name in owned)
        ranked = sorted(queues, key=lambda q: (-q.queued, q.runner_type))
        affected = [q.runner_type for q in ranked if runner_key(q.runner_type) in named]
        return (affected or [q.runner_type for q in ranked])[:MAX_TYPES]


async def read_jobs(
    watch: JobsWatch | None, now: datetime, *, unset: str, unread: str
) -> tuple[JobsView | None, str]:
    """The jobs `watch` lists now, or why not: `unset` without a jobs source, `unread` (its
    `{exc}` the error) when it could not be read."""
    if watch is None:
        return None, unset
    try:
        return await watch.view(now=now), ""
    except BackendError as exc:
        return None, unread.format(exc=exc)
