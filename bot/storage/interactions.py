"""What makes a responder's action happen once: an interaction is claimed and its answer kept, so
a delivery arriving twice gets the same answer; an action on an incident is locked while its
backend call runs, then kept for a cooldown where asked."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from redis.asyncio import Redis

from bot.storage.keys import Keys
from bot.storage.leases import Lease, Leases

INTERACTION_MEMORY_S = 3600
IN_PROGRESS = "\x00in-progress"

# The requests stream's entry the running task performs, "" elsewhere: each entry runs in a task
# of its own, and the actions in between need not carry it.
attempt: ContextVar[str] = ContextVar("attempt", default="")


@dataclass(frozen=True)
class Held:
    what: str  # what the holder is doing, for the refusal message


class Interactions:
    def __init__(self, redis: Redis, prefix: str) -> None:
        self._redis = redis
        self._keys = Keys(prefix)
        self._leases = Leases(redis)

    async def claim(self, interaction_id: str) -> str | None:
        """None for the first delivery, or its claiming attempt; else its answer or IN_PROGRESS."""
        key = self._keys.interaction(interaction_id[:200])
        mine = f"{IN_PROGRESS} {attempt.get()}" if attempt.get() else IN_PROGRESS
        if await self._leases.claim_once(key, INTERACTION_MEMORY_S * 1000, mine):
            return None
        previous = str(await self._redis.get(key) or IN_PROGRESS)
        if previous == mine and mine != IN_PROGRESS:
            return None
        return IN_PROGRESS if previous.startswith(IN_PROGRESS) else previous

    async def answered(self, interaction_id: str, answer: str) -> None:
        key = self._keys.interaction(interaction_id[:200])
        await self._redis.set(key, answer, ex=INTERACTION_MEMORY_S)

    async def lock(self, incident_id: str, what: str, *, doing: str, ttl_s: float) -> Lock | Held:
        key = self._keys.action_lock(incident_id, what)
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
        kept_ms = int(seconds * 1000)
        if kept_ms > 0:
            await self.leases.keep(self.lease, kept_ms, note)
        else:
            await self.leases.release(self.lease)
