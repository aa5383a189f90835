"""The one way queuepilot backs off after a failure, so "how long after the third failure" has one
answer everywhere. Where the other side names a time (`Retry-After`, GitHub's quota reset), the
caller waits that instead.

The wait is jittered, "equal jitter" as AWS's Architecture Blog describes it ("Exponential Backoff
And Jitter"): half of the exponential step, plus a random share of the other half. Replicas and
loops that failed together (Redis failing over, Slack or GitHub answering 5xx to everyone) then
come back spread out rather than all at once. Equal rather than full jitter, which draws from
zero up: a wait is never shorter than half its step, so a failing loop never spins, and a wait a
service asks to be at least so long (GitHub's minute after a secondary limit) is kept by asking
for twice it."""

from __future__ import annotations

import random
from collections.abc import Callable

# The share of the step drawn, in [0, 1): `random.random`, or a test's choice.
Draw = Callable[[], float]


def step_after(failures: int, *, first: float, maximum: float) -> float:
    """The exponential step after `failures` failures in a row: `first`, doubling, capped."""
    return min(first * 2 ** min(max(failures, 1) - 1, 64), maximum)


def wait_after(failures: int, *, first: float, maximum: float, draw: Draw = random.random) -> float:
    """The wait after `failures` failures in a row, for a count kept elsewhere (in Redis):
    between half the step and the step, never above `maximum`."""
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
