"""Periodic status: every open incident gets a status reply each interval until it resolves.

APScheduler's job stores must not be shared between processes, so each replica runs its own
in-memory scheduler with a short tick, and the due times live in a Redis sorted set. A tick
computes the status of a due incident and commits it fenced by the incident's version with the
next due time: however many replicas tick at once, one commit wins and the others see the
incident moved on. Posting is the channel sender's job; a status still waiting for its slot
when the next one is due is replaced by it, never piled up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from redis.exceptions import RedisError

from bot.backends.errors import BackendError
from bot.backends.metrics import QueueMetrics
from bot.incidents import record_status
from bot.messages import render_status
from bot.silence_watch import SilenceWatch
from bot.store import BAND_STATUS, Commit, IncidentStore, Reply
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

METRICS_TIMEOUT_S = 10.0


class StatusReporter:
    def __init__(
        self,
        store: IncidentStore,
        metrics: QueueMetrics,
        telemetry: Telemetry,
        *,
        interval_s: int,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._telemetry = telemetry
        self._interval_s = interval_s
        self._clock = clock

    async def tick(self) -> None:
        """Commit every status that is due; never raises."""
        try:
            due = await self._store.due_status(self._clock().timestamp())
        except RedisError as exc:
            log.warning("status: Redis unavailable: %s", exc)
            return
        for incident_id in due:
            try:
                await self.report(incident_id)
            except (BackendError, RedisError, TimeoutError) as exc:
                log.warning("status: incident %s: %s; retrying next tick", incident_id, exc)
            except Exception:
                # One unreadable incident must not stop every other status post: push it back.
                log.exception("status: incident %s failed; postponed", incident_id)
                with suppress(RedisError):
                    later = self._clock().timestamp() + self._interval_s
                    await self._store.postpone_status(incident_id, later)

    async def report(self, incident_id: str) -> bool:
        """Commit one status if it is still due; whether this call committed it."""
        for _ in range(3):
            loaded = await self._store.load(incident_id)
            incident = loaded.incident
            now = self._clock()
            if incident is None or not incident.is_open:
                await self._store.unschedule_status(incident_id)
                return False
            if not await self._still_due(incident_id, now.timestamp()):
                return False  # another replica committed it while we were getting here
            current = await asyncio.wait_for(
                self._metrics.snapshot(incident, now=now), METRICS_TIMEOUT_S
            )
            rendered = render_status(
                incident, previous=incident.last_status, current=current, now=now
            )
            commit = Commit(
                record_status(incident, current),
                version=loaded.version,
                replies=(Reply("status", BAND_STATUS, rendered, replaces=True),),
                root=False,
                status_due=now.timestamp() + self._interval_s,
                thread=loaded.thread,
            )
            if await self._store.commit(commit, now=now.timestamp()):
                self._telemetry.status_posts.inc()
                return True
        return False

    async def _still_due(self, incident_id: str, now: float) -> bool:
        due = await self._store.status_due_at(incident_id)
        return due is not None and due <= now


def start_scheduler(
    reporter: StatusReporter, *, tick_s: float, watch: SilenceWatch | None = None
) -> AsyncIOScheduler:
    """One in-memory scheduler per replica; `max_instances=1` keeps ticks from overlapping.

    The silence watch ticks beside the status: each looks only at what is due in Redis.
    """
    scheduler = AsyncIOScheduler()
    jobs: list[tuple[str, Callable[[], Awaitable[None]]]] = [("status-tick", reporter.tick)]
    if watch is not None:
        jobs.append(("silence-watch", watch.tick))
    for job_id, job in jobs:
        scheduler.add_job(
            job,
            "interval",
            seconds=tick_s,
            id=job_id,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
    scheduler.start()
    return scheduler
