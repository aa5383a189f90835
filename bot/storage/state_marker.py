"""The marker that says queuepilot's state exists in Redis (kept as long as the incidents, so
missing only when Redis lost everything), and what is known after a loss of it: the roots found in
Slack and the highest incident number used. While a check is unfinished the key holds only
`unsure`, when it began; after a loss `unsure` stays until its read is done, so that a leader
taking over reads on for the roots."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from bot.storage.keys import Keys, Records, dumped
from bot.storage.leases import Fence, FencedScript

UNSURE = "unsure"  # the marker's field while a check of it is unfinished
# Longer than a distributed app's minute between two history reads, short enough that a leader
# that died does not leave it long.
CHECKING_KEEP_S = 180


@dataclass(frozen=True)
class Marker:
    lost_at: float | None = None  # when Redis was last found to have lost the state
    found: int = 0  # threads found again in Slack then
    above: int = 0  # the highest incident number used before, which numbering goes on above
    reading: bool = False  # the read of Slack's history that found the loss is not done


@dataclass(frozen=True)
class FoundRoot:
    """A root found in Slack after a loss: its incident goes on in it, by its number and UID."""

    incident_id: str
    uid: str
    channel: str
    ts: str


class StateMarker(Records):
    def __init__(
        self, redis: Redis, keys: Keys, *, retention_s: int, fence: Fence | None = None
    ) -> None:
        super().__init__(redis, keys)
        self._retention_s = retention_s
        self._lost = FencedScript(redis, "state_lost", fence)
        self._checking = FencedScript(redis, "state_checking", fence)

    async def read(self) -> Marker | None:
        return _marker(cast(dict[str, str], await self._redis.hgetall(self.keys.state_marker)))

    async def kept(self) -> tuple[Marker | None, int]:
        """The marker, its TTL renewed, and the highest incident number used (the sequence's)."""
        k = self.keys
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.state_marker)
            pipe.expire(k.state_marker, self._retention_s)
            pipe.get(k.incident_seq)
            raw, _, seq = await pipe.execute()
        return _marker(raw), int(seq or 0)

    async def unsure(self, now: float) -> float:
        """Says a check of the missing marker began at `now`, unless one did before: when."""
        k = self.keys
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(k.state_marker, UNSURE, repr(now))
            pipe.expire(k.state_marker, self._retention_s)
            pipe.hget(k.state_marker, UNSURE)
            *_, began = await pipe.execute()
        return float(began)

    async def said_checking(self, text: str | None) -> None:
        """What the leader's read of Slack's history says of itself (None: no read is under way);
        fenced, so a deposed leader never unsays its successor's."""
        await self._checking(keys=[self.keys.state_checking], args=[text or "", CHECKING_KEEP_S])

    async def checking(self) -> str | None:
        return cast(str | None, await self._redis.get(self.keys.state_checking))

    async def create(self, now: float) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self.keys.state_marker, "since", repr(now))
            pipe.hdel(self.keys.state_marker, UNSURE)
            pipe.expire(self.keys.state_marker, self._retention_s)
            await pipe.execute()

    async def read_done(self) -> None:
        await self._redis.hdel(self.keys.state_marker, UNSURE)

    async def record_loss(
        self, now: float | None, *, highest: int, roots: Mapping[str, FoundRoot], keep_s: int
    ) -> int:
        """Numbering above `highest`, the roots by group for `keep_s` (but a group's that opened
        an incident since); the marker, saying so (with `now`; None: those two only)."""
        pairs = [x for group, root in roots.items() for x in (group, dumped(root))]
        k = self.keys
        args = ["" if now is None else repr(now), highest, self._retention_s, keep_s, *pairs]
        keys = [k.state_marker, k.incident_seq, k.found_roots, *map(k.group, roots)]
        return int(await self._lost(keys=keys, args=args))


def _marker(raw: dict[str, str]) -> Marker | None:
    # The marker stands once `since` is written: a check's `unsure` alone is none.
    if not raw.get("since"):
        return None
    lost_at = raw.get("lost_at")
    return Marker(
        lost_at=float(lost_at) if lost_at else None,
        found=int(raw.get("found") or 0),
        above=int(raw.get("above") or 0),
        reading=UNSURE in raw,
    )
