"""What a runner type's queue cost over the report's window, from the history's series a step
apart: the job-hours waited, when in the week, the share at the maximum, and what a raise of its
maximum or minimum would have served. By Little's law the time jobs spent queued is the queue's
integral over time, as exact as the series: a queue that forms and drains within a step is missed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

HOURS_OF_WEEK = 7 * 24  # Monday 00 UTC first
Series = Mapping[float, float]  # unix time -> value, one per step


@dataclass(frozen=True)
class Covered:
    """What a recommended raise would have served of the job-hours waited, if each runner it
    adds had taken one queued job a step (so at most the queue itself)."""

    field: str  # "maxRunners" or "minRunners"
    job_hours: float
    of_hours: float

    @property
    def share(self) -> float:
        return self.job_hours / self.of_hours if self.of_hours else 0.0


def job_hours(queued: Series, step_s: float) -> float | None:
    """Σ queued × step, in hours (None: no series to integrate)."""
    if not queued:
        return None
    return sum(max(q, 0.0) for q in queued.values()) * step_s / 3600


def by_hour_of_week(queued: Series, step_s: float) -> tuple[float, ...]:
    """The same integral in 168 buckets, one per UTC weekday and hour (Monday 00 first)."""
    buckets = [0.0] * HOURS_OF_WEEK
    for at, q in queued.items():
        moment = datetime.fromtimestamp(at, UTC)
        buckets[moment.weekday() * 24 + moment.hour] += max(q, 0.0) * step_s / 3600
    return tuple(buckets)


def summed(buckets: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Hour-of-week buckets added up across runner types."""
    return tuple(map(sum, zip(*buckets, strict=True))) if buckets else ()


def at_max(level: Series, maximum: Series) -> set[float]:
    """The steps whose level reached a known, positive maximum."""
    return {
        at
        for at, runners in level.items()
        if (top := maximum.get(at)) is not None and top > 0 and runners >= top
    }


def covered_by_max(
    queued: Series, level: Series, maximum: Series, step_s: float, more: float
) -> float:
    """Job-hours `more` runners above the maximum would have served (infinite: all waited at it)."""
    steps = at_max(level, maximum)
    served = sum(min(max(q, 0.0), more) for at, q in queued.items() if at in steps)
    return served * step_s / 3600


def covered_by_min(queued: Series, level: Series, step_s: float, minimum: float) -> float:
    """Job-hours a minimum of `minimum` warm runners would have served."""
    served = sum(
        min(max(q, 0.0), minimum - runners)
        for at, q in queued.items()
        if (runners := level.get(at)) is not None and runners < minimum
    )
    return served * step_s / 3600
