"""What makes a responder's action happen once: its interaction remembered, its kind locked.

Two guards, both in Redis so every replica sees them:
- an interaction (a click's `action_ts`, a modal's view ID, a command's `trigger_id`) is claimed
  before anything is done and its answer kept, so the same delivery arriving twice (a proxy's
  retry, a second replica) does nothing more and gets the same answer;
- an action kind on an incident (its silence, one runner type's scale-up) is locked while the
  backend call runs, then kept for a cooldown where one is asked for, so two people (or one
  person with two modals) acting at once make one silence and one scale-up, not two.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from redis.asyncio import Redis

from bot.storage.keys import Keys

INTERACTION_MEMORY_S = 3600
IN_PROGRESS = "\x00in-progress"

# Releases a lock only for its holder: a lock that expired and was taken by someone else stays.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if tonumber(ARGV[2]) > 0 then
    return redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2]) and 1
  end
  return redis.call('DEL', KEYS[1])
end
return 0
"""


@dataclass(frozen=True)
class Held:
    """A lock someone else holds: what they are doing, for the refusal message."""

    what: str


class Interactions:
    def __init__(self, redis: Redis, prefix: str) -> None:
        self._redis = redis
        self._keys = Keys(prefix)
        self._release = redis.register_script(_RELEASE)

    async def claim(self, interaction_id: str) -> str | None:
        """None for the first delivery of this interaction; else its answer (or IN_PROGRESS)."""
        key = self._keys.interaction(interaction_id[:200])
        if await self._redis.set(key, IN_PROGRESS, nx=True, ex=INTERACTION_MEMORY_S):
            return None
        return str(await self._redis.get(key) or IN_PROGRESS)

    async def answered(self, interaction_id: str, answer: str) -> None:
        key = self._keys.interaction(interaction_id[:200])
        await self._redis.set(key, answer, ex=INTERACTION_MEMORY_S)

    async def lock(self, incident_id: str, what: str, *, doing: str, ttl_s: float) -> Lock | Held:
        """Take the lock of `what` on the incident for `ttl_s`, or say who holds it."""
        key = self._keys.action_lock(incident_id, what)
        token = secrets.token_hex(8)
        value = f"{token} {doing}"
        if await self._redis.set(key, value, nx=True, px=max(int(ttl_s * 1000), 1)):
            return Lock(self, key, value)
        held = str(await self._redis.get(key) or " something")
        return Held(held.partition(" ")[2])

    async def _end(self, lock: Lock, *, keep_s: float, note: str) -> None:
        kept = f"{lock.value.partition(' ')[0]} {note}"
        await self._release(keys=[lock.key], args=[lock.value, int(keep_s * 1000), kept])


@dataclass(frozen=True)
class Lock:
    """A held action lock: `release()` when the action failed, `keep(s, note)` for a cooldown."""

    owner: Interactions
    key: str
    value: str

    async def release(self) -> None:
        await self.owner._end(self, keep_s=0, note="")

    async def keep(self, seconds: float, note: str) -> None:
        """Hold the lock `seconds` longer as a cooldown; `note` is what a refusal then says."""
        await self.owner._end(self, keep_s=seconds, note=note)
