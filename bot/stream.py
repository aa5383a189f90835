"""The durable notification stream: accepted webhooks wait here until an incident reflects them.

The webhook handler appends before answering 202; consumers in one group read, process, then
acknowledge and delete. An entry a dead consumer left pending is taken over with XAUTOCLAIM once it
has been idle long enough, so an acknowledged notification is never lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from bot.alerts import Source

GROUP = "intake"


@dataclass(frozen=True)
class StreamEntry:
    id: str
    source: Source
    body: str
    received_at: float


class NotificationStream:
    def __init__(self, redis: Redis, prefix: str) -> None:
        self._redis = redis
        self.key = f"{prefix}:notifications"
        self.dead_key = f"{prefix}:notifications:dead"

    async def append(self, source: Source, body: str, received_at: float) -> str:
        fields = {"source": source, "body": body, "received_at": repr(received_at)}
        return cast(str, await self._redis.xadd(self.key, fields))  # type: ignore[arg-type]

    async def ensure_group(self) -> None:
        try:
            await self._redis.xgroup_create(self.key, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(
        self, consumer: str, *, count: int = 10, block_ms: int = 1000
    ) -> list[StreamEntry]:
        """New entries for this consumer; recreates the group if Redis lost it (a restart)."""
        try:
            reply = await self._redis.xreadgroup(
                GROUP, consumer, {self.key: ">"}, count=count, block=block_ms
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self.ensure_group()
            return []
        return [
            _entry(entry_id, fields) for _, entries in reply or [] for entry_id, fields in entries
        ]

    async def reclaim(
        self, consumer: str, *, min_idle_ms: int, count: int = 10
    ) -> list[StreamEntry]:
        """Entries other consumers took but did not acknowledge within `min_idle_ms`."""
        try:
            reply = await self._redis.xautoclaim(
                self.key, GROUP, consumer, min_idle_time=min_idle_ms, start_id="0-0", count=count
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self.ensure_group()
            return []
        return [_entry(entry_id, fields) for entry_id, fields in reply[1] if fields]

    async def deliveries(self, entry_id: str) -> int:
        """How many times the group has handed this entry out (1 on first delivery)."""
        pending = await self._redis.xpending_range(
            self.key, GROUP, min=entry_id, max=entry_id, count=1
        )
        return int(pending[0]["times_delivered"]) if pending else 0

    async def ack(self, entry_id: str) -> None:
        # Deleting as well as acknowledging keeps the stream as long as the backlog, no longer.
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.xack(self.key, GROUP, entry_id)
            pipe.xdel(self.key, entry_id)
            await pipe.execute()

    async def bury(self, entry: StreamEntry, reason: str) -> None:
        """Move an entry that can never be processed aside, where an operator can inspect it."""
        fields = {"id": entry.id, "source": entry.source, "body": entry.body, "reason": reason}
        await self._redis.xadd(self.dead_key, fields, maxlen=10_000, approximate=True)  # type: ignore[arg-type]
        await self.ack(entry.id)

    async def backlog(self) -> int:
        return cast(int, await self._redis.xlen(self.key))


def _entry(entry_id: str, fields: dict[str, str]) -> StreamEntry:
    return StreamEntry(
        id=entry_id,
        source=cast(Source, fields.get("source", "grafana")),
        body=fields.get("body", ""),
        received_at=float(fields.get("received_at", "0") or 0),
    )
