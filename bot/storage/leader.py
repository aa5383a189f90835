"""The leader's lease. Its value is a fencing token (a number that only grows) and the holder's
name; fenced scripts refuse any other value, so a leader that stalled past its TTL cannot write
after its successor."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.storage.keys import Keys
from bot.storage.scripts import script


class Deposed(RedisError):
    """A fenced write by a replica that no longer leads: nothing was written."""


@dataclass
class Fence:
    """The lease's value while this replica leads; `refused`: a script refused it (stop now)."""

    key: str
    held: str | None = None
    refused: asyncio.Event = field(default_factory=asyncio.Event)


class FencedScript:
    """A script that runs only for the leader: the lease's key and value go last (empty: none)."""

    def __init__(self, redis: Redis, name: str, fence: Fence | None) -> None:
        self._script = script(redis, name)
        self._fence = fence

    async def __call__(self, *, keys: list[Any], args: list[Any], client: Any = None) -> Any:
        fence = self._fence or Fence("", held="")
        if fence.held is None:
            raise Deposed("this replica does not lead")
        try:
            return await self._script(
                keys=[*keys, fence.key], args=[*args, fence.held], client=client
            )
        except RedisError as exc:
            if "DEPOSED" not in str(exc):
                raise
            fence.held = None
            fence.refused.set()
            raise Deposed(str(exc)) from exc


class Leadership:
    def __init__(self, redis: Redis, keys: Keys, *, name: str, ttl_ms: int) -> None:
        self._redis = redis
        self._keys = keys
        self.name = name
        self.ttl_ms = ttl_ms
        self.fence = Fence(keys.leader)
        self._held: str | None = None  # the lease as taken, until it is lost or given up
        self._take = script(redis, "leader_take")
        self._renew = script(redis, "lease_renew")
        self._release = script(redis, "lease_release")

    async def take(self) -> bool:
        """Whether this replica now leads: it held the lease still, or nobody held it."""
        if self._held is None:
            taken = await self._take(
                keys=[self._keys.leader, self._keys.leader_tokens], args=[self.name, self.ttl_ms]
            )
            self._held = str(taken) if taken else None
        elif not await self.renew():
            return False
        self.fence.held = self._held
        self.fence.refused.clear()
        return self._held is not None

    async def renew(self) -> bool:
        """Keep the lease another TTL; False (and no longer leading) when it was lost."""
        if self._held is None:
            return False
        if await self._renew(keys=[self._keys.leader], args=[self._held, self.ttl_ms]):
            return True
        self._held = self.fence.held = None
        return False

    def step_down(self) -> None:
        """Stop writing as the leader at once; the lease stays held until given up or expired."""
        self.fence.held = None

    async def resign(self) -> None:
        """Give the lease up, so that another replica leads at once instead of after its TTL."""
        self.fence.held = None
        if self._held is not None:
            await self._release(keys=[self._keys.leader], args=[self._held])
            self._held = None

    async def role(self) -> dict[str, Any]:
        """What `/readyz` says: whether this replica leads, and which one does."""
        value = await self._redis.get(self._keys.leader)
        leader = None if value is None else str(value).partition(" ")[2]
        return {"leads": self.fence.held is not None, "leader": leader}
