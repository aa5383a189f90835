"""The two ways queuepilot waits: after a failure (backoff), and for a limit (pacing).

Backoff uses "equal jitter" (AWS's "Exponential Backoff And Jitter"): half the step plus a random
share of the other half, so loops that failed together come back spread out and a failing loop
never spins. Pacing lives in the leader's memory, the one process that calls (and in each
replica's, for the GitHub deliveries it takes in: `bot.intake.delivery_limits`). The history
methods' tier depends on how the app is distributed, so a 429 soon after an answered call tells
how far apart their calls must be; other methods' tiers are known: a 429 holds, not spaces them."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

Draw = Callable[[], float]


def step_after(failures: int, *, first: float, maximum: float) -> float:
    """The exponential step after `failures` failures in a row: `first`, doubling, capped."""
    return min(first * 2 ** min(max(failures, 1) - 1, 64), maximum)


def wait_after(failures: int, *, first: float, maximum: float, draw: Draw = random.random) -> float:
    """For a count kept elsewhere (in Redis): between half the step and the step."""
    step = step_after(failures, first=first, maximum=maximum)
    return step / 2 + step / 2 * draw()


class Backoff:
    def __init__(self, maximum: float, *, first: float = 0.5, draw: Draw = random.random) -> None:
        self._first = min(first, maximum)
        self._max = maximum
        self._draw = draw
        self._failures = 0

    def next(self) -> float:
        self._failures += 1
        return wait_after(self._failures, first=self._first, maximum=self._max, draw=self._draw)

    def reset(self) -> None:
        self._failures = 0


# Slack's tiers count calls a minute: no method needs its calls further apart, and a 429 long
# after an answered call (another reader used the budget) says no more.
MAX_SPACING_S = 60.0
# Tier 3 for an internal app, a call a minute for a distributed one, which the app cannot ask.
LEARNED = frozenset({"conversations.history", "conversations.replies"})
# Answered calls in a row after which a learned spacing is forgotten (another reader's burst is
# not the app's pace for good); a Tier 1 app meets one 429 that often.
FORGET_AFTER = 10


class Pacing:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held_until: dict[str, float] = {}
        self._next_slot: dict[str, float] = {}
        self._answered_at: dict[str, float] = {}  # sending time of the last answered call
        self._spacing: dict[str, float] = {}  # learned from 429s
        self._answered_run: dict[str, int] = {}  # since the last 429

    def now(self) -> float:
        return self._clock()

    def hold(self, method: str, seconds: float) -> None:
        """A 429: calls of `method` wait `seconds` (a longer hold already running stays)."""
        until = self._clock() + max(seconds, 0.0)
        self._held_until[method] = max(self._held_until.get(method, 0.0), until)

    def held_for(self, method: str) -> float:
        return max(self._held_until.get(method, 0.0) - self._clock(), 0.0)

    def answered(self, method: str, sent_at: float) -> None:
        """The mark a next 429 measures a learned pace from (`sent_at`: this clock's). At a
        learned pace the next call waits a whole spacing from this answer, not from the sending:
        Slack counted the call somewhere in between, and a slow network or a busy Slack would
        otherwise bring the next one a little early (a 429, and a second's hold or more)."""
        if method not in LEARNED:
            return
        self._answered_at[method] = max(self._answered_at.get(method, 0.0), sent_at)
        run = self._answered_run[method] = self._answered_run.get(method, 0) + 1
        if run >= FORGET_AFTER:
            self._spacing.pop(method, None)
        elif spacing := self._spacing.get(method):
            slot = self._clock() + spacing
            self._next_slot[method] = max(self._next_slot.get(method, 0.0), slot)

    def refused(self, method: str, retry_after_s: float) -> None:
        """A 429: a history method's calls are from now on at least as far apart as the last
        answered one was from the hold's end, when within `MAX_SPACING_S`."""
        self.hold(method, retry_after_s)
        self._answered_run[method] = 0
        answered = self._answered_at.get(method)
        if method not in LEARNED or answered is None:
            return
        apart = self._held_until[method] - answered
        if apart <= MAX_SPACING_S:
            self._spacing[method] = max(self._spacing.get(method, 0.0), apart)

    def spacing_s(self, method: str) -> float:
        """As `method`'s 429s told; 0 when none did."""
        return self._spacing.get(method, 0.0)

    def slot_in(self, key: str, interval_s: float, burst: int = 1) -> float:
        """Seconds until `key` may be called (0: now): its hold waited out, then `burst` calls
        at once at most and one more each interval (`interval_s`, or a 429's wider spacing)."""
        now = self._clock()
        interval_s = max(interval_s, self._spacing.get(key, 0.0))
        slot_at = self._next_slot.get(key, 0.0) - (burst - 1) * interval_s if interval_s > 0 else 0
        return max(self._held_until.get(key, 0.0) - now, slot_at - now, 0.0)

    def take(self, key: str, interval_s: float, burst: int = 1) -> None:
        """Use a slot of `key`; the first after a hold ends spends the burst (one call, then the
        usual pace, so the end of a hold brings no burst)."""
        interval_s = max(interval_s, self._spacing.get(key, 0.0))
        if interval_s <= 0:
            return
        now = self._clock()
        held = self._held_until.get(key)
        floor = now if held is None else max(now, held + (burst - 1) * interval_s)
        self._next_slot[key] = max(self._next_slot.get(key, 0.0), floor) + interval_s

    async def wait_for_slot(
        self, method: str, interval_ms: int, *, within_s: float | None = None
    ) -> float:
        """Wait out any hold, take the slot and answer 0; with `within_s`, answer how far away
        the slot is rather than wait past it, for a caller with other work."""
        deadline = None if within_s is None else self._clock() + within_s
        while wait_s := self.slot_in(method, interval_ms / 1000):
            if deadline is not None and self._clock() + wait_s > deadline:
                return wait_s
            await asyncio.sleep(wait_s)
        self.take(method, interval_ms / 1000)
        return 0.0
