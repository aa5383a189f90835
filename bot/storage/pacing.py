"""Slack's app-wide limits in Redis, shared by every replica: one mechanism for all of them.

- a hold: Slack answered a method with 429 and `Retry-After`; every replica's calls of that
  method wait that long (a key that expires with the hold), so no replica earns the next 429;
- a slot: a method Slack limits per app (`chat.update`, the history reads) is called at most
  once per `interval_ms` on any replica (the slot is claimed once, `Leases.claim_once`, for
  that long).

`wait_for_slot` waits out the one and takes the other: every caller of a paced method, the
channel senders' edits and the gateway's lookups alike, takes its turn here, so waiters spread
over the slots instead of all calling the instant a hold ends and all but one being refused.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from bot.storage.keys import Keys
from bot.storage.leases import Leases

# A slot that expired between the failed claim and its PTTL: look again shortly, not at once.
_SHORTEST_WAIT_MS = 10


@dataclass(frozen=True)
class Turn:
    """What waiting for a slot came to: `taken`, or refused because waiting would outlast the
    caller's deadline, when the slot may come in about `retry_after_s` (a 429's own answer)."""

    taken: bool
    retry_after_s: float = 0.0


class Pacing:
    """Holds and slots per Slack method, for every replica; see the module docstring."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._leases = Leases(redis)

    async def hold(self, method: str, seconds: float) -> None:
        """Slack said 429: every replica's calls of `method` wait `seconds`."""
        until_ms = int((time.time() + seconds) * 1000)
        await self._redis.set(
            self._keys.hold(method), str(until_ms), px=max(int(seconds * 1000), 1)
        )

    async def held_for(self, method: str) -> float:
        """Seconds left of a hold on `method` (0 when none)."""
        remaining_ms = await self._redis.pttl(self._keys.hold(method))
        return max(remaining_ms, 0) / 1000

    async def wait_for_slot(
        self, method: str, interval_ms: int, *, within_s: float | None = None
    ) -> Turn:
        """Wait out any hold on `method`, then take its app-wide slot for `interval_ms` (none to
        take when 0: the hold alone paces it). With `within_s`, refuse rather than wait past
        that deadline: a caller with other work (the channel's posts, a click's answer) does it
        instead of waiting out a long hold."""
        deadline = None if within_s is None else time.monotonic() + within_s
        while True:
            wait_s = await self.held_for(method)
            if wait_s <= 0:
                if await self._take(method, interval_ms):
                    return Turn(taken=True)
                wait_s = await self._slot_left_s(method)
            if deadline is not None and time.monotonic() + wait_s > deadline:
                return Turn(taken=False, retry_after_s=wait_s)
            await asyncio.sleep(wait_s)

    async def _take(self, method: str, interval_ms: int) -> bool:
        if interval_ms <= 0:
            return True
        return await self._leases.claim_once(self._keys.slot(method), interval_ms)

    async def _slot_left_s(self, method: str) -> float:
        return max(await self._redis.pttl(self._keys.slot(method)), _SHORTEST_WAIT_MS) / 1000
