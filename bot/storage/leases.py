"""Claims and leases. A `Lease` is held by a random token (then an optional note for whoever finds
it taken); only its holder may renew, keep or release it. The leader's lease holds a fencing token
(a number that only grows) and the holder's name; fenced scripts refuse any other value, so a
leader that stalled past its TTL cannot write after its successor. A responder's interaction is
claimed and its answer kept, so a delivery arriving twice gets the same answer; an action on an
incident is locked while its backend call runs, then kept for a cooldown where asked."""

from __future__ import annotations

import asyncio
import secrets
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.storage.keys import Keys, Records, claim_once, script

INTERACTION_MEMORY_S = 3600
IN_PROGRESS = "\x00in-progress"

# The requests stream's entry the running task performs, "" elsewhere: each entry runs in a task
# of its own, and the actions in between need not carry it.
attempt: ContextVar[str] = ContextVar("attempt", default="")


@dataclass(frozen=True)
class Lease:
    key: str
    token: str  # the stored value: the holder's token, then its note if it has one


class Leases:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._release = script(redis, "lease_release")
        self._renew = script(redis, "lease_renew")
        self._keep = script(redis, "lease_keep")

    async def claim_once(self, key: str, ttl_ms: int, value: str = "1") -> bool:
        return await claim_once(self._redis, key, ttl_ms, value)

    async def try_acquire(self, key: str, ttl_ms: int, *, note: str = "") -> Lease | None:
        token = secrets.token_hex(8)
        lease = Lease(key, f"{token} {note}" if note else token)
        return lease if await self.claim_once(key, ttl_ms, lease.token) else None

    async def holder_note(self, key: str) -> str | None:
        """The note of whoever holds `key` ("" when they left none); None when nobody does."""
        held = await self._redis.get(key)
        return None if held is None else str(held).partition(" ")[2]

    async def renew(self, lease: Lease, ttl_ms: int) -> bool:
        return bool(await self._renew(keys=[lease.key], args=[lease.token, ttl_ms]))

    async def keep(self, lease: Lease, ttl_ms: int, note: str) -> Lease | None:
        """Hold a lease still ours `ttl_ms` longer under a new note (a cooldown), else None."""
        kept = Lease(lease.key, f"{lease.token.partition(' ')[0]} {note}")
        done = await self._keep(keys=[lease.key], args=[lease.token, max(ttl_ms, 1), kept.token])
        return kept if done else None

    async def release(self, lease: Lease) -> None:
        await self._release(keys=[lease.key], args=[lease.token])


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


class Leadership(Records):
    def __init__(self, redis: Redis, keys: Keys, *, name: str, ttl_ms: int) -> None:
        super().__init__(redis, keys)
        self.name = name
        self.ttl_ms = ttl_ms
        self.fence = Fence(keys.leader)
        self._held: str | None = None  # the lease as taken, until it is lost or given up
        self._leases = Leases(redis)

    async def take(self) -> bool:
        """Whether this replica now leads: it held the lease still, or nobody held it."""
        if self._held is None:
            keys = [self.keys.leader, self.keys.leader_tokens]
            taken = await self._run("leader_take", keys, [self.name, self.ttl_ms])
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
        if await self._leases.renew(Lease(self.keys.leader, self._held), self.ttl_ms):
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
            await self._leases.release(Lease(self.keys.leader, self._held))
            self._held = None

    async def role(self) -> dict[str, Any]:
        """What `/readyz` says: whether this replica leads, and which one does."""
        value = await self._redis.get(self.keys.leader)
        leader = None if value is None else str(value).partition(" ")[2]
        return {"leads": self.fence.held is not None, "leader": leader}


@dataclass(frozen=True)
class Held:
    what: str  # what the holder is doing, for the refusal message


class Interactions(Records):
    def __init__(self, redis: Redis, prefix: str) -> None:
        super().__init__(redis, Keys(prefix))
        self._leases = Leases(redis)

    async def claim(self, interaction_id: str) -> str | None:
        """None for the first delivery, or its claiming attempt; else its answer or IN_PROGRESS."""
        key = self.keys.interaction(interaction_id[:200])
        mine = f"{IN_PROGRESS} {attempt.get()}" if attempt.get() else IN_PROGRESS
        if await self._leases.claim_once(key, INTERACTION_MEMORY_S * 1000, mine):
            return None
        previous = str(await self._redis.get(key) or IN_PROGRESS)
        if previous == mine and mine != IN_PROGRESS:
            return None
        return IN_PROGRESS if previous.startswith(IN_PROGRESS) else previous

    async def answered(self, interaction_id: str, answer: str) -> None:
        key = self.keys.interaction(interaction_id[:200])
        await self._redis.set(key, answer, ex=INTERACTION_MEMORY_S)

    async def lock(self, incident_id: str, what: str, *, doing: str, ttl_s: float) -> Lock | Held:
        key = self.keys.action_lock(incident_id, what)
        lease = await self._leases.try_acquire(key, int(ttl_s * 1000), note=doing)
        if lease is not None:
            return Lock(self._leases, lease)
        held = await self._leases.holder_note(key)
        return Held("something" if held is None else held)


@dataclass(frozen=True)
class Lock:
    """A held action lock: `release()` when the action failed, `keep(s, note)` for a cooldown."""

    leases: Leases
    lease: Lease

    async def release(self) -> None:
        await self.leases.release(self.lease)

    async def keep(self, seconds: float, note: str) -> None:
        """Hold the lock `seconds` longer as a cooldown; `note` is what a refusal then says."""
        if (kept_ms := int(seconds * 1000)) > 0:
            await self.leases.keep(self.lease, kept_ms, note)
        else:
            await self.leases.release(self.lease)
