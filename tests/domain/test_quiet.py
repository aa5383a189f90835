"""Quiet status: which changes are worth a new reply."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerts import QueueNumbers, RunnerQueue
from bot.domain.incidents import Snapshot, is_meaningful

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def snap(minutes: int = 0, **types: tuple[float | None, float | None]) -> Snapshot:
    runner_types = {name: RunnerQueue(q, w) for name, (q, w) in types.items()}
    queued = [q for q, _ in types.values() if q is not None]
    waits = [w for _, w in types.values() if w is not None]
    numbers = QueueNumbers(
        max_queue_time_mins=max(waits) if waits else None,
        max_queue_size=sum(queued) if queued else None,
    )
    return Snapshot(at=T0 + timedelta(minutes=minutes), numbers=numbers, runner_types=runner_types)


@pytest.mark.parametrize(
    ("before", "after", "meaningful"),
    [
        (None, snap(gpu=(14, 114)), True),  # the first status always posts
        (snap(gpu=(14, 114)), snap(gpu=(14, 114)), False),  # the same
        (snap(gpu=(14, 114)), snap(gpu=(15, 118)), False),  # noise: +1 job, +4 min
        (snap(gpu=(14, 114)), snap(gpu=(19, 114)), True),  # +5 jobs, +36%
        (snap(gpu=(40, 60)), snap(gpu=(44, 60)), False),  # +4 jobs but only 9%
        (snap(gpu=(14, 60)), snap(gpu=(14, 85)), True),  # +25 min of wait
        (snap(gpu=(14, 114)), snap(gpu=(14, 114), cpu=(3, 12)), True),  # a type starts queueing
        (snap(gpu=(14, 114), cpu=(3, 12)), snap(gpu=(14, 114)), True),  # one stops
        (snap(gpu=(14, 114)), snap(gpu=(0, 0)), True),  # drained
        (snap(gpu=(14, None)), snap(gpu=(14, 30)), True),  # a number became known
    ],
)
def test_a_change_is_meaningful_when_people_would_act_on_it(
    before: Snapshot | None, after: Snapshot, meaningful: bool
) -> None:
    assert is_meaningful(before, after) is meaningful


def test_a_slow_drift_adds_up_against_the_last_posted_status() -> None:
    posted = snap(gpu=(10, 30))
    drifted = [snap(i, gpu=(10 + i, 30)) for i in range(1, 6)]
    verdicts = [is_meaningful(posted, s) for s in drifted]
    # 13 is +3 but 23%; 14 is +4 and 29%: both steps met.
    assert verdicts == [False, False, False, True, True]
