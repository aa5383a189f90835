"""Queued jobs' arrivals per runner type and workflow in five-minute slots, for "this workflow's
arrivals doubled since the same hour yesterday". A job counts once, in the slot it was created in;
"the last hour" is the last twelve slots, "a day before" the same twelve 24 hours earlier."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from redis.asyncio import Redis

from bot.domain.jobs import Arrivals, FinishedJob, QueuedJob
from bot.storage.keys import Keys
from bot.storage.scripts import script

SLOT_S = 300
HOUR = 3600 // SLOT_S
DAY = 24 * HOUR
KEEP_S = 26 * 3600  # past its slot's end: the same hour a day before is still there

Pair = tuple[str, str]  # (runner type, workflow)


def slot_of(moment: datetime) -> int:
    return math.floor(moment.timestamp() / SLOT_S)


def field_of(runner_type: str, workflow: str) -> str:
    # A tab in a name would split the field wrongly when read back: names keep their words.
    return f"{runner_type.replace(chr(9), ' ')}\t{workflow.replace(chr(9), ' ')}"


class JobArrivals:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._record = script(redis, "record_jobs")

    async def record(
        self, jobs: Iterable[QueuedJob], *, now: datetime, finished: Iterable[FinishedJob] = ()
    ) -> Arrivals:
        """Count the jobs not seen before: the arrivals and minutes of the last hour and a day
        before. Only jobs still queued when listed are seen: the ones a queue incident is about."""
        current = slot_of(now)
        by_slot: dict[int, list[str | float]] = {}

        def add(moment: datetime, *triple: str | float) -> None:
            slot = slot_of(moment)
            # "Created" in the future (a clock off) or too long ago to compare: not kept.
            if current - KEEP_S // SLOT_S < slot <= current:
                by_slot.setdefault(slot, []).extend(triple)

        for job in jobs:
            add(job.created_at, job.source_id, field_of(job.runner_type, job.workflow), "")
        for done in finished:
            key = field_of(done.runner_type, done.workflow)
            add(done.finished_at, f"done:{done.source_id}", key, round(done.minutes, 3))
        last_hour = range(current - HOUR + 1, current + 1)
        slots = (*last_hour, *(s - DAY for s in last_hour))
        k = self._keys
        async with self._redis.pipeline(transaction=False) as pipe:
            for slot, triples in sorted(by_slot.items()):
                keys = [k.jobs_seen(slot), k.job_arrivals(slot), k.job_durations(slot)]
                expire_at = (slot + 1) * SLOT_S + KEEP_S
                await self._record(keys=keys, args=[expire_at, *triples], client=pipe)
            for slot in slots:
                pipe.hgetall(k.job_arrivals(slot))
            for slot in slots:
                pipe.hgetall(k.job_durations(slot))
            answers = await pipe.execute()
        arrivals, durations = answers[-4 * HOUR : -2 * HOUR], answers[-2 * HOUR :]
        day_before = _summed(arrivals[HOUR:])
        return Arrivals(
            last_hour=_summed(arrivals[:HOUR]),
            day_before=day_before,
            history=bool(day_before),
            minutes_last_hour=_mean_minutes(durations[:HOUR]),
            minutes_day_before=_mean_minutes(durations[HOUR:]),
        )


def _counted(hashes: list[dict[str, str]]) -> tuple[Counter[Pair], Counter[Pair]]:
    """The jobs and their minutes per pair. A minutes field has three parts (a workflow may be
    named `m`); a field that does not read is left out, not the whole answer."""
    jobs: Counter[Pair] = Counter()
    minutes: Counter[Pair] = Counter()
    for raw in hashes:
        for field, value in raw.items():
            parts = field.split("\t")
            try:
                if len(parts) == 3 and parts[2] == "m":
                    minutes[(parts[0], parts[1])] += float(value)
                elif len(parts) == 2:
                    jobs[(parts[0], parts[1])] += int(value)
            except ValueError:
                continue
    return jobs, minutes


def _summed(hashes: list[dict[str, str]]) -> dict[Pair, int]:
    return {pair: n for pair, n in _counted(hashes)[0].items() if n > 0}


def _mean_minutes(hashes: list[dict[str, str]]) -> dict[Pair, float]:
    jobs, minutes = _counted(hashes)
    return {pair: minutes[pair] / n for pair, n in jobs.items() if n > 0}
