"""A Redis stream worked through by a consumer group, for both streams. An entry leaves the stream
once done; one a dead consumer (a former leader's, a 0.26 replica's) left pending is taken over
once idle; one that can never be done is dead-lettered with the reason."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

DEAD_LETTER_MAXLEN = 10_000
_IDLE_FOREVER_MS = 2**31


class Entry(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def fields(self) -> dict[str, str] | None: ...


E = TypeVar("E", bound=Entry)


class NotReplicated(RedisError):
    """No replica confirmed the entry in time (a failover could lose it): not acknowledged."""


class ConsumerGroup(Generic[E]):
    def __init__(
        self, redis: Redis, key: str, dead_key: str, group: str, wait_replicas: int, wait_ms: int
    ) -> None:
        self._redis = redis
        self.key = key
        self.dead_key = dead_key
        self.group = group
        self._cursor = "0-0"
        self._wait_replicas = wait_replicas
        self._wait_ms = wait_ms

    def parse(self, entry_id: str, fields: dict[str, str]) -> E:
        raise NotImplementedError

    async def durably(self, call: Callable[..., Awaitable[Any]]) -> Any:
        """What `call()` answers, once `wait_replicas` confirmed it (a `WAIT` in its round trip)."""
        if not self._wait_replicas:
            return await call()
        async with self._redis.pipeline(transaction=False) as pipe:
            await call(client=pipe)
            pipe.execute_command("WAIT", self._wait_replicas, self._wait_ms)
            result, acked = await pipe.execute()
        if int(acked) < self._wait_replicas:
            # With fewer replicas connected than asked for (one is down), refusing would turn a
            # degraded set-up into an outage: the write is as safe as the set-up allows.
            info = await self._redis.info("replication")
            if int(info.get("connected_slaves", 0)) >= self._wait_replicas:
                raise NotReplicated(f"{acked} of {self._wait_replicas} replicas confirmed {result}")
        return result

    async def ensure_group(self) -> None:
        try:
            await self._redis.xgroup_create(self.key, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _regrouped(self, command: Awaitable[Any]) -> Any:
        """What `command` answers; None once the group Redis lost is made again."""
        try:
            return await command
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self.ensure_group()
            return None

    async def read(
        self, consumer: str, *, count: int = 10, block_ms: int = 1000, own: bool = False
    ) -> list[E]:
        """New entries, or (`own`) those handed to this consumer and not acknowledged (it led
        before)."""
        block = None if own else block_ms
        read = self._redis.xreadgroup(
            self.group, consumer, {self.key: "0" if own else ">"}, count=count, block=block
        )
        return self._parsed(
            pair for _, entries in await self._regrouped(read) or [] for pair in entries
        )

    async def reclaim(self, consumer: str, *, min_idle_ms: int, count: int = 20) -> list[E]:
        """Entries left idle for `min_idle_ms`, from where the last call stopped, so a long
        backlog is walked through, not re-scanned."""
        reply = await self._regrouped(
            self._redis.xautoclaim(
                self.key, self.group, consumer, min_idle_ms, start_id=self._cursor, count=count
            )
        )
        self._cursor = str((reply and reply[0]) or "0-0")
        return self._parsed(reply[1] if reply else [])

    def _parsed(self, entries: Iterable[tuple[str, dict[str, str]]]) -> list[E]:
        # An entry deleted while pending has no fields left to read.
        return [self.parse(entry_id, fields) for entry_id, fields in entries if fields]

    async def keep_alive(self, consumer: str, entry_ids: list[str], *, idle: int = 0) -> None:
        """Reset the idle time of entries still worked on, so a slow handler is not taken over
        (`hand_back`: idle for ages, so the next reclaim takes them)."""
        if entry_ids:
            await self._redis.xclaim(
                self.key, self.group, consumer, 0, entry_ids, idle=idle or None, justid=True
            )

    async def hand_back(self, consumer: str, entry_ids: list[str]) -> None:
        await self.keep_alive(consumer, entry_ids, idle=_IDLE_FOREVER_MS)

    async def deliveries(self, entry_id: str) -> int:
        pending = await self._redis.xpending_range(
            self.key, self.group, min=entry_id, max=entry_id, count=1
        )
        return int(pending[0]["times_delivered"]) if pending else 0

    async def ack(self, *entry_ids: str, dead: dict[Any, Any] | None = None) -> None:
        """Done with the entries, `dead` added to the dead letters if given; deleted, so the
        stream is as long as the backlog."""
        async with self._redis.pipeline(transaction=True) as pipe:
            if dead is not None:
                pipe.xadd(self.dead_key, dead, maxlen=DEAD_LETTER_MAXLEN, approximate=True)
            pipe.xack(self.key, self.group, *entry_ids)
            pipe.xdel(self.key, *entry_ids)
            await pipe.execute()

    async def bury(self, entry: E, reason: str) -> None:
        await self.ack(entry.id, dead={"id": entry.id, "reason": reason, **(entry.fields or {})})

    async def backlog(self) -> int:
        return cast(int, await self._redis.xlen(self.key))

    async def prune_consumers(self, own: str, *, idle_ms: int) -> int:
        """Remove dead replicas' consumers with nothing pending."""
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
