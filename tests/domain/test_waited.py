"""What the queue cost over the report's window: job-hours waited (the queue summed over time),
when in the week, the share at the maximum, and what a recommended raise would have covered."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import Incident
from bot.domain.queue_cost.waited import (
    by_hour_of_week,
    covered_by_max,
    covered_by_min,
    job_hours,
)
from bot.domain.reading.capacity import TypeHistory, capacity_report
from bot.domain.reading.early_warning import Thresholds
from bot.domain.reading.fleet import RunnerTypeMetrics
from tests.support.fakes.queue_week import MONDAY, simulated

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
WEEK = NOW - timedelta(days=7)
BIG = "linux.2xlarge"
ALERT = Thresholds(queued=10, wait_mins=30)


def series(*values: float | None, step: int = 3600) -> dict[float, float]:
    start = WEEK.timestamp()
    return {start + i * step: v for i, v in enumerate(values) if v is not None}


def test_a_simulated_weeks_job_hours_are_its_jobs_total_wait() -> None:
    week = simulated(MONDAY)
    history = week.history
    assert history is not None
    waited = job_hours(history.queued, history.step_s)
    # Read every 5 minutes, the queue's integral is each job's wait added up, within 10%.
    assert waited == pytest.approx(week.job_hours, rel=0.10), (waited, week.job_hours)
    assert week.job_hours > 100  # a week that queued, not a rounding error
    # The busiest hour of the week is the truth's: Tuesday 16:00 UTC, as the surge (14:00–16:00)
    # leaves the longest queue to drain, not the hour most jobs arrived in.
    buckets = by_hour_of_week(history.queued, history.step_s)
    truth = week.by_hour_mins
    assert len(buckets) == 168
    assert max(range(168), key=buckets.__getitem__) == max(range(168), key=truth.__getitem__)
    assert max(range(168), key=buckets.__getitem__) == 24 + 16
    assert sum(buckets) == pytest.approx(waited)
    # Most of it waited at the maximum (the surge), the rest for runners to boot.
    steps = (history.queued, history.level, history.maximum, history.step_s)
    at_top = covered_by_max(*steps, math.inf)
    assert 0.6 < at_top / waited < 1


def test_the_job_hours_a_raise_of_the_maximum_or_the_minimum_would_have_served() -> None:
    queued = series(10, 4, 0, 6)
    level = series(20, 20, 20, 15)
    maximum = series(20, 20, 20, 20)
    assert job_hours(queued, 3600) == 20
    assert covered_by_max(queued, level, maximum, 3600, math.inf) == 14
    # 5 more runners at the maximum: min(10, 5) + min(4, 5) + 0; the step under it is not theirs.
    assert covered_by_max(queued, level, maximum, 3600, 5) == 9
    # 6 warm runners: where the level was under 6, min(queued, 6 − level).
    warm = series(2, 5, 8, 1)
    assert covered_by_min(queued, warm, 3600, 6) == 4 + 1 + 5
    assert covered_by_max(queued, level, maximum, 1800, 5) == 4.5  # half-hour steps
    assert job_hours({}, 300) is None


def test_a_raise_of_the_maximum_says_the_share_of_the_waiting_it_would_have_covered() -> None:
    busy = TypeHistory(
        step_s=3600,
        queued=series(*[12.0] * 3, *[0.0] * 9),
        level=series(*[20.0] * 12),
        maximum=series(*[20.0] * 12),
        job_mins=10.0,
    )
    (report,) = capacity_report([], {}, since=WEEK, now=NOW, history={BIG: busy}, thresholds=ALERT)
    assert report.recommendation.endswith(
        "raise maxRunners 20 → 24 (drains its peak of 12 queued in 30 min)"
    )
    assert report.waited_hours == 36 and report.share_at_max == 1
    assert report.covered is not None and report.covered.field == "maxRunners"
    # 4 more runners for the 3 hours 12 waited at the maximum: 12 of 36 job-hours.
    assert report.covered.job_hours == 12 and report.covered.share == pytest.approx(1 / 3)
    assert sum(report.waited_by_hour) == 36


def firing(n: int, hours_ago: float, hours: float) -> Incident:
    started = NOW - timedelta(hours=hours_ago)
    return Incident(
        id=str(n),
        uid=f"u{n}",
        group_key=f"g{n}",
        group_hash=f"h{n}",
        source="grafana",
        title="Jobs queueing",
        started_at=started,
        opened_at=started,
        updated_at=started,
        status="resolved",
        resolved_at=started + timedelta(hours=hours),
        peak_types={BIG: RunnerQueue(queued=12, longest_wait_mins=20)},
    )


def test_a_warmer_minimum_says_the_share_of_the_waiting_it_would_have_covered() -> None:
    booting = TypeHistory(
        step_s=3600,
        queued=series(12, 6, *[0.0] * 10),
        level=series(4, 14, *[4.0] * 10),
        maximum=series(*[20.0] * 12),
        job_mins=10.0,
    )
    live = {BIG: RunnerTypeMetrics(minimum=4, maximum=20, job_duration_mins=10.0)}
    incidents = [(firing(1, 150, 1), []), (firing(2, 100, 1), [])]
    (report,) = capacity_report(
        incidents, live, since=WEEK, now=NOW, history={BIG: booting}, thresholds=ALERT
    )
    # Never at its maximum: warm runners for its peak of 12, not a bigger maximum.
    assert "never at its maximum of 20: raise minRunners 4 → 16" in report.recommendation
    assert report.waited_hours == 18 and report.share_at_max == 0
    # 16 warm runners: min(12, 16 − 4) in the first hour, min(6, 16 − 14) in the second.
    assert report.covered is not None and report.covered.field == "minRunners"
    assert report.covered.job_hours == 14 and report.covered.share == pytest.approx(14 / 18)
