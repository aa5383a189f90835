"""The one way queuepilot backs off after a failure: waits that double from `first` up to
`maximum`, and start again from `first` after a success.

Every loop, client or record that retries a failing step uses it (the channel's sender between
Slack or Redis failures; the GitHub client between secondary rate limits; a put-back whose
attempts are kept in Redis), so "how long after the third failure" has one answer. Where the
other side names a time (Slack's and GitHub's `Retry-After`, GitHub's quota reset), the caller
waits that instead.
"""

from __future__ import annotations


def wait_after(failures: int, *, first: float, maximum: float) -> float:
    """The wait after `failures` failures in a row (1 or more): `first`, twice that, … `maximum`.
    For a step whose count of failures is kept elsewhere (a record in Redis)."""
    return min(first * 2 ** min(max(failures, 1) - 1, 64), maximum)


class Backoff:
    """Exponential waits between retries of a failing step, counted in memory."""

    def __init__(self, maximum: float, *, first: float = 0.5) -> None:
        self._first = min(first, maximum)
        self._max = maximum
        self._failures = 0

    def next(self) -> float:
        """The wait before the next try; the one after it doubles."""
        self._failures += 1
        return wait_after(self._failures, first=self._first, maximum=self._max)

    def reset(self) -> None:
        """After a success: the next failure waits `first` again."""
        self._failures = 0
