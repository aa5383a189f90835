"""The arrival history of queued jobs: how many jobs of each workflow arrived per hour, so "this
workflow's arrivals doubled since the same hour yesterday" is something the bot can say.

A job counts once, in the hour it was created, the first time any replica lists it: a script
adds its id to that hour's set of seen jobs and, only when the id is new, counts it in that hour's
arrivals (field "<runner type>\\t<workflow>"). One script call per hour listed, all in one
pipeline, so a listing costs one round trip and two replicas listing at once count each job once.
Both keys expire 26 hours after their hour ends: the same hour a day before is still there.

Only jobs that were still queued when listed are seen: a job picked up within seconds never
shows, so these are arrivals of jobs that queued, which is what a queue incident is about.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from redis.asyncio import Redis

from bot.domain.jobs import Arrivals, QueuedJob
from bot.storage.keys import Keys

HOUR_S = 3600
KEEP_HOURS = 26

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


def hour_of(moment: datetime) -> int:
    return math.floor(moment.timestamp() / HOUR_S)


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
        day before.

        "The last hour" spans two clock hours: the current one so far, plus the previous one
        weighted by the part of it still inside the last 60 minutes (a sliding-window
        estimate); the day before is weighted the same way, so the two compare fairly.
        """
        current = hour_of(now)
        by_hour: dict[int, list[str]] = {}
        for job in jobs:
            hour = hour_of(job.created_at)
            # A job "created" in the future (a clock off) or too long ago to compare is not kept.
            if current - KEEP_HOURS < hour <= current:
                by_hour.setdefault(hour, []).extend(
                    [job.source_id, field_of(job.runner_type, job.workflow)]
                )
        read = (current, current - 1, current - 24, current - 25)
        async with self._redis.pipeline(transaction=False) as pipe:
            for hour, pairs in sorted(by_hour.items()):
                expire_at = (hour + 1 + KEEP_HOURS) * HOUR_S
                keys = [self._keys.jobs_seen(hour), self._keys.job_arrivals(hour)]
                await self._record(keys=keys, args=[expire_at, *pairs], client=pipe)
            for hour in read:
                pipe.hgetall(self._keys.job_arrivals(hour))
            answers = await pipe.execute()
        now_h, before_h, day_h, day_before_h = (_counts(raw) for raw in answers[-4:])
        previous_weight = 1 - (now.timestamp() % HOUR_S) / HOUR_S
        return Arrivals(
            last_hour=_window(now_h, before_h, previous_weight),
            day_before=_window(day_h, day_before_h, previous_weight),
            history=bool(day_h or day_before_h),
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


def _window(
    current: dict[tuple[str, str], int], previous: dict[tuple[str, str], int], weight: float
) -> dict[tuple[str, str], int]:
    keys = set(current) | set(previous)
    estimated = {k: round(current.get(k, 0) + previous.get(k, 0) * weight) for k in keys}
    return {k: n for k, n in estimated.items() if n > 0}
