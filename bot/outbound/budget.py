"""A channel's budget with Slack: when its sender may post, when it may edit, and how long to wait.

One object holds every rule of Slack's pace the sender obeys, so no stage paces on its own; one
budget per Slack limit, each kept in one place:
- the channel's posts (about one message a second per channel, with short bursts): a token
  bucket, in process; the sender is the channel's one poster, so the bucket is its alone, and a
  successor takes it over (`encode`/`restore`) so a change of sender is not a fresh burst;
- the app's edits (`chat.update` is limited per workspace): the app-wide slot (`bot.pacing`, in
  the leader's memory), shared by every channel, at most one per `update_interval_ms`;
- 429 holds: a `Retry-After`, which the gateway records (`bot.pacing`); edits wait it out in
  their slot, and a held post also holds the channel's bucket, so the hold never ends in a
  burst.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import suppress

from bot.outbound.gateway import SlackError
from bot.pacing import Pacing

# Slack counts from when a call arrives: network jitter can make calls sent exactly one interval
# apart arrive closer than that, and earn a 429. Refilling a little slower keeps a margin.
JITTER_MARGIN = 1.05

# The calls that spend a post: a message, or a file shared into a thread.
POST_METHODS = frozenset({"chat.postMessage", "files.completeUploadExternal"})


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


class Budget:
    """One channel's pace with Slack; see the module docstring."""

    def __init__(
        self,
        pacing: Pacing,
        *,
        post_interval_s: float,
        post_burst: int,
        update_interval_ms: int,
    ) -> None:
        self._pacing = pacing
        self._update_interval_ms = update_interval_ms
        self._bucket = TokenBucket(post_interval_s, post_burst, now=time.time())

    async def take_over(self, predecessor: str | None) -> None:
        """Start from where the channel's previous sender left its bucket, and from a 429 it
        got and did not live to record."""
        now = time.time()
        self._bucket.restore(predecessor, now)
        held = self._pacing.held_for("chat.postMessage")
        if held > 0:
            self._bucket.hold(now + held)

    async def post_slot(self) -> None:
        """Wait until a post may go out (it is spent by `spend_post`, as the call is made)."""
        wait = self._bucket.wait_s(time.time())
        if wait > 0:
            await asyncio.sleep(wait)

    def spend_post(self) -> None:
        self._bucket.take(time.time())

    async def edit_slot(self, *, within_s: float | None = None) -> None:
        """Wait for, and take, the workspace's `chat.update` slot, after any hold on it. With
        `within_s`, give up rather than wait longer, with the error a 429 would raise: the
        posts' path must not wait out an edit's hold."""
        turn = await self._pacing.wait_for_slot(
            "chat.update", self._update_interval_ms, within_s=within_s
        )
        if not turn.taken:
            raise SlackError(
                "chat.update", "ratelimited", retryable=True, retry_after=turn.retry_after_s
            )

    def hold(self, exc: SlackError) -> None:
        """A 429 on a post holds the channel's posts for its `Retry-After` (a 429 on an edit
        holds only edits: the gateway keeps that hold, and `edit_slot` waits it out)."""
        if exc.retry_after is not None and exc.method in POST_METHODS:
            self._bucket.hold(time.time() + exc.retry_after)

    def encode(self) -> str:
        """The bucket as a successor would take it over."""
        return self._bucket.encode()
