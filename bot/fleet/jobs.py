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

`JobsWatch` is the one way to the jobs: it lists them from the source that can (`QueuedJobs`),
counts the arrivals, and builds the view `/queue jobs` and diagnostics show. The fleet reading
calls it on every refresh too, so the history has a count for every hour, not only for the hours
somebody asked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from redis.asyncio import Redis

from bot.backends.errors import within
from bot.backends.metrics import QueuedJobs
from bot.domain.jobs import Arrivals, JobsView, QueuedJob, jobs_view
from bot.storage.keys import Keys

SLOT_S = 300
HOUR = 3600 // SLOT_S  # slots in an hour
DAY = 24 * HOUR
KEEP_S = 26 * 3600

# KEYS: the hour's seen set, its arrivals hash. ARGV: expire-at (epoch s), then id/field pairs.
_RECORD = """
for i = 2, #ARGV, 2 do
  if redis.call('SADD', KEYS[1], ARGV[i]) == 1 then
    redis.call('HINCRBY', KEYS[2], ARGV[i + 1], 1)
  end
end
redis.call('EXPIREAT', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('EXPIREAT', KEYS[2], ARGV[1])
end
return 0
"""


def slot_of(moment: datetime) -> int:
    return math.floor(moment.timestamp() / SLOT_S)


def field_of(runner_type: str, workflow: str) -> str:
    # A tab in a name would split the field wrongly when read back: names keep their words.
    return f"{runner_type.replace(chr(9), ' ')}\t{workflow.replace(chr(9), ' ')}"


class JobArrivals:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._record = redis.register_script(_RECORD)

    async def record(self, jobs: Iterable[QueuedJob], *, now: datetime) -> Arrivals:
        """Count the jobs not seen before; the arrivals in the last hour and the same hour a
        day before."""
        current = slot_of(now)
        by_slot: dict[int, list[str]] = {}
        for job in jobs:
            slot = slot_of(job.created_at)
            # A job "created" in the future (a clock off) or too long ago to compare is not kept.
            if current - KEEP_S // SLOT_S < slot <= current:
                by_slot.setdefault(slot, []).extend(
                    [job.source_id, field_of(job.runner_type, job.workflow)]
                )
        last_hour = range(current - HOUR + 1, current + 1)
        async with self._redis.pipeline(transaction=False) as pipe:
            for slot, pairs in sorted(by_slot.items()):
                expire_at = (slot + 1) * SLOT_S + KEEP_S
                keys = [self._keys.jobs_seen(slot), self._keys.job_arrivals(slot)]
                await self._record(keys=keys, args=[expire_at, *pairs], client=pipe)
            for slot in (*last_hour, *(s - DAY for s in last_hour)):
                pipe.hgetall(self._keys.job_arrivals(slot))
            answers = await pipe.execute()
        counts = [_counts(raw) for raw in answers[-2 * HOUR :]]
        day_before = _summed(counts[HOUR:])
        return Arrivals(
            last_hour=_summed(counts[:HOUR]), day_before=day_before, history=bool(day_before)
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


def _summed(slots: list[dict[tuple[str, str], int]]) -> dict[tuple[str, str], int]:
    total: dict[tuple[str, str], int] = {}
    for counts in slots:
        for key, n in counts.items():
            total[key] = total.get(key, 0) + n
    return {k: n for k, n in total.items() if n > 0}


class JobsWatch:
    """The jobs behind the queue from `source`, with their arrivals counted."""

    def __init__(self, source: QueuedJobs, arrivals: JobArrivals, *, timeout_s: float) -> None:
        self._source = source
        self._arrivals = arrivals
        self._timeout_s = timeout_s

    @property
    def name(self) -> str:
        return self._source.name

    async def aclose(self, *, unless: object = None) -> None:
        """Release the source's connections, unless it is `unless` (closed by its owner)."""
        if self._source is not unless:
            await self._source.aclose()

    async def view(self, *, now: datetime) -> JobsView:
        """The queued jobs now and what arrived; raises `BackendError` when the source cannot
        say."""
        source = self._source
        listing = await within(source.queued_jobs(now=now), self._timeout_s, source.name)
        if listing.arrivals is not None:  # a source that counts its own (ARC's counters)
            arrivals = listing.arrivals
        else:
            arrivals = await self._arrivals.record(listing.jobs, now=now)
        return jobs_view(listing, arrivals, source=source.name, at=now)
