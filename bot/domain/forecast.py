"""How many more runners would drain a queue: the number the scale modal and diagnostics offer.

With a job duration D (minutes), each added runner finishes about T / D queued jobs within the
target time T; meanwhile the queue grows by (arrivals − completions) per minute. So the runners
that drain Q queued jobs within T are

    ceil((Q + max(arrival − completion, 0) × T) × D / T)

Without a job duration (the alert carries only the queue), the answer falls back to one runner per
queued job, which is what PyTorch's own scale-up-chron asks its autoscaler for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bot.domain.units import minutes, number

DRAIN_TARGET_MINS = 30.0


@dataclass(frozen=True)
class Recommendation:
    runners: int
    why: str


def runners_to_drain(
    queued: float | None,
    *,
    job_duration_mins: float | None = None,
    arrival_per_min: float | None = None,
    completion_per_min: float | None = None,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Recommendation | None:
    """Extra runners that would drain `queued` jobs within `within_mins`; None when nothing
    queues (or nothing is known)."""
    if queued is None or queued <= 0:
        return None
    if job_duration_mins is None or job_duration_mins <= 0:
        return Recommendation(
            math.ceil(queued), "one runner per queued job: the job duration is not known"
        )
    growth = 0.0
    if arrival_per_min is not None and completion_per_min is not None:
        growth = max(arrival_per_min - completion_per_min, 0.0)
    backlog = queued + growth * within_mins
    runners = max(math.ceil(backlog * job_duration_mins / within_mins), 1)
    why = (
        f"drains {number(queued)} queued jobs of ~{minutes(job_duration_mins)} "
        f"in {minutes(within_mins)}"
    )
    if growth:
        why += f" while the queue grows {growth:.1f} jobs/min"
    return Recommendation(runners, why)


@dataclass(frozen=True)
class Outlook:
    """Where one runner type's queue is heading, and what it would take to drain it.

    `growth_per_min` is the queue's net change per minute: arrivals minus completions when the
    backend knows both, else the slope of the recent readings. When the queue shrinks, it drains
    in Q / −growth minutes; when it grows (or holds), `runners_to_drain` says how many more
    runners would drain it within the target time.
    """

    queued: float
    growth_per_min: float | None
    drain_mins: float | None = None
    runners: int | None = None
    within_mins: float = DRAIN_TARGET_MINS

    @property
    def text(self) -> str:
        growth = self.growth_per_min
        if growth is None:
            if self.runners:
                return f"~+{self.runners} runners to drain in {minutes(self.within_mins)}"
            return ""
        if growth < -STEADY_PER_MIN and self.drain_mins is not None:
            return f"draining ~{-growth:.1f} jobs/min → ~{_eta(self.drain_mins)}"
        head = f"growing +{growth:.1f} jobs/min" if growth > STEADY_PER_MIN else "holding steady"
        if self.runners:
            return f"{head}: ~+{self.runners} runners to drain in {minutes(self.within_mins)}"
        return head

    @property
    def clears_in(self) -> str:
        """When a draining queue should be empty ("12 min"); "" unless it drains."""
        growth = self.growth_per_min
        if growth is None or growth >= -STEADY_PER_MIN or self.drain_mins is None:
            return ""
        return _eta(self.drain_mins)


# Changes smaller than this per minute read as "steady": noise of a few jobs over an hour.
STEADY_PER_MIN = 0.05


def outlook(
    queued: float | None,
    *,
    arrival_per_min: float | None = None,
    completion_per_min: float | None = None,
    slope_per_min: float | None = None,
    job_duration_mins: float | None = None,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Outlook | None:
    """The outlook of a queue of `queued` jobs; None when nothing queues."""
    if queued is None or queued <= 0:
        return None
    if arrival_per_min is not None and completion_per_min is not None:
        growth: float | None = arrival_per_min - completion_per_min
    else:
        growth = slope_per_min
    if growth is not None and growth < -STEADY_PER_MIN:
        return Outlook(queued, growth, drain_mins=queued / -growth, within_mins=within_mins)
    advice = runners_to_drain(
        queued,
        job_duration_mins=job_duration_mins,
        arrival_per_min=max(growth or 0.0, 0.0),
        completion_per_min=0.0,
        within_mins=within_mins,
    )
    return Outlook(
        queued, growth, runners=advice.runners if advice else None, within_mins=within_mins
    )


def _eta(mins: float) -> str:
    if mins < 1:
        return "under a minute"
    if mins < 90:
        return f"{math.ceil(mins)} min"
    return f"{mins / 60:.1f} h"
