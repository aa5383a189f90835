"""A channel's alert storm: one digest message lists every new group at once, while their roots go
out one per Slack's slot."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from bot.storage.keys import ROOTS_END, Keys, Records


@dataclass(frozen=True)
class Storm:
    id: str
    started_ms: int
    last_added_ms: int
    waiting_ms: int  # since when a group has waited for a line of a digest message (0: none)
    message_ts: tuple[str, ...]  # each digest message's ts ('' until posted), first to last

    @property
    def parts(self) -> int:
        return len(self.message_ts)

    @property
    def pending(self) -> int | None:
        """The digest message begun but not posted yet, if any."""
        return self.parts - 1 if not self.message_ts[-1] else None

    @property
    def last_posted(self) -> int | None:
        """The latest digest message in the channel: the one an edit may add groups to."""
        posted = [part for part, ts in enumerate(self.message_ts) if ts]
        return posted[-1] if posted else None

    def metadata_uid(self, part: int = 0) -> str:
        return f"storm-{self.id}" if part == 0 else f"storm-{self.id}-{part}"

    def item(self, part: int = 0) -> str:
        return f"digest:{self.id}" if part == 0 else f"digest:{self.id}:{part}"

    @property
    def member(self) -> str:
        return f"storm:{self.id}"


@dataclass(frozen=True)
class Member:
    incident_id: str
    version: int
    thread_ts: str  # its root message, once posted
    part: int | None = None  # the digest message that lists it; None while none does

    @property
    def threaded(self) -> bool:
        return bool(self.thread_ts)


class StormQueue(Records):
    def __init__(self, redis: Redis, prefix: str, *, retention_s: int) -> None:
        super().__init__(redis, Keys(prefix))
        self._ttl_ms = retention_s * 1000

    async def sweep(self, channel: str, *, threshold: int, now_ms: int) -> tuple[bool, bool, int]:
        """Fold the waiting roots into the storm, opening one if `threshold` (> 0) roots wait:
        whether a storm is open, whether this opened it, and the groups it added."""
        k = self.keys
        keys = [k.posts(channel), k.storm(channel), k.storm_members(channel), k.send_seq]
        keys.append(k.storm_paused(channel))
        args = [threshold, now_ms, self._ttl_ms]
        storm_id, opened, added = await self._run("storm_sweep", keys, args)
        return bool(storm_id), bool(opened), int(added)

    async def current(self, channel: str) -> Storm | None:
        raw = cast(dict[str, str], await self._redis.hgetall(self.keys.storm(channel)))  # type: ignore[misc]
        if not raw.get("id"):
            return None
        times = (int(raw.get(f) or 0) for f in ("started_ms", "last_added_ms", "waiting_ms"))
        parts = range(1, int(raw.get("parts") or 1))
        return Storm(
            raw["id"], *times, (raw.get("ts", ""), *(raw.get(f"ts:{n}", "") for n in parts))
        )

    async def place(self, channel: str, storm: Storm, part: int, *, room: int) -> list[str]:
        """List unlisted groups in message `part` (one past the last: a continuation), up to
        `room` lines; the IDs it lists, most severe first."""
        k = self.keys
        keys = [k.storm(channel), k.storm_members(channel), k.storm_placed(channel)]
        listed = await self._run("storm_place", keys, [storm.id, part, room, self._ttl_ms])
        return cast(list[str], listed)

    async def members(self, channel: str) -> list[Member]:
        ids = cast(list[str], await self._redis.zrange(self.keys.storm_members(channel), 0, -1))
        if not ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.keys.storm_placed(channel))
            for incident_id in ids:
                pipe.hmget(self.keys.incident(incident_id), ["v", "thread"])
            placed, *rows = await pipe.execute()
        return [
            Member(
                incident_id,
                int(v or 0),
                json.loads(thread)["ts"] if thread else "",
                int(placed[incident_id]) if incident_id in placed else None,
            )
            for incident_id, (v, thread) in zip(ids, rows, strict=True)
            if v is not None
        ]

    async def roots_waiting(self, channel: str) -> int:
        return cast(int, await self._redis.zcount(self.keys.posts(channel), 0, ROOTS_END))

    async def record_digest(
        self, channel: str, storm: Storm, ts: str, *, shown: str, part: int = 0
    ) -> None:
        k = self.keys
        keys = [k.storm(channel), k.in_flight(channel)]
        await self._run("record_digest", keys, [storm.id, ts, shown, part])

    async def record_shown(self, channel: str, storm: Storm, shown: str, *, part: int = 0) -> None:
        field = "shown" if part == 0 else f"shown:{part}"
        await self._redis.hset(self.keys.storm(channel), field, shown)  # type: ignore[misc]

    async def close(self, channel: str, storm: Storm) -> bool:
        """End the storm, unless a group joined since `storm` was read (then it goes on)."""
        args = [storm.id, storm.last_added_ms]
        return bool(await self._run("storm_close", self._storm_keys(channel), args))

    async def abandon(self, channel: str, storm: Storm, *, pause_ms: int) -> None:
        """The digest can never be posted: the roots go on alone, no storm for `pause_ms`."""
        k = self.keys
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(*self._storm_keys(channel))
            pipe.hdel(k.in_flight(channel), storm.member)
            pipe.set(k.storm_paused(channel), "1", px=max(pause_ms, 1))
            await pipe.execute()

    def _storm_keys(self, channel: str) -> list[str]:
        k = self.keys
        return [f(channel) for f in (k.storm, k.storm_members, k.storm_placed)]
