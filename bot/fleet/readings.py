"""One reading of the fleet's queues per interval (or the backend's pace), shared by every
incident and surface from Redis. Only the leader refreshes it, so a paced quota has one reader. A
failed refresh is stored too, so every incident can say why; a good one is judged here, once."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.backends.http import BackendError, within
from bot.backends.metrics import QueuedJobs, QueueMetrics
from bot.config import Settings
from bot.domain.incident.incident_fleet import incident_fleet
from bot.domain.incident.incidents import Incident
from bot.domain.queue_cost.jobs import JobsView, jobs_view
from bot.domain.reading.fleet import (
    OOM_NAMING,
    WORKFLOW_CHARS,
    FleetSnapshot,
    HistoryPoint,
    Reading,
    kills_of,
    troubled_gauges,
    with_job_waits,
    with_workflows,
)
from bot.domain.reading.judgement import RECENT_READINGS
from bot.domain.reading.judging import judged
from bot.fleet.readings_history import ReadingsHistory
from bot.storage.fleet import JobArrivals, OomKillRecord, ReadingStore
from bot.storage.keys import Keys
from bot.storage.listed_jobs import ListedJobs

log = logging.getLogger(__name__)

# Six hours at the default one-minute interval: "the hours before the incident".
HISTORY_POINTS = 360


@dataclass(eq=False)
class JobsWatch:
    """The jobs behind the queue, arrivals counted: what `/queue jobs` and diagnostics show."""

    source: QueuedJobs
    arrivals: JobArrivals
    _: KW_ONLY
    timeout_s: float
    # A source that lists the jobs still queued but never when one started (the HUD): each
    # listing is followed, so a job that left it is known to have got a runner, for the cost.
    followed: ListedJobs | None = None

    async def view(self, *, now: datetime) -> JobsView:
        """Raises `BackendError` when the source cannot say."""
        name = self.source.name
        listing = await within(self.source.queued_jobs(now=now), self.timeout_s, name)
        arrivals = listing.arrivals  # a source that counts its own (ARC's counters)
        if arrivals is None:
            arrivals = await self.arrivals.record(listing.jobs, now=now, finished=listing.finished)
        if self.followed is not None and await self.followed.follow(listing, now=now) is None:
            log.info("jobs: a listing older than the last one followed is not followed")
        return jobs_view(listing, arrivals, source=name, at=now)


class FleetReadings:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        metrics: QueueMetrics,
        *,
        config: Settings,
        clock: Callable[[], datetime],
        jobs: JobsWatch | None = None,
        kept: ReadingsHistory | None = None,
        leads: Callable[[], bool] = lambda: True,
        caps: Mapping[str, int] | None = None,
    ) -> None:
        self._store = ReadingStore(redis, keys)
        self.oom_kills = OomKillRecord(redis, keys)  # the weekly report reads them
        self.metrics = metrics
        self.interval = timedelta(seconds=config.metrics_interval_seconds)
        self._config = config
        self._clock = clock
        self._jobs = jobs
        self._kept = kept
        self._refreshing = asyncio.Lock()
        self._leads = leads
        self._caps = caps or {}  # the most one scale request may add, by runner type

    async def aclose(self) -> None:
        await self.metrics.aclose()
        if self._jobs is not None and self._jobs.source is not self.metrics:
            await self._jobs.source.aclose()  # a backend that lists its own jobs is closed once

    @property
    def keeps_history(self) -> bool:
        return self._kept is not None

    async def stored(self) -> Reading | None:
        raw = await self._store.latest()
        if not raw:
            return None
        try:
            return Reading.decode(raw)
        except (ValueError, KeyError, ValidationError):
            log.warning("fleet: an unreadable stored reading; reading again")
            return None

    async def tick(self) -> None:
        """A scheduled read where nothing else reads on a schedule; never raises."""
        try:
            await self.latest()
        except RedisError as exc:
            log.warning("fleet: Redis unavailable: %s", exc)

    async def latest(self) -> Reading | None:
        """Refreshed first when due; None with the `alert` backend or before a first read."""
        if not self.metrics.live:
            return None
        stored = await self.stored()
        now = self._clock()
        if stored is not None and now - stored.tried_at < self.every(stored.fleet):
            return stored
        if self._refreshing.locked() or not self._leads():
            return stored  # being read right now, or the leader's to read
        async with self._refreshing:
            return await self._refresh(stored, now)

    def incident_view(
        self,
        incident: Incident,
        reading: Reading | None,
        history: Sequence[HistoryPoint],
        now: datetime,
    ) -> FleetSnapshot:
        """The runner types `incident` shows of `reading`, as every surface sees them."""
        return incident_fleet(
            incident,
            reading,
            history,
            backend=self.metrics.name,
            now=now,
            interval=self.every(reading.fleet if reading else None),
            routing=self._config.routing,
            within_mins=self._config.drain_target_minutes,
        )

    def every(self, fleet: FleetSnapshot | None) -> timedelta:
        """How long a reading of `fleet` stands: the interval, or its source's longer pace."""
        paced = fleet.paced_s if fleet is not None else None
        return max(self.interval, timedelta(seconds=paced or 0))

    async def current(self) -> tuple[Reading | None, list[HistoryPoint]]:
        reading = await self.latest()
        has_fleet = reading is not None and reading.fleet is not None
        return reading, (await self.history() if has_fleet else [])

    async def _refresh(self, stored: Reading | None, now: datetime) -> Reading:
        name = self.metrics.name
        try:
            fleet = await within(
                self.metrics.read(now=now), self._config.backend_timeout_seconds, name
            )
        except Exception as exc:
            error = str(exc)
            if not isinstance(exc, BackendError):  # a bug must not stop the tick: logged in full
                log.exception("fleet: %s failed unexpectedly", name)
                error = f"{name} failed ({type(exc).__name__})"
            reading = Reading(stored.fleet if stored else None, now, error)
        else:
            jobs = await self._observe_jobs(now)
            # The oldest job's age, not a start's time, unless the backend listed them itself;
            # at every reading, the listing's failed ones too: one measure per type.
            if self._jobs is not None and self._jobs.source is not self.metrics:
                fleet = with_job_waits(fleet, jobs, self._jobs.source.name)
            fleet = await self._named_kills(fleet, jobs, now)
            window = timedelta(seconds=self._config.advice_window)
            rise = timedelta(seconds=self._config.advice_rise_window)
            every = self.every(fleet)
            held = math.ceil(max(window, rise) / every) + 1 if every else 0
            recent = await self.history(last=max(RECENT_READINGS, held))
            fleet = judged(
                fleet,
                recent,
                interval=every,
                within_mins=self._config.drain_target_minutes,
                window=window,
                rise=rise,
                caps=self._caps,
            )
            reading = Reading(fleet, now)
            await self._remember(fleet)
            if self._kept is not None:
                await self._kept.keep(fleet)
        if reading.error:
            log.warning("fleet: %s", reading.error)
        keep_s = max(self.every(reading.fleet).total_seconds() * 10, 600)
        await self._store.save(reading.encode(), keep_ms=int(keep_s * 1000))
        return reading

    async def _observe_jobs(self, now: datetime) -> JobsView | None:
        """Listed every reading so their arrival history has every hour; None without a source
        or when it failed (the reading stands)."""
        if self._jobs is None:
            return None
        try:
            return await self._jobs.view(now=now)
        except BackendError as exc:
            log.warning("fleet: the jobs behind the queue: %s", exc)
        except Exception:  # a bug must not stop the tick; it is logged in full
            log.exception("fleet: listing the jobs failed unexpectedly")
        return None

    async def _named_kills(
        self, fleet: FleetSnapshot, jobs: JobsView | None, now: datetime
    ) -> FleetSnapshot:
        """`fleet` with its OOM kills named by the jobs that ran on their pods, and recorded."""
        kills = kills_of(fleet)
        if not kills:
            return fleet
        if jobs is not None:
            kills = [replace(k, workflow=jobs.workflow_on(k.pod)[:WORKFLOW_CHARS]) for k in kills]
        named = {(k.pod, k.uid): k.workflow for k in kills}
        try:
            named = await self.oom_kills.record(kills, now=now)
        except RedisError as exc:  # the kills are still named from this reading's jobs
            log.warning("fleet: the OOM kills not recorded: %s", exc)
        # Said only where no jobs source could name them, not when one failed this reading.
        unnamed = self._jobs is None or (jobs is not None and jobs.runners is None)
        return with_workflows(fleet, named, OOM_NAMING if unnamed else "")

    async def _remember(self, fleet: FleetSnapshot) -> None:
        types = fleet.runner_types.items()
        point = {
            "at": fleet.at.timestamp(),
            "a": {n: m.arrival_per_min for n, m in types if m.arrival_per_min is not None},
            "d": {n: m.job_duration_mins for n, m in types if m.job_duration_mins is not None},
            "g": troubled_gauges(fleet.runner_types),
        }
        if not (point["a"] or point["d"] or point["g"]):
            return
        await self._store.remember(
            json.dumps(point, separators=(",", ":")),
            points=HISTORY_POINTS,
            keep_ms=int(self.interval.total_seconds() * 1000 * HISTORY_POINTS * 2),
        )

    async def history(self, last: int = 0) -> list[HistoryPoint]:
        points = []
        for raw in await self._store.history(last):
            try:
                data = json.loads(raw)
                at = datetime.fromtimestamp(float(data["at"]), UTC)
                gauges = {str(n): _floats(g) for n, g in data.get("g", {}).items()}
                points.append(
                    HistoryPoint(at, _floats(data.get("a", {})), _floats(data.get("d", {})), gauges)
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
        return points


def _floats(numbers: dict[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in numbers.items()}
