"""The one way queuepilot backs off after a failure, so "how long after the third failure" has one
answer everywhere. Where the other side names a time (`Retry-After`, GitHub's quota reset), the
caller waits that instead."""

from __future__ import annotations


def wait_after(failures: int, *, first: float, maximum: float) -> float:
    """The wait after `failures` failures in a row, for a count kept elsewhere (in Redis)."""
    return min(first * 2 ** min(max(failures, 1) - 1, 64), maximum)


class Backoff:
    def __init__(self, maximum: float, *, first: float = 0.5) -> None:
        self._first = min(first, maximum)
        self._max = maximum
        self._failures = 0

    def next(self) -> float:
        self._failures += 1
        return wait_after(self._failures, first=self._first, maximum=self._max)

    def reset(self) -> None:
        self._failures = 0
