"""The fleet's records in Redis: its latest reading, the short history baselines read and the
readings kept a month for the capacity report; queued jobs' arrivals, for "this workflow's arrivals
doubled since the same hour yesterday"; runner pods' OOM kills over days, for the weekly report."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.domain.queue_cost.jobs import Arrivals, FinishedJob, QueuedJob
from bot.domain.reading.fleet import OOM_KEEP_DAYS, KilledPod, OomKill
from bot.storage.keys import Keys, Records


class ReadingStore(Records):
    async def latest(self) -> str | None:
        raw = await self._redis.get(self.keys.fleet_reading)
        return str(raw) if raw else None

    async def save(self, encoded: str, *, keep_ms: int) -> None:
        await self._redis.set(self.keys.fleet_reading, encoded, px=keep_ms)

    async def remember(self, point: str, *, points: int, keep_ms: int) -> None:
        key = self.keys.fleet_history
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lpush(key, point)
            pipe.ltrim(key, 0, points - 1)
            pipe.pexpire(key, keep_ms)
            await pipe.execute()

    async def history(self, last: int = 0) -> list[str]:
        """The history's points, newest first: all, or the `last` ones."""
        key = self.keys.fleet_history
        return list(await self._redis.lrange(key, 0, last - 1))  # type: ignore[misc]

    async def keep(self, day: str, slot: str, kept: str, *, keep_s: int) -> None:
        """Keep a reading in its slot of its day, unless one is kept there."""
        key = self.keys.readings_day(day)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, slot, kept)
            pipe.expire(key, keep_s)
            await pipe.execute()

    async def kept(self, days: Sequence[str]) -> list[Mapping[str, str]]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for day in days:
                pipe.hgetall(self.keys.readings_day(day))
            return list(await pipe.execute())


# A queued job counts once, in the five-minute slot it was created in; "the last hour" is the last
# twelve slots, "a day before" the same twelve 24 hours earlier.
JOBS_SLOT_S = 300
SLOTS_AN_HOUR = 3600 // JOBS_SLOT_S
SLOTS_A_DAY = 24 * SLOTS_AN_HOUR
JOBS_KEEP_S = 26 * 3600  # past its slot's end: the same hour a day before is still there

TypeWorkflow = tuple[str, str]  # (runner type, workflow)


def job_slot(moment: datetime) -> int:
    return math.floor(moment.timestamp() / JOBS_SLOT_S)


def _job_field(runner_type: str, workflow: str) -> str:
    # A tab in a name would split the field wrongly when read back: names keep their words.
    return f"{runner_type.replace(chr(9), ' ')}\t{workflow.replace(chr(9), ' ')}"


class JobArrivals(Records):
    async def record(
        self, jobs: Iterable[QueuedJob], *, now: datetime, finished: Iterable[FinishedJob] = ()
    ) -> Arrivals:
        """Count the jobs not seen before: the arrivals and minutes of the last hour and a day
        before. Only jobs still queued when listed are seen: the ones a queue incident is about."""
        current = job_slot(now)
        by_slot: dict[int, list[str | float]] = {}

        def add(moment: datetime, *triple: str | float) -> None:
            slot = job_slot(moment)
            # "Created" in the future (a clock off) or too long ago to compare: not kept.
            if current - JOBS_KEEP_S // JOBS_SLOT_S < slot <= current:
                by_slot.setdefault(slot, []).extend(triple)

        for job in jobs:
            add(job.created_at, job.source_id, _job_field(job.runner_type, job.workflow), "")
        for done in finished:
            key = _job_field(done.runner_type, done.workflow)
            add(done.finished_at, f"done:{done.source_id}", key, round(done.minutes, 3))
        last_hour = range(current - SLOTS_AN_HOUR + 1, current + 1)
        slots = (*last_hour, *(s - SLOTS_A_DAY for s in last_hour))
        k = self.keys
        async with self._redis.pipeline(transaction=False) as pipe:
            for slot, triples in sorted(by_slot.items()):
                keys = [k.jobs_seen(slot), k.job_arrivals(slot), k.job_durations(slot)]
                expire_at = (slot + 1) * JOBS_SLOT_S + JOBS_KEEP_S
                await self._run("record_jobs", keys, [expire_at, *triples], client=pipe)
            for slot in slots:
                pipe.hgetall(k.job_arrivals(slot))
                pipe.hgetall(k.job_durations(slot))
            answers = (await pipe.execute())[-4 * SLOTS_AN_HOUR :]
        arrivals, durations = answers[0::2], answers[1::2]
        day_before = _summed(arrivals[SLOTS_AN_HOUR:])
        return Arrivals(
            last_hour=_summed(arrivals[:SLOTS_AN_HOUR]),
            day_before=day_before,
            history=bool(day_before),
            minutes_last_hour=_mean_minutes(durations[:SLOTS_AN_HOUR]),
            minutes_day_before=_mean_minutes(durations[SLOTS_AN_HOUR:]),
        )


