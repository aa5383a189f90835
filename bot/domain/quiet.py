"""Quiet status: whether a status says something new, or may just edit the previous reply.

At a 10-minute cadence a two-hour incident would post 12 statuses. A change counts when a type
starts or stops queueing, or its queue or wait moved by both a step and a ratio since the last
*posted* status (not the last edit: a slow drift adds up until it counts).
"""

from __future__ import annotations

from bot.domain.alerts import RunnerQueue
from bot.domain.incidents import Snapshot

QUEUED_STEP, QUEUED_RATIO = 3.0, 0.25
WAIT_STEP_MINS, WAIT_RATIO = 10.0, 0.25


def moved(before: float | None, now: float | None, step: float, ratio: float) -> bool:
    """Known on one side only, or changed by both `step` and `ratio` of the larger."""
    if before is None or now is None:
        return (before is None) != (now is None)
    delta = abs(now - before)
    return delta >= step and delta >= ratio * max(abs(before), abs(now))


def is_meaningful(last_posted: Snapshot | None, current: Snapshot) -> bool:
    if last_posted is None:
        return True
    before, now = _queueing(last_posted), _queueing(current)
    if set(before) != set(now):
        return True
    for name, queue in now.items():
        old = before[name]
        if moved(old.queued, queue.queued, QUEUED_STEP, QUEUED_RATIO):
            return True
        if moved(old.longest_wait_mins, queue.longest_wait_mins, WAIT_STEP_MINS, WAIT_RATIO):
            return True
    a, b = last_posted.numbers, current.numbers
    return moved(a.max_queue_size, b.max_queue_size, QUEUED_STEP, QUEUED_RATIO) or moved(
        a.max_queue_time_mins, b.max_queue_time_mins, WAIT_STEP_MINS, WAIT_RATIO
    )


def _queueing(snapshot: Snapshot) -> dict[str, RunnerQueue]:
    return {
        name: queue
        for name, queue in snapshot.runner_types.items()
        if (queue.queued or 0) > 0 or (queue.longest_wait_mins or 0) > 0
    }
