"""A Redis stream worked through by a consumer group: one mechanism for every stream queuepilot
consumes (accepted notifications, `bot.storage.stream`; Slack requests, `bot.storage.requests`).

Consumers in the group read new entries; an entry leaves the stream (acknowledged and deleted)
once its work is done. An entry a dead consumer left pending is taken over with XAUTOCLAIM once it
has been idle long enough; a live consumer keeps its own entries from looking idle
(`keep_alive`), and a consumer that shuts down hands its unfinished entries back at once
(`hand_back`). An entry that can never be done goes to the dead letters with the reason (`bury`).
Each stream reads its entries back its own way (`parse`), and never raises doing so: an entry it
cannot read comes back as one that says why, for the consumer to bury.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

DEAD_LETTER_MAXLEN = 10_000
_IDLE_FOREVER_MS = 2**31


class Entry(Protocol):
    """What the group needs of an entry read back: its ID, and its fields as stored (kept with
    it in the dead letters)."""

    @property
    def id(self) -> str: ...

    @property
    def fields(self) -> dict[str, str] | None: ...


E = TypeVar("E", bound=Entry)


class NotReplicated(RedisError):
    """The entry is on the master, but no replica confirmed it in time: a failover now could
    lose it, so it is not acknowledged (the sender retries; a duplicate is recognised)."""


class ConsumerGroup(Generic[E]):
    def __init__(
        self,
        redis: Redis,
        *,
        key: str,
        dead_key: str,
        group: str,
        wait_replicas: int = 0,
        wait_ms: int = 1000,
    ) -> None:
        self._redis = redis
        self.key = key
        self.dead_key = dead_key
        self.group = group
        self._cursor = "0-0"
        self._wait_replicas = wait_replicas
        self._wait_ms = wait_ms

    def parse(self, entry_id: str, fields: dict[str, str]) -> E:
        """The entry as its consumer works on it; one that says why when it cannot be read."""
        raise NotImplementedError

    async def durably(self, call: Callable[..., Awaitable[Any]]) -> Any:
        """What `call()` answers, once the write is as durable as accepted input must be: with
        `wait_replicas`, `call(client=pipeline)` is sent with a `WAIT` in the same round trip,
        and NotReplicated is raised if too few replicas confirmed it."""
        if not self._wait_replicas:
            return await call()
        async with self._redis.pipeline(transaction=False) as pipe:
            await call(client=pipe)
            pipe.execute_command("WAIT", self._wait_replicas, self._wait_ms)
            result, acked = await pipe.execute()
        acked = int(acked)
        if acked < self._wait_replicas and await self._replicas() >= self._wait_replicas:
            raise NotReplicated(f"{acked} of {self._wait_replicas} replicas confirmed {result}")
        # Fewer replicas than asked for are connected at all (one is down): refusing would turn
        # a degraded set-up into an outage; the write is as safe as the set-up allows.
        return result

    async def _replicas(self) -> int:
        info = await self._redis.info("replication")
        return int(info.get("connected_slaves", 0))

    async def ensure_group(self) -> None:
        try:
            await self._redis.xgroup_create(self.key, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(
        self, consumer: str, *, count: int = 10, block_ms: int = 1000, own: bool = False
    ) -> list[E]:
        """New entries for this consumer, or (`own`) those it was handed and has not
        acknowledged (it stopped leading mid-way, and leads again); recreates the group if Redis
        lost it (a restart)."""
        try:
            reply = await self._redis.xreadgroup(
                self.group,
                consumer,
                {self.key: "0" if own else ">"},
                count=count,
                block=None if own else block_ms,
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self.ensure_group()
            return []
        return [
            self.parse(entry_id, fields)
            for _, entries in reply or []
            for entry_id, fields in entries
            if fields  # an entry deleted while pending has nothing left to read
        ]

    async def reclaim(self, consumer: str, *, min_idle_ms: int, count: int = 20) -> list[E]:
        """Entries other consumers took but left idle for `min_idle_ms`, continuing where the
        last call stopped (the cursor), so a long backlog is walked through, not re-scanned."""
        try:
            reply = await self._redis.xautoclaim(
                self.key, self.group, consumer, min_idle_ms, start_id=self._cursor, count=count
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self._cursor = "0-0"
            await self.ensure_group()
            return []
        self._cursor = str(reply[0] or "0-0")
        return [self.parse(entry_id, fields) for entry_id, fields in reply[1] if fields]

    async def keep_alive(self, consumer: str, entry_ids: list[str]) -> None:
        """Reset the idle time of entries this consumer is still working on, so no other
        replica takes over a handler that is alive (only slow)."""
        if entry_ids:
            await self._redis.xclaim(self.key, self.group, consumer, 0, entry_ids, justid=True)

    async def hand_back(self, consumer: str, entry_ids: list[str]) -> None:
        """Shutting down with entries unfinished: make them look idle for ages, so the next
        reclaim (any replica's, or this one's after a restart) takes them over at once."""
        if entry_ids:
            await self._redis.xclaim(
                self.key, self.group, consumer, 0, entry_ids, idle=_IDLE_FOREVER_MS, justid=True
            )

    async def deliveries(self, entry_id: str) -> int:
        """How many times the group has handed this entry out (1 on first delivery)."""
        pending = await self._redis.xpending_range(
            self.key, self.group, min=entry_id, max=entry_id, count=1
        )
        return int(pending[0]["times_delivered"]) if pending else 0

    async def ack(self, *entry_ids: str) -> None:
        # Deleting as well as acknowledging keeps the stream as long as the backlog, no longer.
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.key, self.group, *entry_ids)
            pipe.xdel(self.key, *entry_ids)
            await pipe.execute()

    async def bury(self, entry: E, reason: str) -> None:
        """Move an entry that can never be done aside, with the reason, for an operator."""
        fields: dict[Any, Any] = {"id": entry.id, "reason": reason, **(entry.fields or {})}
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xadd(self.dead_key, fields, maxlen=DEAD_LETTER_MAXLEN, approximate=True)
            pipe.xack(self.key, self.group, entry.id)
            pipe.xdel(self.key, entry.id)
            await pipe.execute()

    async def backlog(self) -> int:
        return cast(int, await self._redis.xlen(self.key))

    async def prune_consumers(self, own: str, *, idle_ms: int) -> int:
        """Remove consumers that left the group (dead replicas) once nothing is pending on them.

        A consumer with pending entries is kept: deleting it would forget those entries.
        """
        try:
            consumers = await self._redis.xinfo_consumers(self.key, self.group)
        except ResponseError:
            return 0
        removed = 0
        for consumer in consumers:
            name = str(consumer.get("name"))
            idle, pending = int(consumer.get("idle", 0)), int(consumer.get("pending", 0))
            if name != own and pending == 0 and idle > idle_ms:
                await self._redis.xgroup_delconsumer(self.key, self.group, name)
                removed += 1
        return removed
