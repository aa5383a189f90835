"""`/queue report [7d|30d] [runner-type]`: capacity planning after the alert, answered ephemerally;
and the weekly post of the same report when `REPORT_SCHEDULE` is set.

Read-only: the incidents kept in the window with their timelines, the live reading for each type's
size and job duration, and the history of the window (`QueueHistory`: Prometheus's range queries,
the HUD's, else the readings queuepilot kept itself), combined by `bot.domain.capacity` and
rendered by `bot.render.capacity`. A history that cannot be read leaves its numbers out and says
why; the report still answers. The weekly post is claimed once per schedule and channel (a new
leader's scheduler fires again within the hour's grace, and a 0.25 replica's during a rollout)
and queued for that channel's sender as a notice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from redis.exceptions import RedisError

from bot.actions.flow import Acting, Actor, Outcome
from bot.backends.errors import BackendError, within
from bot.backends.metrics import QueueHistory
from bot.config import Settings
from bot.domain.capacity import TypeHistory, TypeReport, capacity_report, report_channels
from bot.domain.incidents import Incident
from bot.domain.routes import channel_for_type
from bot.fleet.readings import FleetReadings
from bot.render.capacity import render_report, report_message
from bot.storage.send_queue import NoticeStore

log = logging.getLogger(__name__)

MAX_INCIDENTS = 300  # the most recent ones read: a month of a busy fleet


@dataclass(frozen=True)
class Found:
    """A report's numbers, and where its history came from (or why there is none)."""

    reports: list[TypeReport]
    history: str  # whose history ("Prometheus", "queuepilot"), or "" when none was read
    missing: str = ""  # why the history is not in it
    incidents: list[Incident] = field(default_factory=list)  # those read, for their channels


class Report:
    def __init__(
        self,
        acting: Acting,
        readings: FleetReadings,
        *,
        config: Settings,
        notices: NoticeStore | None = None,
        history: QueueHistory | None = None,
    ) -> None:
        self._acting = acting
        self._readings = readings
        self._config = config
        self._notices = notices  # where the weekly post is queued, for SLACK_CHANNEL
        self._history = history

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
        found = await self._reports(days, runner_type)
        text = render_report(
            found.reports,
            days=days,
            kept_days=self._config.incident_retention_days,
            history=found.history,
            missing=found.missing,
        )
        return Outcome(True, text)

    async def post_weekly(self) -> None:
        """The scheduled report (`REPORT_SCHEDULE`), posted once in each channel that has types
        to report (`SLACK_CHANNEL` always); never raises."""
        if self._notices is None:
            return
        try:
            found = await self._reports(7, None)
            by_channel = report_channels(
                found.reports,
                found.incidents,
                default=self._config.slack_channel,
                routed=lambda name: channel_for_type(
                    self._config.slack_routes, name, self._config.slack_channel
                ),
            )
            for channel, reports in by_channel.items():
                # One claim per schedule, not per date: a leader that took over (or a 0.25
                # replica, during a rollout) fires within the hour's grace, which may cross
                # midnight UTC (`fri 16:30` in Los Angeles), and a claim outlives that hour but
                # not the week (`NOTICE_CLAIM_S`, 3 days).
                if not await self._notices.claim(f"report:weekly:{channel}"):
                    continue
                message = report_message(
                    reports,
                    days=7,
                    kept_days=self._config.incident_retention_days,
                    history=found.history,
                    missing=found.missing,
                )
                await self._notices.queue(channel, message)
        except RedisError as exc:
            log.warning("capacity report: Redis unavailable: %s", exc)
        except Exception:  # a bug must not stop the scheduler's other jobs
            log.exception("capacity report: failed")

    async def _reports(self, days: int, runner_type: str | None) -> Found:
        store, now = self._acting.store, self._acting.clock()
        since = now - timedelta(days=days)
        incidents = await store.get_many(await store.recent_ids(MAX_INCIDENTS))
        timelines = [await store.events(incident.id) for incident in incidents]
        reading = await self._readings.latest()
        live = reading.fleet.runner_types if reading and reading.fleet else {}
        history: dict[str, TypeHistory] = {}
        source, missing = "", ""
        if self._history is not None:
            try:
                call = self._history.history(start=since, end=now)
                kept = await within(call, self._config.backend_timeout_seconds, self._history.name)
                history, source, missing = dict(kept.types), self._history.name, kept.note
            except BackendError as exc:
                log.warning("capacity report: no history: %s", exc)
                missing = f"{self._history.name} could not say: {exc}"
        reports = capacity_report(
            list(zip(incidents, timelines, strict=True)),
            live,
            since=since,
            now=now,
            only=runner_type,
            history=history,
            thresholds=self._config.thresholds,
        )
        return Found(reports, source, missing, incidents)
