"""`/queue report [7d|30d] [runner-type]`: capacity planning, answered ephemerally, and posted
weekly when `REPORT_SCHEDULE` is set."""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass
from datetime import timedelta
from typing import Any

from redis.exceptions import RedisError

from bot.actions.flow import Acting, Actor, Outcome
from bot.backends.http import BackendError, within
from bot.backends.metrics import QueueHistory
from bot.config import Settings
from bot.domain.incident.incidents import Incident
from bot.domain.reading.capacity import TypeHistory, TypeReport, capacity_report, report_channels
from bot.fleet.readings import FleetReadings
from bot.render.capacity import render_report, report_message
from bot.storage.send_queue import NoticeStore

log = logging.getLogger(__name__)

MAX_INCIDENTS = 300  # the most recent ones read: a month of a busy fleet


@dataclass
class Report:
    acting: Acting
    readings: FleetReadings
    _: KW_ONLY
    config: Settings
    notices: NoticeStore | None = None  # where the weekly post is queued
    history: QueueHistory | None = None

    async def report(
        self,
        actor: Actor,
        days: int,
        runner_type: str | None = None,
        *,
        interaction: str | None = None,
    ) -> Outcome:
        async def run() -> Outcome:
            reports, _, said = await self._reports(days, runner_type)
            return Outcome(True, render_report(reports, **said))

        return await self.acting.guarded("report", actor, interaction, run)

    async def post_weekly(self) -> None:
        """The scheduled report, once in each channel with types to report; never raises."""
        if self.notices is None:
            return
        try:
            reports, incidents, said = await self._reports(7, None)
            routing = self.config.routing
            by_channel = report_channels(
                reports, incidents, default=routing.default, routed=routing.channel_of_type
            )
            for channel, of_channel in by_channel.items():
                # One claim per schedule, not per date: the hour's grace may cross midnight UTC.
                if not await self.notices.claim(f"report:weekly:{channel}"):
                    continue
                await self.notices.queue(channel, report_message(of_channel, **said))
        except RedisError as exc:
            log.warning("capacity report: Redis unavailable: %s", exc)
        except Exception:  # a bug must not stop the scheduler's other jobs
            log.exception("capacity report: failed")

    async def _reports(
        self, days: int, runner_type: str | None
    ) -> tuple[list[TypeReport], list[Incident], dict[str, Any]]:
        """The reports, the incidents read (for their channels), and what the rendering says."""
        store, now = self.acting.store, self.acting.clock()
        since, ids = now - timedelta(days=days), await store.recent_ids(MAX_INCIDENTS)
        incidents = await store.get_many(ids)
        timelines = [await store.events(incident.id) for incident in incidents]
        reading = await self.readings.latest()
        live = reading.fleet.runner_types if reading and reading.fleet else {}
        history: dict[str, TypeHistory] = {}
        source, missing = "", ""
        if self.history is not None:
            try:
                call = self.history.history(start=since, end=now)
                kept = await within(call, self.config.backend_timeout_seconds, self.history.name)
                history, source, missing = dict(kept.types), self.history.name, kept.note
            except BackendError as exc:
                log.warning("capacity report: no history: %s", exc)
                missing = f"{self.history.name} could not say: {exc}"
        kills = await self.readings.oom_kills.since(since)
        reports = capacity_report(
            list(zip(incidents, timelines, strict=True)),
            live,
            since=since,
            now=now,
            only=runner_type,
            history=history,
            thresholds=self.config.thresholds,
            kills=kills,
        )
        said = {"days": days, "kept_days": self.config.incident_retention_days}
        said |= {"history": source, "missing": missing}
        # At the bound, an incident of the window that last changed before those read is unread.
        oldest = min((incident.updated_at for incident in incidents), default=now)
        if len(ids) >= MAX_INCIDENTS and oldest > since:
            said["read_back_to"] = oldest
        return reports, incidents, said