def _counted(hashes: list[dict[str, str]]) -> tuple[Counter[TypeWorkflow], Counter[TypeWorkflow]]:
    """The jobs and their minutes per pair. A minutes field has three parts (a workflow may be
    named `m`); a field that does not read is left out, not the whole answer."""
    jobs: Counter[TypeWorkflow] = Counter()
    minutes: Counter[TypeWorkflow] = Counter()
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


def _summed(hashes: list[dict[str, str]]) -> dict[TypeWorkflow, int]:
    return dict(+_counted(hashes)[0])  # `+`: the positive counts only


def _mean_minutes(hashes: list[dict[str, str]]) -> dict[TypeWorkflow, float]:
    jobs, minutes = _counted(hashes)
    return {pair: minutes[pair] / n for pair, n in jobs.items() if n > 0}


# OOM kills are kept `OOM_KEEP_DAYS`, at most this many: up to about 5 MB (long pod and workflow
# names), a runner killed every 70 s all week.
OOM_CAP = 10_000


class OomKillRecord(Records):
    """Written from each reading, once per (pod, uid) (ARC recreates a failed runner's pod under
    its name, so the uid tells kills apart), with its runner type, workflow and first sighting."""

    def __init__(self, redis: Redis, keys: Keys, *, cap: int = OOM_CAP) -> None:
        super().__init__(redis, keys)
        self._cap = cap

    async def record(self, kills: Sequence[OomKill], *, now: datetime) -> dict[KilledPod, str]:
        """Record the kills not recorded before; each kill's workflow as recorded (a kill named
        at an earlier reading keeps its name once its job is no longer listed)."""
        if not kills:
            return {}
        oldest = now - timedelta(days=OOM_KEEP_DAYS)
        args = [int(now.timestamp()), int(oldest.timestamp()), self._cap, OOM_KEEP_DAYS * 86400]
        for kill in kills:
            args += [f"{kill.pod}/{kill.uid}", kill.runner_type, kill.workflow]
        keys = [self.keys.oom_kills, self.keys.oom_kills_at]
        stored = await self._run("record_oom_kills", keys, args)
        return {
            (kill.pod, kill.uid): workflow for kill, workflow in zip(kills, stored, strict=True)
        }

    async def since(self, moment: datetime) -> list[OomKill]:
        """The kills first seen from `moment` on, oldest first."""
        fields = await self._redis.zrangebyscore(
            self.keys.oom_kills_at, int(moment.timestamp()), "+inf"
        )
        if not fields:
            return []
        kills = await self._redis.hmget(self.keys.oom_kills, fields)
        found = [_kill(field, raw) for field, raw in zip(fields, kills, strict=True)]
        return [kill for kill in found if kill is not None]


def _kill(field: str, raw: str | None) -> OomKill | None:
    try:
        data = json.loads(raw) if raw is not None else None
        pod, _, uid = field.rpartition("/")
        at = datetime.fromtimestamp(float(data["at"]), UTC)
        return OomKill(str(data["t"]), pod, uid, str(data["w"]), at)
    except (ValueError, KeyError, TypeError):
        return None
