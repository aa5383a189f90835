"""Whether an incident's queue is still live: what a Resolve by hand asks about once more.

A responder who resolves while jobs still queue over the alert's thresholds closes an incident
the alert will open again; they may know better (a stuck alert), so they are asked once, with the
numbers, not refused. The numbers are the root's (`headline`): the live reading's while it
shows one, else the alert's. Against the alert's thresholds where it states them; where its rule
only says whether each was crossed (PyTorch's, `QueueNumbers.queue_size_over`), a number counts
as over when the rule said so and jobs still queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bot.domain.alerts import RunnerQueue
from bot.domain.fleet import RunnerTypeMetrics
from bot.domain.headline import Headline, headline
from bot.domain.incidents import Incident
from bot.domain.units import number


@dataclass(frozen=True)
class StillLive:
    """What is still over the alert's thresholds. `queued` is the headline's jobs queued, when
    they are over (`queued_threshold` None: the rule said crossed without saying where; `per_type`:
    the total adds several runner types' queues, while the rule holds each type's to it); the
    wait likewise."""

    queued: float | None = None
    queued_threshold: float | None = None
    per_type: bool = False
    wait: str = ""  # as the root says it: "the longest wait 114 min"
    wait_threshold: float | None = None

    @property
    def jobs(self) -> str:
        """ "11 jobs still queued", or "" when the queue is not over."""
        if self.queued is None:
            return ""
        return f"{number(self.queued)} job{'' if self.queued == 1 else 's'} still queued"

    @property
    def text(self) -> str:
        """ "11 jobs still queued, the longest wait 114 min": plain, without the thresholds."""
        return ", ".join(part for part in (self.jobs, self.wait) if part)


def still_live(incident: Incident) -> StillLive | None:
    """What of the open incident's latest numbers is over the alert's thresholds; None when
    nothing is (or it resolved, or no number or threshold is known)."""
    head = headline(incident)
    if not incident.is_open or head.worst or head.queued == 0:
        return None  # nothing queues: a wait left is a start's, not a job still waiting
    numbers, peak = incident.numbers, incident.peak
    size_limit = _first(numbers.queue_size_threshold, peak.queue_size_threshold)
    time_limit = _first(numbers.queue_time_threshold, peak.queue_time_threshold)
    queues = [q.queued for q in _types(incident, head) if q.queued is not None]
    largest = max(queues, default=head.queued)
    queued_over = _over(largest, size_limit, numbers.queue_size_over)
    wait_over = _over(head.wait_mins, time_limit, numbers.queue_time_over)
    if not queued_over and not wait_over:
        return None
    return StillLive(
        queued=head.queued if queued_over else None,
        queued_threshold=size_limit,
        per_type=len(queues) > 1,
        wait=f"the {head.wait}" if wait_over else "",
        wait_threshold=time_limit,
    )


def _types(incident: Incident, head: Headline) -> Iterable[RunnerQueue | RunnerTypeMetrics]:
    """The runner types the headline's queued jobs add up."""
    return head.live.runner_types.values() if head.live else incident.runner_types.values()


def _over(value: float | None, threshold: float | None, said_over: bool | None) -> bool:
    if value is None:
        return False
    if threshold is not None:
        return value > threshold
    return bool(said_over) and value > 0


def _first(*values: float | None) -> float | None:
    return next((value for value in values if value is not None), None)
