"""The HUD's queued jobs, followed from one listing to the next, for what the queue cost: the HUD
never says when a job started, so one that leaves its list is kept (a day) with the last listing
that had it and the first that did not."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from redis.asyncio import Redis

from bot.domain.queue_cost.cost import FOLLOW_GAP, LeftJob
from bot.domain.queue_cost.jobs import JobsListing, QueuedJob, Trigger
from bot.storage.keys import Keys, Records

KEEP_S = 24 * 3600
CAP = 100_000  # jobs that left the list in a day: about 50 MB at most (490 bytes each)


class ListedJobs(Records):
    def __init__(self, redis: Redis, keys: Keys, *, keep_s: int = KEEP_S, cap: int = CAP) -> None:
        super().__init__(redis, keys)
        self._keep_s = keep_s
        self._cap = cap

    async def follow(self, listing: JobsListing, *, now: datetime) -> int | None:
        """Take one listing: how many jobs it found gone, None when older than the last one."""
        at, complete = now.timestamp(), "1" if listing.complete else "0"
        args: list[str | float | int | bytes] = [at, complete, at - self._keep_s, self._cap]
        args += [self._keep_s + 3600, FOLLOW_GAP.total_seconds()]
        for job in listing.jobs:
            args += [job.source_id, _encoded(job)]
        k = self.keys
        keys = [k.listed_jobs, k.listed_jobs_at, k.left_jobs, k.left_jobs_at]
        found = await self._run("follow_listed_jobs", keys, args)
        return None if found in (b"stale", "stale") else int(found)

    async def left(self, since: datetime, until: datetime) -> list[LeftJob]:
        """The jobs found gone from the list between `since` and `until`."""
        k = self.keys
        ids = await self._redis.zrangebyscore(k.left_jobs_at, since.timestamp(), until.timestamp())
        if not ids:
            return []
        raws = await self._redis.hmget(k.left_jobs, ids)  # type: ignore[misc]
        return [job for raw in raws if raw and (job := _decoded(raw)) is not None]


def _encoded(job: QueuedJob) -> bytes:
    return orjson.dumps(
        {
            "t": job.runner_type,
            "w": job.workflow,
            "b": job.branch,
            "p": job.trigger is Trigger.PULL_REQUEST,
            "c": job.created_at.timestamp(),
        }
    )


def _decoded(raw: str | bytes) -> LeftJob | None:
    """A stored "<gone by>\\t<last listed>\\t<job>"; None for one that does not read."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    parts = text.split("\t", 2)
    try:
        gone, last, job = float(parts[0]), float(parts[1]), orjson.loads(parts[2])
        return LeftJob(
            runner_type=str(job["t"]),
            workflow=str(job["w"]),
            branch=str(job["b"]),
            pull_request=bool(job["p"]),
            created_at=datetime.fromtimestamp(float(job["c"]), UTC),
            last_listed=datetime.fromtimestamp(last, UTC),
            gone_by=datetime.fromtimestamp(gone, UTC),
        )
    except (IndexError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        return None
