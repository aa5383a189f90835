"""The capacity report: per runner type, what a week of incidents says about its size."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerts import RunnerQueue
from bot.domain.capacity import NO_TYPE, Schedule, capacity_report, parse_schedule
from bot.domain.fleet import RunnerTypeMetrics
from bot.domain.incidents import Event, Incident

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
WEEK = NOW - timedelta(days=7)
BIG = "linux.2xlarge"


def incident(
    n: int,
    start_h: float,
    hours: float | None,
    peaks: dict[str, tuple[float, float]] | None = None,
) -> Incident:
    started = NOW - timedelta(hours=start_h)
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
        status="firing" if hours is None else "resolved",
        resolved_at=None if hours is None else started + timedelta(hours=hours),
        peak_types={
            name: RunnerQueue(queued=q, longest_wait_mins=w)
            for name, (q, w) in (peaks or {}).items()
        },
    )


def scaled(who: str, runner_type: str = BIG) -> Event:
    return Event(
        at=NOW, kind="scaled", text=f"Scaled {runner_type} by +4: x", actor="U1", actor_name=who
    )


LIVE = {BIG: RunnerTypeMetrics(minimum=4, maximum=20, job_duration_mins=6.0)}


def test_a_type_at_its_maximum_all_week_gets_the_size_that_drains_its_worst_peak() -> None:
    incidents = [
        (incident(1, 100, 3, {BIG: (35, 40)}), [scaled("alice"), scaled("bob")]),
        (incident(2, 50, 2, {BIG: (60, 75)}), [scaled("alice")]),
        (incident(3, 20, 1, {BIG: (10, 12), "windows.4xlarge": (2, 3)}), []),
        (incident(4, 300, 2, {BIG: (99, 99)}), []),  # two weeks ago: not this week
    ]
    [big, windows] = capacity_report(incidents, LIVE, since=WEEK, now=NOW)
    assert big.runner_type == BIG and big.incidents == 3
    assert big.firing == timedelta(hours=6)
    assert (big.peak_queued, big.peak_wait_mins) == (60, 75)
    assert big.scale_ups == {"alice": 2, "bob": 1}
    # 60 queued jobs of 6 minutes drain in 30 minutes with 12 more runners.
    assert big.recommendation == (
        "3 incidents, 6.0 h firing: raise maxRunners 20 → 32 "
        "(drains its peak of 60 queued in 30 min)"
    )
    assert windows.incidents == 1 and windows.recommendation == "", "once, briefly: no change"


def test_firing_time_counts_an_open_incident_until_now_and_an_old_one_from_the_window() -> None:
    incidents = [
        (incident(1, 2, None, {BIG: (5, 5)}), []),  # open for 2 h
        (incident(2, 24 * 7 + 1, 3, {BIG: (5, 5)}), []),  # began 1 h before the week, lasted 3 h
    ]
    [big] = capacity_report(incidents, LIVE, since=WEEK, now=NOW)
    assert big.firing == timedelta(hours=4)
    assert big.recommendation.startswith("2 incidents, 4.0 h firing: raise maxRunners 20 → 21")


def test_alerts_naming_no_type_and_a_type_asked_for_with_no_incidents() -> None:
    untyped = [(incident(1, 5, 1), [])]
    [report] = capacity_report(untyped, LIVE, since=WEEK, now=NOW)
    assert report.runner_type == NO_TYPE and report.incidents == 1
    [asked] = capacity_report(untyped, LIVE, since=WEEK, now=NOW, only=BIG)
    assert asked.incidents == 0 and asked.maximum == 20 and asked.recommendation == ""


def test_without_a_known_maximum_the_advice_says_so() -> None:
    incidents = [(incident(n, 10 * n, 2, {"gpu": (8, 30)}), []) for n in (1, 2)]
    [gpu] = capacity_report(incidents, {}, since=WEEK, now=NOW)
    assert "its maximum is not known here" in gpu.recommendation


@pytest.mark.parametrize(
    ("text", "schedule"),
    [
        ("mon 09:00 Europe/London", Schedule("mon", 9, 0, "Europe/London")),
        ("Friday 17:30", Schedule("fri", 17, 30, "UTC")),
        ("  ", None),
    ],
)
def test_the_weekly_schedule(text: str, schedule: Schedule | None) -> None:
    assert parse_schedule(text) == schedule


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("mon", "use `<day> HH:MM"),
        ("someday 09:00", "is not a day"),
        ("mon 9am", "is not a time of day"),
        ("mon 24:00", "is not a time of day"),
        ("mon 09:00 Mars/Olympus", "is not a time zone"),
        ("mon 09:00 ../../etc/passwd", "is not a time zone"),
        ("mon 09:00 UTC extra", "use `<day> HH:MM"),
    ],
)
def test_a_bad_schedule_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("`", ".")):
        parse_schedule(text)
