"""GitHub's deliveries taken by one replica: at most GITHUB_WEBHOOK_RATE a second (a second's worth
at once) and GITHUB_WEBHOOK_CONCURRENCY at once, decided in memory before the body is read or Redis
is asked: the endpoint shares its event loop with Slack's, which must be answered within 3 s."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from bot.pacing import Pacing

log = logging.getLogger(__name__)

RATE = "github webhook"
SUMMARY = "github webhook refusals"
# A line per refusal would be a flood of its own, costing the loop the limits protect; a summary
# a minute says as much to the person reading the log (the counter counts each at once).
SUMMARY_EVERY_S = 60.0


@dataclass(frozen=True)
class OverLimit:
    status: int  # 429 over the rate, 503 with the concurrency in progress
    reason: str  # the counter's outcome
    retry_after_s: int
    message: str


class DeliveryLimits:
    def __init__(self, rate: float, concurrency: int, *, pacing: Pacing | None = None) -> None:
        self._interval_s = 1 / rate
        self._burst = max(1, int(rate))  # a second's worth
        self._rate = rate
        self._concurrency = concurrency
        self._pacing = pacing or Pacing()
        self._in_progress = 0
        self._unlogged = {"rate_limited": 0, "busy": 0}
        self._unlogged_since = 0.0

    def admit(self) -> OverLimit | None:
        """None: the delivery is taken, and `done()` must follow its answer; else why not."""
        wait_s = self._pacing.slot_in(RATE, self._interval_s, self._burst)
        if wait_s > 0:
            message = (
                f"over GITHUB_WEBHOOK_RATE: this replica takes {self._rate:g} deliveries a "
                "second at most; redeliver it later"
            )
            return self._refused(OverLimit(429, "rate_limited", max(1, math.ceil(wait_s)), message))
        if self._in_progress >= self._concurrency:
            message = (
                f"GITHUB_WEBHOOK_CONCURRENCY: {self._concurrency} deliveries are in progress "
                "on this replica; redeliver it later"
            )
            return self._refused(OverLimit(503, "busy", 1, message))
        self._pacing.take(RATE, self._interval_s, self._burst)
        self._in_progress += 1
        return None

    def done(self) -> None:
        self._in_progress -= 1

    def _refused(self, refusal: OverLimit) -> OverLimit:
        now = self._pacing.now()
        if not any(self._unlogged.values()):
            self._unlogged_since = now
        self._unlogged[refusal.reason] += 1
        # The refusals after a summary are in the next one, at the next refusal a minute on.
        if self._pacing.slot_in(SUMMARY, SUMMARY_EVERY_S) == 0:
            self._pacing.take(SUMMARY, SUMMARY_EVERY_S)
            log.warning(
                "github webhook: deliveries refused in the last %.0f s: %d over "
                "GITHUB_WEBHOOK_RATE (%g a second, 429), %d with GITHUB_WEBHOOK_CONCURRENCY "
                "(%d) in progress (503); said once a minute at most",
                now - self._unlogged_since,
                self._unlogged["rate_limited"],
                self._rate,
                self._unlogged["busy"],
                self._concurrency,
            )
            self._unlogged = dict.fromkeys(self._unlogged, 0)
        return refusal
