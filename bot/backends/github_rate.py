"""GitHub's primary rate limit as its answers state it (`x-ratelimit-*`), and how often the
readings may spend it: the quota is the token's, shared with the alert's issue and anyone else on
it, so the readings take at most GITHUB_READING_SHARE of the hour."""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WINDOW_S = 3600.0  # GitHub's primary limit is an hour's requests
STEP_S = 15.0  # the intervals tried for a reading, a quarter of a minute apart


@dataclass(frozen=True)
class Rate:
    limit: int
    remaining: int
    reset: float  # epoch seconds


def rate_of(headers: Mapping[str, str]) -> Rate | None:
    """The `core` quota an answer states; None for none, another resource's, or nonsense."""
    resource = headers.get("x-ratelimit-resource", "core")
    numbers = [_count(headers.get(f"x-ratelimit-{name}")) for name in ("limit", "remaining")]
    reset = _count(headers.get("x-ratelimit-reset"))
    limit, remaining = numbers
    if resource != "core" or limit is None or remaining is None or reset is None or limit < 1:
        return None
    return Rate(limit, min(remaining, limit), float(reset))


def reading_pace(
    due: Sequence[float], pages: int, rate: Rate, *, share: float, now: float, shortest: float
) -> tuple[float, int]:
    """Seconds until the next reading, and its predicted cost: the shortest interval (from
    `shortest`, in steps) at which every reading before the reset fits in what the readings may
    still spend (`remaining` less the `1 - share` of the limit kept for the others). A reading T
    from now costs `pages` and a request per run in `due` (ascending) under T: the runs that
    changed in the last T stand for those that will in the next. None fits: wait for the reset."""
    if now >= rate.reset:
        rate = Rate(rate.limit, rate.limit, now + WINDOW_S)  # a new hour, whole
    left = rate.remaining - (1 - share) * rate.limit
    span = rate.reset - now
    every = shortest
    while every < span:
        readings = math.ceil(span / every) - 1  # the reading at the reset starts a new hour
        cost = pages + bisect.bisect_left(due, every)
        if readings * cost <= left:
            return every, cost
        every += STEP_S
    return span, pages + bisect.bisect_left(due, span)


def _count(value: str | None) -> int | None:
    if value is None or not (value.strip().isascii() and value.strip().isdigit()):
        return None
    return int(value.strip())
