"""The numbers at the head of an incident's root, which `/queue`, the storm digest and a Resolve's
second question repeat: computed once, so no two surfaces disagree."""

from __future__ import annotations

from dataclasses import dataclass

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import Incident, queued_total, thresholds
from bot.domain.reading.fleet import (
    FleetSnapshot,
    RunnerTypeMetrics,
    longest_wait,
    measured,
    of_measure,
)


@dataclass(frozen=True)
class Headline:
    """Queued across the incident's types, the longest wait as it was measured (its minutes None:
    not read; the slowest recent start where no type's oldest job was read), the slowest recent
    start beside an oldest job's age (its own row), and the live reading (or None)."""

    queued: float | None
    wait: RunnerQueue | RunnerTypeMetrics
    live: FleetSnapshot | None = None
    worst: bool = False  # a resolved incident's: the worst seen (its peaks), as its summary says
    start: RunnerQueue | RunnerTypeMetrics | None = None


def shown_live(incident: Incident) -> FleetSnapshot | None:
    live = incident.live
    return live if live is not None and live.is_live and incident.is_open else None


def headline(incident: Incident) -> Headline:
    """The live reading's when it has numbers, else the alert's; a resolved incident, or one
    whose alert's numbers were cleared, says the worst seen, as its summary does."""
    live = shown_live(incident)
    if live is not None:
        types = live.runner_types.values()
        waited, started = (longest_wait(of_measure(types, starts=s)) for s in (False, True))
        queued = [m.queued for m in types if m.queued is not None]
        if waited is not None or started is not None or queued:
            total = sum(queued) if queued else None
            if waited is None:
                return Headline(total, started or RunnerQueue(), live)
            return Headline(total, waited, live, start=started)
    alert = incident.numbers
    total = queued_total(alert, incident.runner_types)
    if incident.is_open and (total is not None or alert.max_queue_time_mins is not None):
        return Headline(total, RunnerQueue(longest_wait_mins=alert.max_queue_time_mins))
    peak, types = incident.peaks.numbers, incident.peaks.types.values()
    wait = measured(peak.max_queue_time_mins, types)
    start = measured(peak.slowest_start_mins, types, starts=True)
    if peak.max_queue_time_mins is None:
        return Headline(peak.max_queue_size, start, worst=True)
    shown = start if peak.slowest_start_mins is not None else None
    return Headline(peak.max_queue_size, wait, worst=True, start=shown)


@dataclass(frozen=True)
class StillLive:
    """What is still over the thresholds when a responder resolves by hand. `queued_threshold`
    None: the rule said crossed, not where; `per_type`: the total adds several types'."""

    queued: float | None = None
    queued_threshold: float | None = None
    per_type: bool = False
    wait: RunnerQueue | RunnerTypeMetrics | None = None  # as the root measured it
    wait_threshold: float | None = None


def still_live(incident: Incident) -> StillLive | None:
    """None when nothing is over or known to be. Where the rule only says whether each was
    crossed (PyTorch's), a number is over when it said so and jobs still queue."""
    head = headline(incident)
    if incident.drain.follow is not None:
        return None  # the alert cleared: resolving only stops following, nothing reopens it
    if not incident.is_open or head.worst or head.queued == 0:
        return None  # nothing queues: a wait left is a start's, not a job still waiting
    numbers = incident.numbers
    size_limit, time_limit = thresholds(incident)
    types = head.live.runner_types.values() if head.live else incident.runner_types.values()
    queues = [q.queued for q in types if q.queued is not None]
    largest = max(queues, default=head.queued)
    queued_over = _over(largest, size_limit, numbers.queue_size_over)
    wait_over = _over(head.wait.longest_wait_mins, time_limit, numbers.queue_time_over)
    if not queued_over and not wait_over:
        return None
    queued, wait = head.queued if queued_over else None, head.wait if wait_over else None
    return StillLive(queued, size_limit, len(queues) > 1, wait, time_limit)


def _over(value: float | None, threshold: float | None, said_over: bool | None) -> bool:
    if value is None:
        return False
    return value > threshold if threshold is not None else bool(said_over) and value > 0
