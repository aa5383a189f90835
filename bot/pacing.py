"""The one way queuepilot paces calls against a limit kept per app: in the leader's memory.

- a hold: Slack (or GitHub) answered a method with 429 and `Retry-After`; the process's calls
  of that method wait that long, so none earns the next 429;
- a slot: a method limited per app (`chat.update`, the history reads, GitHub's writes) is called
  at most once per `interval_ms`.

One replica does the work (`bot.leader`), so the leader's memory is where the app's budget is
kept: nothing to share with other processes. A follower's own few calls (a modal, an answer to
whoever clicked) pace themselves the same way, in its memory. `wait_for_slot` waits out the one
and takes the other: every caller of a paced method takes its turn here, so waiters spread over
the slots instead of all calling the instant a hold ends and all but one being refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Turn:
    """What waiting for a slot came to: `taken`, or refused because waiting would outlast the
    caller's deadline, when the slot may come in about `retry_after_s` (a 429's own answer)."""

    taken: bool
    retry_after_s: float = 0.0


class Pacing:
    """Holds and slots per method; see the module docstring. The methods are a fixed few, so
    what it keeps stays as small as the set of them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held_until: dict[str, float] = {}
        self._next_slot: dict[str, float] = {}

    def hold(self, method: str, seconds: float) -> None:
        """A 429: calls of `method` wait `seconds` (a longer hold already running stays)."""
        until = self._clock() + max(seconds, 0.0)
        self._held_until[method] = max(self._held_until.get(method, 0.0), until)

    def held_for(self, method: str) -> float:
        """Seconds left of a hold on `method` (0 when none)."""
        return max(self._held_until.get(method, 0.0) - self._clock(), 0.0)

    async def wait_for_slot(
        self, method: str, interval_ms: int, *, within_s: float | None = None
    ) -> Turn:
        """Wait out any hold on `method`, then take its slot for `interval_ms` (none to take
        when 0: the hold alone paces it). With `within_s`, refuse rather than wait past that
        deadline: a caller with other work (the channel's posts, a click's answer) does it
        instead of waiting out a long hold."""
        deadline = None if within_s is None else self._clock() + within_s
        while True:
            now = self._clock()
            slot_at = self._next_slot.get(method, 0.0) if interval_ms > 0 else 0.0
            wait_s = max(self._held_until.get(method, 0.0) - now, slot_at - now, 0.0)
            if wait_s <= 0:
                if interval_ms > 0:
                    self._next_slot[method] = now + interval_ms / 1000
                return Turn(taken=True)
            if deadline is not None and now + wait_s > deadline:
                return Turn(taken=False, retry_after_s=wait_s)
            await asyncio.sleep(wait_s)
