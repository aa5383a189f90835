"""The capacity report's history where the metrics backend keeps none (`METRICS_BACKEND=github`):
queuepilot's own readings, one per slot, a month, in per-day hashes. A type a complete reading
lacks had none queued. Its quantiles are of the longest wait at each reading, not of every job's
queue time: labelled so in the report."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from statistics import fmean, quantiles
from typing import Any

from redis.asyncio import Redis

from bot.domain.reading.capacity import FleetHistory, TypeHistory
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.storage.fleet import ReadingStore
from bot.storage.keys import Keys

log = logging.getLogger(__name__)

SLOT_S = 300  # five minutes: a month is 8,928 slots
KEPT_DAYS = 31  # the longest report (30 days) and the day it began in

# One slot's numbers for a type, in this order; level: the runners wanted, else running.
_FIELDS = ("queued", "wait_mins", "level", "maximum", "job_mins")


class ReadingsHistory:
    name = "queuepilot"  # "… from queuepilot's history"

    def __init__(self, redis: Redis, keys: Keys, *, interval_s: float) -> None:
        self._store = ReadingStore(redis, keys)
        self._slot_s = max(SLOT_S, 60 * math.ceil(interval_s / 60))

    async def keep(self, fleet: FleetSnapshot) -> None:
        types = {name: _numbers(m) for name, m in fleet.runner_types.items()}
        kept = {"t": types, "e": fleet.absent_means_empty}
        slot = int(fleet.at.timestamp()) // self._slot_s * self._slot_s
        encoded = json.dumps(kept, separators=(",", ":"))
        await self._store.keep(_day(slot), str(slot), encoded, keep_s=KEPT_DAYS * 86400 + 86400)

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        first, last = start.timestamp(), end.timestamp()
        days = {_day(at) for at in (*range(int(first), int(last), 86400), int(last))}
        answers = await self._store.kept(sorted(days))
        # A month of fifty types is about a second of parsing: off the event loop.
        return await asyncio.to_thread(self._built, answers, first, last)

    def _built(self, answers: list[Mapping[str, str]], first: float, last: float) -> FleetHistory:
        slots = [slot for answer in answers for slot in _slots(answer, first, last)]
        series: dict[str, dict[str, dict[float, float]]] = {}
        for at, rows, _ in slots:
            for name, row in rows.items():
                by_field = series.setdefault(name, {})
                for field, value in zip(_FIELDS, row, strict=False):
                    if isinstance(value, int | float) and math.isfinite(value):
                        by_field.setdefault(field, {})[at] = float(value)
        # A type a complete reading did not list had nothing queued then.
        for at, rows, complete in slots:
            if not complete:
                continue
            for name in series.keys() - rows.keys():
                series[name].setdefault("queued", {})[at] = 0.0
                series[name].setdefault("wait_mins", {})[at] = 0.0
        types = {name: self._type(fields) for name, fields in series.items()}
        return FleetHistory(types, _coverage(len(slots), self._slot_s, first, last))

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
            quantiles_of="sampled longest wait",
        )


def _numbers(m: RunnerTypeMetrics) -> list[float | None]:
    running = max((v for v in (m.registered, m.busy) if v is not None), default=None)
    level = m.desired if m.desired is not None else running
    # Nothing queued is no wait (GitHub has no oldest job to date one from).
    wait = 0.0 if m.longest_wait_mins is None and m.queued == 0 else m.longest_wait_mins
    return [m.queued, wait, level, m.maximum, m.job_duration_mins]  # read back only if finite


Slot = tuple[float, dict[str, list[Any]], bool]  # when, each type's numbers, complete or not


def _slots(answer: Mapping[str, str], first: float, last: float) -> Iterator[Slot]:
    for raw_slot, raw in answer.items():
        try:
            at = float(raw_slot)
            kept = json.loads(raw)
            rows = {str(n): list(v) for n, v in kept["t"].items()}
            complete = kept.get("e") is True
        except (ValueError, TypeError, AttributeError, KeyError):
            log.warning("capacity report: an unreadable kept reading at %s", raw_slot)
            continue
        if first <= at <= last:
            yield at, rows, complete


def _day(slot: int) -> str:
    return datetime.fromtimestamp(slot, UTC).strftime("%Y%m%d")


def _coverage(read: int, slot_s: int, first: float, last: float) -> str:
    window = max(last - first, slot_s)
    covered = min(read * slot_s, window)
    if covered >= 0.9 * window:
        return ""
    days = timedelta(seconds=covered) / timedelta(days=1)
    return (
        f"queuepilot's readings cover {days:.1f} of these {window / 86400:.1f} days "
        "(it kept none before it started, or while it was down)"
    )
