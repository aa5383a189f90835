"""What is behind the queue: diagnostics into the thread, locked per incident for a short cooldown
so a double click posts one report; `/queue jobs [runner-type]`: which jobs are queueing, from
where, and what changed."""

from __future__ import annotations

import asyncio
from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from bot.actions.flow import Acting, Actor, Decided, Outcome, failed, refused
from bot.actions.scale import Scaling
from bot.backends.http import BackendError
from bot.config import Settings
from bot.domain.alerting.routes import Routing
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import Event, Incident, diagnosed, with_action, with_live
from bot.domain.queue_cost.jobs import JobsView, surging
from bot.domain.reading.causes import JOBS_SOURCES
from bot.domain.reading.diagnostics import Cause, Diagnosis, Evidence, diagnose
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.reading.runner_names import runner_key
from bot.fleet.readings import FleetReadings, JobsWatch
from bot.render.diagnostics import render_diagnostics
from bot.render.jobs import MAX_TYPES, render_jobs
from bot.render.mrkdwn import escape, person
from bot.storage.incident_store import BAND_ACTION, Commit, Reply
from bot.storage.leases import Held

COOLDOWN_S = 30.0  # the report just posted answers a second click for this long
OPEN_INCIDENTS = 20  # whose runner types count as affected
NO_SOURCE = (
    "the metrics backend cannot list jobs: `JOBS_BACKEND=github` or `hud` (or "
    "`METRICS_BACKEND=github` or `hud`) lists them"
)


@dataclass
class Diagnosing:
    acting: Acting
    readings: FleetReadings
    _: KW_ONLY
    config: Settings
    scaling: Scaling
    jobs: JobsWatch | None = None

    async def diagnose(self, actor: Actor, ref: str, *, interaction: str | None = None) -> Outcome:
        return await self.acting.guarded(
            "diagnose", actor, interaction, lambda: self._diagnose(actor, ref)
        )

    async def _diagnose(self, actor: Actor, ref: str) -> Outcome:
        resolved = "Incident {id} is already resolved: its summary is in the thread."
        incident = await self.acting.open_incident(ref, resolved)
        if isinstance(incident, Outcome):
            return incident
        name = await self.acting.name(actor)
        ttl_s, doing = self.config.backend_timeout_seconds + 5, f"{name} ran them"
        locks = self.acting.interactions
        lock = await locks.lock(incident.id, "diagnose", doing=doing, ttl_s=ttl_s)
        if isinstance(lock, Held):
            return refused(f"Diagnostics were just run ({lock.what}): see the thread.")
        snapshot, evidence, view = await self._gather(incident)
        await lock.keep(COOLDOWN_S, doing)

        def decide(incident: Incident, now: datetime, _: list[Event]) -> Decided:
            diagnosis = diagnose(snapshot, evidence)
            cause = diagnosis.cause.value if diagnosis.cause else "not determined"
            text = f"Diagnostics: likely cause {cause}"
            event = Event(at=now, kind="diagnosed", text=text, actor=actor.user_id, actor_name=name)
            updated = incident
            if snapshot.is_live and (incident.live is None or snapshot.at >= incident.live.at):
                # The root shows the numbers diagnostics read: one "now" in the thread and above.
                updated = with_live(updated, snapshot, as_snapshot(updated, snapshot, snapshot.at))
            short_of = _short_of(diagnosis, snapshot)
            pods_of = diagnosis.lead_type if diagnosis.cause in PODS_NOT_STARTING else ""
            concluded = diagnosed(updated, diagnosis.headline, short_of=short_of, pods_of=pods_of)
            updated = with_action(concluded, event)
            by = person(actor.user_id, name)
            report = render_diagnostics(updated, diagnosis, snapshot, by=by, jobs=view)
            answer = (
                f"Diagnostics of incident {incident.id} are in its thread: likely cause {cause}."
            )
            reply = Reply("action", BAND_ACTION, report)
            return Commit(updated, events=(event,), replies=(reply,)), Outcome(True, answer)

        return await self.acting.commit(ref, decide)

    async def _gather(self, incident: Incident) -> tuple[FleetSnapshot, Evidence, JobsView | None]:
        """The incident's types from the shared reading, and what the causes read beyond it."""
        (reading, history), now = await self.readings.current(), self.acting.clock()
        snapshot = self.readings.incident_view(incident, reading, history, now)
        types = [t for t in snapshot.runner_types if t]
        unread = "needs the jobs behind the queue, which could not be read ({exc})"
        failures, (view, jobs_note) = await asyncio.gather(
            self.scaling.failures(types),
            read_jobs(self.jobs, now, unset=JOBS_SOURCES, unread=unread),
        )
        if view is not None and view.note:
            jobs_note = f"needs workflows in the jobs ({view.note})"
        surges, slower = {}, {}
        if view is not None:
            named = {t: view.name_of(t) for t in snapshot.runner_types}
            surges = {t: s for t, n in named.items() if (s := surging(view, n)) is not None}
            slower = {t: view.slower[n] for t, n in named.items() if n in view.slower}
        evidence = Evidence(
            history=history,
            boot_mins=self.config.runner_boot_minutes,
            stall_mins=self.config.listener_stall_minutes,
            scaler_failures=failures,
            surges=surges,
            slower=slower,
            jobs_note=jobs_note,
        )
        return snapshot, evidence, view


# Causes a reading whose new pods of the type start disproves.
PODS_NOT_STARTING = (Cause.PODS_UNSCHEDULABLE, Cause.IMAGE_PULL, Cause.CONFIG_ERROR, Cause.CREATING)


def _short_of(diagnosis: Diagnosis, snapshot: FleetSnapshot) -> tuple[str, float] | None:
    """The runner type and maximum a "maximum too low" conclusion is about."""
    lead = diagnosis.lead_type if diagnosis.cause is Cause.AUTOSCALING else ""
    metrics = snapshot.runner_types.get(lead) if lead else None
    return (lead, metrics.maximum) if metrics is not None and metrics.maximum is not None else None


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
    """The jobs `watch` lists now, or why not (`unset`, or `unread` with its `{exc}`)."""
    if watch is None:
        return None, unset
    try:
        return await watch.view(now=now), ""
    except BackendError as exc:
        return None, unread.format(exc=exc)
