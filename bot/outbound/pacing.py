"""Pacing for the channel's sender: a token bucket modelled on Slack's limits, and backoff."""

from __future__ import annotations

import json
from contextlib import suppress

# Slack counts from when a call arrives: network jitter can make calls sent exactly one interval
# apart arrive closer than that, and earn a 429. Refilling a little slower keeps a margin.
JITTER_MARGIN = 1.05


class TokenBucket:
    """Posts per channel: `burst` at once at most, refilled one per `interval_s`."""

    def __init__(self, interval_s: float, burst: int, *, now: float) -> None:
        self.interval_s = interval_s * JITTER_MARGIN
        self.burst = burst
        self.tokens = float(burst)
        self.at = now

    def _refill(self, now: float) -> None:
        if now > self.at and self.interval_s > 0:
            self.tokens = min(self.burst, self.tokens + (now - self.at) / self.interval_s)
            self.at = now
        elif self.interval_s <= 0:
            self.tokens = float(self.burst)

    def wait_s(self, now: float) -> float:
        """How long until a post may go out."""
        if now < self.at:
            return self.at - now  # a Retry-After hold
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) * self.interval_s

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1

    def hold(self, until: float) -> None:
        """After a 429: nothing until `until`, then one post, then the usual pace."""
        self.at = max(self.at, until)
        self.tokens = 1.0

    def encode(self) -> str:
        return json.dumps({"tokens": self.tokens, "at": self.at})

    def restore(self, raw: str | None, now: float) -> None:
        """Take over a predecessor's bucket, so a change of sender is not a fresh burst."""
        if not raw:
            return
        with suppress(ValueError, KeyError, TypeError):
            data = json.loads(raw)
            self.tokens = min(float(data["tokens"]), float(self.burst))
            self.at = float(data["at"])
            self._refill(now)


class Backoff:
    """Exponential waits between retries of a failing call: 0.5 s, 1 s, 2 s, … `maximum`."""

    def __init__(self, maximum: float) -> None:
        self._max = maximum
        self._next = 0.5

    def next(self) -> float:
        wait, self._next = self._next, min(self._next * 2, self._max)
        return wait

    def reset(self) -> None:
        self._next = 0.5
