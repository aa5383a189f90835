"""The arrival history of queued jobs: how many jobs of each workflow arrived in five-minute
slots, so "this workflow's arrivals doubled since the same hour yesterday" is something the bot
can say.

A job counts once, in the slot it was created in, the first time any replica lists it: a script
adds its id to that slot's set of seen jobs and, only when the id is new, counts it in that slot's
arrivals (field "<runner type>\\t<workflow>"). One script call per slot listed, all in one
pipeline, so a listing costs one round trip and two replicas listing at once count each job once.
"The last hour" is the last twelve slots, the current one included (so it reaches back 55 to 60
minutes), and "a day before" the same twelve slots 24 hours earlier: slots, not clock hours,
because a burst three minutes old must count in full a minute after the hour as well. Both keys
expire 26 hours after their slot ends: the same hour a day before is still there.

Only jobs that were still queued when listed are seen: a job picked up within seconds never
shows, so these are arrivals of jobs that queued, which is what a queue incident is about.

What the counts mean and who asks for them: `bot.fleet.jobs.JobsWatch`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from redis.asyncio import Redis

from bot.domain.jobs import Arrivals, FinishedJob, QueuedJob
from bot.storage.keys import Keys
from bot.storage.scripts import script

SLOT_S = 300
HOUR = 3600 // SLOT_S  # slots in an hour
DAY = 24 * HOUR
KEEP_S = 26 * 3600


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
        self,
        jobs: Iterable[QueuedJob],
        *,
        now: datetime,
        finished: Iterable[FinishedJob] = (),
    ) -> Arrivals:
        """Count the jobs not seen before (and the finished ones' minutes); the arrivals and
        mean minutes in the last hour and in the same hour a day before."""
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
        async with self._redis.pipeline(transaction=False) as pipe:
            for slot, triples in sorted(by_slot.items()):
                expire_at = (slot + 1) * SLOT_S + KEEP_S
                keys = [
                    self._keys.jobs_seen(slot),
                    self._keys.job_arrivals(slot),
                    self._keys.job_durations(slot),
                ]
                await self._record(keys=keys, args=[expire_at, *triples], client=pipe)
            for slot in slots:
                pipe.hgetall(self._keys.job_arrivals(slot))
            for slot in slots:
                pipe.hgetall(self._keys.job_durations(slot))
            answers = await pipe.execute()
        counts = [_counts(raw) for raw in answers[-4 * HOUR : -2 * HOUR]]
        durations = answers[-2 * HOUR :]
        day_before = _summed(counts[HOUR:])
        return Arrivals(
            last_hour=_summed(counts[:HOUR]),
            day_before=day_before,
            history=bool(day_before),
            minutes_last_hour=_mean_minutes(durations[:HOUR]),
            minutes_day_before=_mean_minutes(durations[HOUR:]),
        )


def _counts(raw: object) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    if not isinstance(raw, dict):
        return counts
    for key, value in raw.items():
        runner_type, tab, workflow = str(key).partition("\t")
        try:
            number = int(value)
        except (TypeError, ValueError):
            continue
        if tab:
            counts[(runner_type, workflow)] = number
    return counts


def _mean_minutes(slots: list[object]) -> dict[tuple[str, str], float]:
    """Mean minutes per (runner type, workflow) over the durations hashes of some slots."""
    jobs: dict[tuple[str, str], int] = {}
    minutes: dict[tuple[str, str], float] = {}
    for raw in slots:
        for key, value in (raw if isinstance(raw, dict) else {}).items():
            head, _, tail = str(key).rpartition("\t")
            try:
                if tail == "m" and "\t" in head:
                    runner_type, _, workflow = head.partition("\t")
                    pair = (runner_type, workflow)
                    minutes[pair] = minutes.get(pair, 0.0) + float(value)
                elif head:
                    pair = (head, tail)
                    jobs[pair] = jobs.get(pair, 0) + int(value)
            except (TypeError, ValueError):
                continue
    return {k: minutes.get(k, 0.0) / n for k, n in jobs.items() if n > 0}


def _summed(slots: list[dict[tuple[str, str], int]]) -> dict[tuple[str, str], int]:
    total: dict[tuple[str, str], int] = {}
    for counts in slots:
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return {k: n for k, n in total.items() if n > 0}
