"""Periodic status: every open incident gets a status reply each interval until it resolves.

APScheduler's job stores must not be shared between processes, so each replica runs its own
in-memory scheduler with a short tick, and the due times live in a Redis sorted set. A tick takes
an incident's group lease without waiting and re-reads the due time under it, so however many
replicas tick at once, each status is posted once; a restart loses nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from redis.exceptions import RedisError

from bot.backends.errors import BackendError
from bot.backends.metrics import QueueMetrics
from bot.incidents import Incident, record_status
from bot.leases import LeaseBusy, Leases
from bot.messages import render_status
from bot.slack import SlackError
from bot.store import Commit, IncidentStore
from bot.telemetry import Telemetry
from bot.threads import Threads

log = logging.getLogger(__name__)


class StatusReporter:
    def __init__(
        self,
        store: IncidentStore,
        leases: Leases,
        threads: Threads,
        metrics: QueueMetrics,
        telemetry: Telemetry,
        *,
        interval_s: int,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._leases = leases
        self._threads = threads
        self._metrics = metrics
        self._telemetry = telemetry
        self._interval_s = interval_s
        self._clock = clock

    async def tick(self) -> None:
        """Post every status that is due and repair lagging threads; never raises."""
        try:
            due = await self._store.due_status(self._clock().timestamp())
            unsynced = await self._store.unsynced_ids()
        except RedisError as exc:
            log.warning("status: Redis unavailable: %s", exc)
            return
        for incident_id in due:
            await self._attempt(self._report, incident_id)
        for incident_id in unsynced:
            await self._attempt(self._repair, incident_id)

    async def _attempt(self, work: Callable[[str], Awaitable[None]], incident_id: str) -> None:
        try:
            await work(incident_id)
        except LeaseBusy:
            pass  # another replica or an intake holds this group; the next tick retries
        except (SlackError, BackendError, RedisError) as exc:
            log.warning("status: incident %s: %s; retrying next tick", incident_id, exc)
        except Exception:
            # One unreadable incident must not stop every other status post: push it back.
            log.exception("status: incident %s failed; postponed", incident_id)
            with suppress(RedisError):
                later = self._clock().timestamp() + self._interval_s
                await self._store.schedule_status(incident_id, later)
                await self._store.mark_synced(incident_id)

    async def _repair(self, incident_id: str) -> None:
        incident = await self._store.get(incident_id)
        if incident is None:
            await self._store.mark_synced(incident_id)
            return
        async with self._leases.hold(f"group:{incident.group_hash}", wait_s=0):
            current = await self._store.get(incident_id)
            if current is not None:
                await self._threads.sync(current)

    async def _report(self, incident_id: str) -> None:
        incident = await self._store.get(incident_id)
        if incident is None or not incident.is_open:
            await self._store.unschedule_status(incident_id)
            return
        async with self._leases.hold(f"group:{incident.group_hash}", wait_s=0):
            due = await self._store.status_due_at(incident_id)
            now = self._clock()
            if due is None or due > now.timestamp():
                return  # another replica posted it while we were getting here
            incident = await self._store.get(incident_id)
            if incident is None or not incident.is_open:
                return
            await self._post(incident, now)

    async def _post(self, incident: Incident, now: datetime) -> None:
        due = now.timestamp() + self._interval_s
        if await self._store.thread(incident.id) is None:
            # No thread to reply in yet (Slack refused the root): keep trying, don't hoard.
            await self._store.schedule_status(incident.id, due)
            await self._threads.sync(incident)
            return
        current = await self._metrics.snapshot(incident, now=now)
        rendered = render_status(incident, previous=incident.last_status, current=current, now=now)
        updated = record_status(incident, current)
        await self._store.commit(Commit(updated, replies=(rendered,), status_due=due))
        await self._threads.sync(updated)
        self._telemetry.status_posts.inc()


def start_scheduler(reporter: StatusReporter, *, tick_s: float) -> AsyncIOScheduler:
    """One in-memory scheduler per replica; `max_instances=1` keeps ticks from overlapping."""
    scheduler = AsyncIOScheduler()
    scheduler.add_job(
        reporter.tick,
        "interval",
        seconds=tick_s,
        id="status-tick",
        max_instances=1,
        coalesce=True,
        misfire_grace_time=None,
    )
    scheduler.start()
    return scheduler
