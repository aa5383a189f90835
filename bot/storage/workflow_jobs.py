"""GitHub's jobs as its `workflow_job` deliveries tell them, kept in Redis for every replica, in
GitHub's REST shape, their state only moving forward; a delivery is recorded once (by its signed
body); finished jobs stay a day, for what the queue cost. The kinds heard are bounded: an event's
name is the sender's word."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson
from redis.asyncio import Redis

from bot.domain.queue_cost.workflow_jobs import JobDelivery
from bot.storage.keys import Keys, Records

# GitHub cancels a job queued for a day; a finished one is kept that long for the queue's cost.
KEEP_S = 24 * 3600
CAP = 100_000  # jobs per hash: a busy organization's day, about 60 MB at most
SLOT_S = 300  # deliveries are counted per five-minute slot
HOUR_SLOTS = 3600 // SLOT_S
# Kinds of delivery told apart in an hour and in a slot (a new one past them counts as "other"):
# GitHub has fewer than 80 events, all sent to a webhook subscribed to everything, and a
# workflow_job's four actions.
KINDS_KEPT = 100


class WorkflowJobs(Records):
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        *,
        keep_s: int = KEEP_S,
        cap: int = CAP,
        kinds_kept: int = KINDS_KEPT,
    ) -> None:
        super().__init__(redis, keys)
        self._keep_s = keep_s
        self._cap = cap
        self._kinds_kept = kinds_kept

    async def record(
        self, once_by: str, kind: str, delivered: JobDelivery | None, now: float
    ) -> str:
        """One delivery, recorded once by `once_by` (its signature: its ID is not signed), counted
        by kind: "duplicate", "stale" (older than the span kept), "recorded" (its job moved) or
        "kept" (the job was past that state, or the delivery carries none)."""
        result = await self._call(once_by, kind, (delivered,) if delivered is not None else (), now)
        if isinstance(result, str):
            return result
        return "recorded" if result else "kept"

    async def listed(self, jobs: Sequence[JobDelivery], now: float) -> int:
        """Jobs a listing found (a missed delivery's job, or its later state): how many moved."""
        if not jobs:
            return 0
        return int(await self._call("", "", jobs, now))

    async def _call(
        self, once_by: str, kind: str, jobs: Sequence[JobDelivery], now: float
    ) -> int | str:
        # A replay of a job's state is stale once its signature is forgotten; a delivery with no
        # job is kept the hour its kind is read over (a hook sending every event: an hour's keys).
        once_s = self._keep_s + 3600 if jobs else 3600
        args: list[Any] = [now, now - self._keep_s, self._cap, self._keep_s + 3600, once_by, kind]
        args += [once_s, 3600 + SLOT_S, self._kinds_kept]
        for job in jobs:
            args += [job.id, job.rank, job.at.timestamp(), orjson.dumps(job.job)]
        k = self.keys
        keys = [k.github_jobs, k.github_jobs_at, k.github_jobs_done, k.github_jobs_done_at]
        keys += [k.github_delivery(once_by or "-"), k.github_events]
        keys.append(k.github_events_slot(int(now // SLOT_S)))
        result = await self._run("record_workflow_jobs", keys, args)
        return str(result) if isinstance(result, str | bytes) else int(result)

    async def live(self) -> list[dict[str, Any]]:
        """The jobs still to finish (queued, waiting or in progress), in GitHub's REST shape."""
        return _decoded(await self._redis.hvals(self.keys.github_jobs))  # type: ignore[misc]

    async def done(self, since: float, until: float) -> list[dict[str, Any]]:
        """The jobs that finished between `since` and `until` (epoch seconds)."""
        ids = await self._redis.zrangebyscore(self.keys.github_jobs_done_at, since, until)
        if not ids:
            return []
        return _decoded(await self._redis.hmget(self.keys.github_jobs_done, ids))  # type: ignore[misc]

    async def heard(self, now: float) -> dict[str, tuple[int, float]]:
        """Each kind of delivery heard in the last hour ("workflow_job.queued"): how many, and
        when the last came (epoch seconds)."""
        k = self.keys
        last = await self._redis.zrangebyscore(k.github_events, now - 3600, "+inf", withscores=True)
        if not last:
            return {}
        first = int(now // SLOT_S) - HOUR_SLOTS + 1
        async with self._redis.pipeline(transaction=False) as pipe:
            for slot in range(first, first + HOUR_SLOTS):
                pipe.hgetall(k.github_events_slot(slot))
            slots = await pipe.execute()
        counts = Counter[str]()
        for counted in slots:
            counts.update({kind: int(n) for kind, n in counted.items()})
        return {str(kind): (counts.get(kind, 1), float(at)) for kind, at in last}


def _decoded(raws: Sequence[str | None]) -> list[dict[str, Any]]:
    jobs = (orjson.loads(raw) for raw in raws if raw)
    return [job for job in jobs if isinstance(job, dict)]
