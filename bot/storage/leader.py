"""The leader's lease: which one replica does the work, and the token that fences its writes.

Every replica serves requests; one at a time, the holder of this lease, applies them, sends to
Slack and runs the periodic jobs (`bot.leader`), as a Kubernetes controller's manager runs its
reconcilers on the elected leader only. The lease is a Redis key with a TTL the leader renews;
its value is a fencing token (a number that only grows) and the holder's name. Scripts that
change state take that value (`Fence`) and refuse it once it is no longer the one stored, so a
leader that stalled past its TTL (a pause, a partition) cannot write after its successor took
over, and one that outlived a Redis that lost its data cannot either.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from bot.storage.keys import Keys
from bot.storage.scripts import script


class Deposed(RedisError):
    """A fenced write by a replica that does not hold the lead (any more): nothing was written.

    A RedisError, so whoever makes the write treats it as Redis failing: it is retried, and by
    then the replica has stopped leading and its work has stopped."""


@dataclass
class Fence:
    """The lease's value while this replica leads, for the scripts that check it; `refused` is
    set when one refused it, so the leader stops at once instead of at its next renewal."""

    key: str
    held: str | None = None
    refused: asyncio.Event = field(default_factory=asyncio.Event)

    def args(self) -> str:
        if self.held is None:
            raise Deposed("this replica does not lead")
        return self.held


class FencedScript:
    """A script that runs only for the leader: the lease's key and value go last."""

    def __init__(self, redis: Redis, name: str, fence: Fence | None) -> None:
        self._script: AsyncScript = script(redis, name)
        self._fence = fence

    async def __call__(self, *, keys: list[Any], args: list[Any], client: Any = None) -> Any:
        if self._fence is None:  # a store built for a test or a tool: nothing to fence
            return await self._script(keys=[*keys, ""], args=[*args, ""], client=client)
        held = self._fence.args()
        try:
            return await self._script(
                keys=[*keys, self._fence.key], args=[*args, held], client=client
            )
        except RedisError as exc:
            if "DEPOSED" in str(exc):
                self._fence.held = None
                self._fence.refused.set()
                raise Deposed(str(exc)) from exc
            raise


class Leadership:
    """Take, renew, give up and read the leader's lease."""

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
                keys=[self._keys.leader, self._keys.leader_tokens],
                args=[self.name, self.ttl_ms],
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

    async def holder(self) -> str | None:
        """The name of the replica that leads now, None when none does."""
        value = await self._redis.get(self._keys.leader)
        return None if value is None else str(value).partition(" ")[2]

    async def role(self) -> dict[str, Any]:
        """What `/readyz` says of the lead: whether this replica leads, and which one does."""
        return {"leads": self.fence.held is not None, "leader": await self.holder()}
