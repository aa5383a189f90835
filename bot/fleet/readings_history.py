"""The capacity report's history where the metrics backend keeps none (`METRICS_BACKEND=github`):
queuepilot's own readings, a slot apart, for a month.

Each successful reading (`FleetReadings`) keeps, per runner type, its queued jobs, longest wait,
level (the runners wanted, else the most of registered and busy), maximum and job minutes in
the reading's slot (`SLOT_S`, or the reading interval when longer): one field of a per-day hash,
set if not set, so replicas reading the same slot keep it once. Series from it have the slot as
their step; a slot no replica read (the bot was down) is not counted, and the history says how
much of the window it covers.

Its quantiles are of the longest wait at each reading, not of every job's queue time (the
readings see the longest wait only): labelled so in the report.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from statistics import fmean, quantiles

from redis.asyncio import Redis

from bot.domain.capacity import FleetHistory, TypeHistory
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.storage.keys import Keys

log = logging.getLogger(__name__)

SLOT_S = 300  # five minutes: a month is 8,928 slots
KEPT_DAYS = 31  # the longest report (30 days) and the day it began in
SAMPLED = "sampled longest wait"  # what its quantiles are of
NAME = "queuepilot"  # "… from queuepilot's history"

# One slot's numbers for a type, in this order (None where the reading had none).
_FIELDS = ("queued", "wait_mins", "level", "maximum", "job_mins")


class ReadingsHistory:
    """`QueueHistory` over the readings queuepilot took itself."""

    name = NAME

    def __init__(self, redis: Redis, keys: Keys, *, interval_s: float) -> None:
        self._redis = redis
        self._keys = keys
        self._slot_s = max(SLOT_S, 60 * math.ceil(interval_s / 60))

    async def keep(self, fleet: FleetSnapshot) -> None:
        """Keep a reading in its slot, unless a reading (this replica's or another's) has."""
        kept = {name: _numbers(m) for name, m in fleet.runner_types.items()}
        kept = {name: numbers for name, numbers in kept.items() if any(numbers)}
        if not kept:
            return
        slot = int(fleet.at.timestamp()) // self._slot_s * self._slot_s
        key = self._keys.readings_day(_day(slot))
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, str(slot), json.dumps(kept, separators=(",", ":")))
            pipe.expire(key, KEPT_DAYS * 86400 + 86400)
            await pipe.execute()

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        first, last = start.timestamp(), end.timestamp()
        days = sorted({_day(int(at)) for at in _every_day(first, last)})
        async with self._redis.pipeline(transaction=False) as pipe:
            for day in days:
                pipe.hgetall(self._keys.readings_day(day))
            answers = await pipe.execute()
        series: dict[str, dict[str, dict[float, float]]] = {}
        read = 0
        for answer in answers:
            for raw_slot, raw in answer.items():
                slot = float(raw_slot)
                if not first <= slot <= last:
                    continue
                try:
                    kept = json.loads(raw)
                    rows = {str(n): list(v) for n, v in kept.items()}
                except (ValueError, TypeError, AttributeError):
                    log.warning("capacity report: an unreadable kept reading at %s", raw_slot)
                    continue
                read += 1
                for name, row in rows.items():
                    by_field = series.setdefault(name, {})
                    for field, value in zip(_FIELDS, row, strict=False):
                        if isinstance(value, int | float) and math.isfinite(value):
                            by_field.setdefault(field, {})[slot] = float(value)
        types = {name: self._type(fields) for name, fields in series.items()}
        return FleetHistory(types, _coverage(read, self._slot_s, first, last))

    def _type(self, fields: Mapping[str, Mapping[float, float]]) -> TypeHistory:
        waits = sorted(fields.get("wait_mins", {}).values())
        p50 = p90 = None
        if len(waits) >= 2:
            cuts = quantiles(waits, n=10, method="inclusive")
            p50, p90 = cuts[4], cuts[8]
        elif waits:
            p50 = p90 = waits[0]
        job_mins = list(fields.get("job_mins", {}).values())
        return TypeHistory(
            step_s=self._slot_s,
            queued=dict(fields.get("queued", {})),
            wait_mins=dict(fields.get("wait_mins", {})),
            level=dict(fields.get("level", {})),
            maximum=dict(fields.get("maximum", {})),
            wait_p50_mins=p50,
            wait_p90_mins=p90,
            job_mins=fmean(job_mins) if job_mins else None,
            quantiles_of=SAMPLED,
        )


def _numbers(m: RunnerTypeMetrics) -> list[float | None]:
    known = [v for v in (m.registered, m.busy) if v is not None]
    level = m.desired if m.desired is not None else (max(known) if known else None)
    row = [m.queued, m.longest_wait_mins, level, m.maximum, m.job_duration_mins]
    return [v if v is not None and math.isfinite(v) else None for v in row]


def _day(slot: int) -> str:
    return datetime.fromtimestamp(slot, UTC).strftime("%Y%m%d")


def _every_day(first: float, last: float) -> Iterator[float]:
    at = first
    while at < last:
        yield at
        at += 86400
    yield last


def _coverage(read: int, slot_s: int, first: float, last: float) -> str:
    """A note when the readings cover less than nine tenths of the window."""
    window = max(last - first, slot_s)
    covered = min(read * slot_s, window)
    if covered >= 0.9 * window:
        return ""
    days = timedelta(seconds=covered) / timedelta(days=1)
    return (
        f"queuepilot's readings cover {days:.1f} of these {window / 86400:.1f} days "
        "(it kept none before it started, or while it was down)"
    )
