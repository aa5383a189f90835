"""The longest wait (the oldest queued job's age) and the slowest recent start (ARC's startup
histogram) kept apart from the reading on: the status's numbers, a runner type's peak and what
makes a status news each hold one measure, never the larger of the two."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import DrainRule, Snapshot, is_material, peak_types_of
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from tests.support.incidents import make_incident

T0 = datetime(2026, 11, 25, 12, tzinfo=UTC)
CPU, GPU = "linux.2xlarge", "linux.g5.4xlarge.nvidia.gpu"
DRAIN = DrainRule(max_queued=0, max_wait_mins=5)


def test_a_reading_keeps_the_oldest_jobs_age_and_the_slowest_start_apart() -> None:
    view = FleetSnapshot(
        at=T0,
        source="prometheus",
        runner_types={
            CPU: RunnerTypeMetrics(queued=4, longest_wait_mins=2),
            GPU: RunnerTypeMetrics(queued=3, longest_wait_mins=9, wait_of_starts=True),
        },
    )

    numbers = as_snapshot(make_incident(), view, T0).numbers

    assert (numbers.max_queue_time_mins, numbers.slowest_start_mins) == (2, 9)


def test_a_types_peak_wait_is_its_oldest_jobs_age_once_read_never_a_longer_start() -> None:
    started = RunnerQueue(queued=2, longest_wait_mins=3, wait_of_starts=True)
    aged = RunnerQueue(queued=5, longest_wait_mins=1)
    later = RunnerQueue(queued=1, longest_wait_mins=8, wait_of_starts=True)

    peak = peak_types_of({}, {GPU: started})
    peak = peak_types_of(peak, {GPU: aged})
    peak = peak_types_of(peak, {GPU: later})

    assert peak[GPU] == RunnerQueue(queued=5, longest_wait_mins=1)


def test_the_slowest_start_crossing_the_threshold_is_news_as_the_wait_is() -> None:
    limit = {"queue_time_threshold": 30}
    before = Snapshot(at=T0, numbers=QueueNumbers(slowest_start_mins=10, **limit))
    after = Snapshot(at=T0, numbers=QueueNumbers(slowest_start_mins=50, **limit))

    assert is_material(before, after, DRAIN)
