"""Alert groups read early: while a webhook's append is in flight, the consumer's read starts.

Why: the consumer's first round trip for an entry reads the entry's alert group and incident
(`IncidentStore.load_group`), and that read does not depend on the append. Started when the
webhook has validated the body, beside the append, it leaves the chain from an alert to Slack.

A read is used once, by the next batch of its group the intake applies. The intake starts one
only for a group with no batch running in this replica, so no commit of this replica falls
between the read and its use; a commit of another replica in between is caught by the commit's
fence, as for any read that went stale (the batch is redone on a fresh read). A read nobody
takes (another replica's consumer got the entry) is dropped after `ttl_s`.

A read of a group never seen before reserves the ID of its first incident. An ID reserved and
not used (a dropped read, a group whose first notification is a resolve) is kept for the next
new incident of this replica, so incident numbers are not skipped; IDs kept by a replica that
stops are skipped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress

from redis.exceptions import RedisError

from bot.store import GroupLoad

# A read not taken within this long was for an entry another replica took.
TTL_S = 1.0
# Reads waiting at once; past this (a storm of new groups), the consumer reads as it used to.
LIMIT = 1024
# An ID kept longer than this is let go: the ID sequence expires after its retention with no new
# group, and starts again from 1, so a very old ID could come round again.
KEEP_ID_S = 3600.0


class GroupPreloads:
    """Group reads in flight or done, by group hash, and the incident IDs kept for reuse."""

    def __init__(
        self,
        load: Callable[..., Awaitable[GroupLoad]],
        *,
        ttl_s: float = TTL_S,
        limit: int = LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._clock = clock
        self._ttl_s = ttl_s
        self._limit = limit
        self._reads: dict[str, asyncio.Task[GroupLoad]] = {}
        self._kept_ids: list[tuple[int, float]] = []  # (ID, monotonic time it was kept)

    def __len__(self) -> int:
        return len(self._reads)

    def start(self, group_hash: str) -> None:
        """Start reading the group, unless a read of it is already waiting."""
        if group_hash in self._reads or len(self._reads) >= self._limit:
            return
        task = asyncio.create_task(self.load(group_hash), name=f"preload:{group_hash}")
        self._reads[group_hash] = task
        asyncio.get_running_loop().call_later(self._ttl_s, self._expire, group_hash, task)

    async def take(self, group_hash: str) -> GroupLoad | None:
        """The group as read early, once; None if it was not (or the read failed)."""
        task = self._reads.pop(group_hash, None)
        if task is None:
            return None
        try:
            return await task
        except RedisError:  # the caller reads again, and meets the outage itself
            return None

    async def load(self, group_hash: str) -> GroupLoad:
        """Read the group, reserving an ID for a new group only if none is kept."""
        return await self._load(group_hash, reserve=not self._kept_ids)

    def keep_id(self, incident_id: str | None) -> None:
        """An ID reserved and not used: the next new incident here takes it."""
        if incident_id is not None and incident_id.isdigit():
            self._kept_ids.append((int(incident_id), self._clock()))
            self._kept_ids.sort()

    def kept_id(self) -> str | None:
        """The lowest ID kept (within `KEEP_ID_S`), if any; it is then no longer kept."""
        horizon = self._clock() - KEEP_ID_S
        self._kept_ids = [(n, at) for n, at in self._kept_ids if at > horizon]
        return str(self._kept_ids.pop(0)[0]) if self._kept_ids else None

    def cancel(self) -> None:
        """Shutting down: reads waiting are not needed."""
        for task in self._reads.values():
            task.cancel()
        self._reads.clear()

    def _expire(self, group_hash: str, task: asyncio.Task[GroupLoad]) -> None:
        if self._reads.get(group_hash) is task:
            del self._reads[group_hash]
            task.add_done_callback(self._keep_reserved)

    def _keep_reserved(self, task: asyncio.Task[GroupLoad]) -> None:
        with suppress(asyncio.CancelledError):
            if task.exception() is None:
                self.keep_id(task.result()[3])
