"""Run diagnostics: the runbook's checks over what the metrics backend knows, into the thread.

Read-only, yet a double click must not post two reports: the report is locked per incident for
a short cooldown, and the refusal points at the report just posted. A failing live backend
leaves the report on the alert's own numbers, and the report says so.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from bot.actions.flow import UNKNOWN, Acting, Actor, Decide, Decision, Outcome, refused
from bot.actions.scale import Scaling
from bot.backends.errors import BackendError
from bot.config import Settings
from bot.domain.causes import JOBS_SOURCES
from bot.domain.diagnostics import Cause, Diagnosis, Evidence, diagnose
from bot.domain.fleet import FleetSnapshot
from bot.domain.incident_fleet import as_snapshot, incident_fleet
from bot.domain.incidents import Event, Incident, diagnosed, with_action, with_live
from bot.domain.jobs import JobsView, surging
from bot.fleet.jobs import JobsWatch
from bot.fleet.readings import FleetReadings
from bot.render.diagnostics import render_diagnostics
from bot.render.mrkdwn import person
from bot.storage.incident_store import BAND_ACTION, Commit, Reply
from bot.storage.interactions import Held

# The report just posted answers a second click for this long.
COOLDOWN_S = 30.0


class Diagnosing:
    def __init__(
        self,
        acting: Acting,
        readings: FleetReadings,
        *,
        config: Settings,
        jobs: JobsWatch | None = None,
        scaling: Scaling | None = None,
    ) -> None:
        self._acting = acting
        self._readings = readings
        self._config = config
        self._jobs = jobs
        self._scaling = scaling

    @property
    def readings(self) -> FleetReadings:
        return self._readings

    async def diagnose(self, actor: Actor, ref: str, *, interaction: str | None = None) -> Outcome:
        return await self._acting.guarded(
            "diagnose", actor, interaction, lambda: self._diagnose(actor, ref)
        )

    async def _diagnose(self, actor: Actor, ref: str) -> Outcome:
        incident = (await self._acting.load(ref)).incident
        if incident is None:
            return refused(UNKNOWN)
        if not incident.is_open:
            return refused(
                f"Incident {incident.id} is already resolved: its summary is in the thread."
            )
        name = await self._acting.name(actor)
        ttl_s = self._config.backend_timeout_seconds + 5
        lock = await self._acting.interactions.lock(
            incident.id, "diagnose", doing=f"{name} ran them", ttl_s=ttl_s
        )
        if isinstance(lock, Held):
            return refused(f"Diagnostics were just run ({lock.what}): see the thread.")
        snapshot, evidence, view = await self._gather(incident)
        await lock.keep(COOLDOWN_S, f"{name} ran them")
        return await self._acting.commit(ref, _record(actor, name, snapshot, evidence, view))

    async def _gather(self, incident: Incident) -> tuple[FleetSnapshot, Evidence, JobsView | None]:
        """The incident's runner types from the shared fleet reading (refreshed if due), with
        baselines; the alert's numbers, with a note saying why, when the backend failed. And
        what the causes read beyond it: the readings' history and the jobs behind the queue."""
        reading, history = await self._readings.current()
        now = self._acting.clock()
        snapshot = incident_fleet(
            incident,
            reading,
            history,
            backend=self._readings.metrics.name,
            now=now,
            interval=self._readings.interval,
            routing=self._config.routing,
            within_mins=self._config.drain_target_minutes,
        )
        types = [t for t in snapshot.runner_types if t]
        failures, (view, jobs_note) = await asyncio.gather(
            self._failures(types), self._jobs_view(now)
        )
        surges, slower = {}, {}
        if view is not None:
            named = {t: view.name_of(t) for t in snapshot.runner_types}
            surges = {t: s for t, n in named.items() if (s := surging(view, n)) is not None}
            slower = {t: view.slower[n] for t, n in named.items() if n in view.slower}
        evidence = Evidence(
            history=history,
            boot_mins=self._config.runner_boot_minutes,
            stall_mins=self._config.listener_stall_minutes,
            scaler_failures=failures,
            surges=surges,
            slower=slower,
            jobs_note=jobs_note,
        )
        return snapshot, evidence, view

    async def _failures(self, runner_types: list[str]) -> dict[str, list[str] | None]:
        """The autoscaler's own failures, where the scale backend can read them."""
        if self._scaling is None:
            return {}
        return await self._scaling.failures(runner_types)

    async def _jobs_view(self, now: datetime) -> tuple[JobsView | None, str]:
        """The jobs behind the queue, and what the causes say when there are none to read."""
        if self._jobs is None:
            return None, JOBS_SOURCES
        try:
            view = await self._jobs.view(now=now)
        except BackendError as exc:
            return None, f"needs the jobs behind the queue, which could not be read ({exc})"
        return view, (f"needs workflows in the jobs ({view.note})" if view.note else "")


def _record(
    actor: Actor,
    name: str,
    snapshot: FleetSnapshot,
    evidence: Evidence,
    view: JobsView | None,
) -> Decide:
    def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
        diagnosis = diagnose(snapshot, evidence)
        cause = diagnosis.cause.value if diagnosis.cause else "not determined"
        event = Event(
            at=now,
            kind="diagnosed",
            text=f"Diagnostics: likely cause {cause}",
            actor=actor.user_id,
            actor_name=name,
        )
        updated = incident
        if snapshot.is_live and (incident.live is None or snapshot.at >= incident.live.at):
            # The root shows the numbers diagnostics read: one "now" in the thread and above it
            # (after a scale-up, busy 30/30 on both, not 20/20 on the root).
            updated = with_live(updated, snapshot, as_snapshot(updated, snapshot, snapshot.at))
        short_of = _short_of(diagnosis, snapshot)
        updated = with_action(diagnosed(updated, diagnosis.headline, short_of=short_of), event)
        report = render_diagnostics(
            updated, diagnosis, snapshot, by=person(actor.user_id, name), jobs=view
        )
        commit = Commit(updated, events=(event,), replies=(Reply("action", BAND_ACTION, report),))
        answer = f"Diagnostics of incident {incident.id} are in its thread: likely cause {cause}."
        return Decision(Outcome(True, answer), commit)

    return decide


def _short_of(diagnosis: Diagnosis, snapshot: FleetSnapshot) -> tuple[str, float] | None:
    """The runner type and the maximum a conclusion of too low a maximum is about: a reading
    with a higher one disproves it and takes it off the root."""
    if diagnosis.cause is not Cause.AUTOSCALING or not diagnosis.lead_type:
        return None
    metrics = snapshot.runner_types.get(diagnosis.lead_type)
    if metrics is None or metrics.maximum is None:
        return None
    return diagnosis.lead_type, metrics.maximum
