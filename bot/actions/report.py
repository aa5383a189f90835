"""`/queue report [7d|30d] [runner-type]`: capacity planning after the alert, answered ephemerally;
and the weekly post of the same report when `REPORT_SCHEDULE` is set.

Read-only: the incidents kept in the window with their timelines, the live reading for each type's
size and job duration (`bot.domain.capacity`), rendered by `bot.render.capacity`. The weekly post
is claimed once per day across replicas (each replica's scheduler fires) and queued for
`SLACK_CHANNEL`'s sender as a notice.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from redis.exceptions import RedisError

from bot.actions.flow import Acting, Actor, Outcome
from bot.domain.capacity import TypeReport, capacity_report
from bot.fleet.readings import FleetReadings
from bot.render.capacity import render_report, report_message
from bot.storage.notices import NoticeStore

log = logging.getLogger(__name__)

MAX_INCIDENTS = 300  # the most recent ones read: a month of a busy fleet


class Report:
    def __init__(
        self,
        acting: Acting,
        readings: FleetReadings,
        *,
        kept_days: int,
        notices: NoticeStore | None = None,
        channel: str = "",
    ) -> None:
        self._acting = acting
        self._readings = readings
        self._kept_days = kept_days
        self._notices = notices  # where the weekly post is queued, for `channel`
        self._channel = channel

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
        reports = await self._reports(days, runner_type)
        return Outcome(True, render_report(reports, days=days, kept_days=self._kept_days))

    async def post_weekly(self) -> None:
        """The scheduled report (`REPORT_SCHEDULE`), posted once across replicas; never raises."""
        if self._notices is None:
            return
        try:
            now = self._acting.clock()
            if not await self._notices.claim(f"report:{now.date().isoformat()}"):
                return
            reports = await self._reports(7, None)
            message = report_message(reports, days=7, kept_days=self._kept_days)
            await self._notices.queue(self._channel, message)
        except RedisError as exc:
            log.warning("capacity report: Redis unavailable: %s", exc)
        except Exception:  # a bug must not stop the scheduler's other jobs
            log.exception("capacity report: failed")

    async def _reports(self, days: int, runner_type: str | None) -> list[TypeReport]:
        store, now = self._acting.store, self._acting.clock()
        incidents = await store.get_many(await store.recent_ids(MAX_INCIDENTS))
        timelines = [await store.events(incident.id) for incident in incidents]
        reading = await self._readings.latest()
        live = reading.fleet.runner_types if reading and reading.fleet else {}
        return capacity_report(
            list(zip(incidents, timelines, strict=True)),
            live,
            since=now - timedelta(days=days),
            now=now,
            only=runner_type,
        )
