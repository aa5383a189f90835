"""The one way queuepilot paces calls against a limit kept per app, in this process's memory: only
the leader does the work (`bot.leader`), so its memory is where the app's budget lives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Pacing:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held_until: dict[str, float] = {}
        self._next_slot: dict[str, float] = {}

    def hold(self, method: str, seconds: float) -> None:
        """A 429: calls of `method` wait `seconds` (a longer hold already running stays)."""
        until = self._clock() + max(seconds, 0.0)
        self._held_until[method] = max(self._held_until.get(method, 0.0), until)

    def held_for(self, method: str) -> float:
        return max(self._held_until.get(method, 0.0) - self._clock(), 0.0)

    async def wait_for_slot(
        self, method: str, interval_ms: int, *, within_s: float | None = None
    ) -> float:
        """Wait out any hold, then take the slot (none when `interval_ms` is 0) and answer 0.
        With `within_s`, refuse rather than wait past it, answering how far away the slot is: a
        caller with other work does that instead."""
        deadline = None if within_s is None else self._clock() + within_s
        while True:
            now = self._clock()
            slot_at = self._next_slot.get(method, 0.0) if interval_ms > 0 else 0.0
            wait_s = max(self._held_until.get(method, 0.0) - now, slot_at - now, 0.0)
            if wait_s <= 0:
                if interval_ms > 0:
                    self._next_slot[method] = now + interval_ms / 1000
                return 0.0
            if deadline is not None and now + wait_s > deadline:
                return wait_s
            await asyncio.sleep(wait_s)
