"""`/queue report [7d|30d] [runner-type]`: capacity planning after the alert, answered ephemerally.

Read-only: the incidents kept in the window with their timelines, the live reading for each type's
size and job duration (`bot.domain.capacity`), rendered by `bot.render.capacity`.
"""

from __future__ import annotations

from datetime import timedelta

from bot.actions.flow import Acting, Actor, Outcome
from bot.domain.capacity import capacity_report
from bot.fleet.readings import FleetReadings
from bot.render.capacity import render_report

MAX_INCIDENTS = 300  # the most recent ones read: a month of a busy fleet


class Report:
    def __init__(self, acting: Acting, readings: FleetReadings, *, kept_days: int) -> None:
        self._acting = acting
        self._readings = readings
        self._kept_days = kept_days

    async def report(
        self,
        actor: Actor,
        days: int,
        runner_type: str | None = None,
        *,
        interaction: str | None = None,
    ) -> Outcome:
        return await self._acting.guarded(
            "report", actor, interaction, lambda: self._answer(days, runner_type)
        )

    async def _answer(self, days: int, runner_type: str | None) -> Outcome:
        store, now = self._acting.store, self._acting.clock()
        incidents = await store.get_many(await store.recent_ids(MAX_INCIDENTS))
        timelines = [await store.events(incident.id) for incident in incidents]
        reading = await self._readings.latest()
        live = reading.fleet.runner_types if reading and reading.fleet else {}
        reports = capacity_report(
            list(zip(incidents, timelines, strict=True)),
            live,
            since=now - timedelta(days=days),
            now=now,
            only=runner_type,
        )
        return Outcome(True, render_report(reports, days=days, kept_days=self._kept_days))
