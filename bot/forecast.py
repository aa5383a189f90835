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
    why = f"drains {queued:g} queued jobs of ~{job_duration_mins:g} min in {within_mins:g} min"
    if growth:
        why += f" while the queue grows {growth:.1f} jobs/min"
    return Recommendation(runners, why)
