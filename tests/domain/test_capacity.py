"""The capacity report: per runner type, what a week of incidents says about its size."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import Event, Incident
from bot.domain.reading.capacity import (
    NO_TYPE,
    DryRuns,
    Schedule,
    TypeHistory,
    TypeReport,
    capacity_report,
    parse_schedule,
    report_channels,
    stated_thresholds,
)
from bot.domain.reading.early_warning import Thresholds
from bot.domain.reading.fleet import OomKill, RunnerTypeMetrics
from bot.domain.scale.scale_ups import DryRun, ScaleUp
from bot.render.capacity import render_report
from tests.support.incidents import changed

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
WEEK = NOW - timedelta(days=7)
BIG = "linux.2xlarge"
ALERT = Thresholds(queued=10, wait_mins=30)


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
    """A scale-up's event as `bot.actions.scale` records it."""
    done = ScaleUp(runner_type=runner_type, added=4, by=who, at=NOW, field="minRunners")
    text = f"Scaled {runner_type} by +4: x"
    return Event(at=NOW, kind="scaled", text=text, actor="U1", actor_name=who, scale=done)


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
    assert (big.peak_queued, big.peak_wait.longest_wait_mins) == (60, 75)
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


def series(*values: float | None, step: float = 300) -> dict[float, float]:
    """Values a step apart (None: no sample at that step)."""
    return {n * step: v for n, v in enumerate(values) if v is not None}


@pytest.mark.parametrize(
    ("queued", "wait", "thresholds", "hours"),
    [
        # Over when more than 10 wait, or one waits over 30 min; each 5-min step counts once.
        ((4, 11, 12, 10, 2), (1, 1, 45, 1, 1), Thresholds(10, 30), 2 / 12),
        ((4, 11, 12, 10, 2), (1, 1, 45, 31, 1), Thresholds(10, 30), 3 / 12),
        # Only a wait threshold known: the queue's size does not count.
        ((40, 40), (1, 1), Thresholds(None, 30), 0.0),
        # No threshold, or no series: not known, rather than zero.
        ((40, 40), (1, 1), Thresholds(), None),
        ((), (), Thresholds(10, 30), None),
    ],
)
def test_hours_over_the_thresholds_from_the_history(
    queued: tuple[float, ...], wait: tuple[float, ...], thresholds: Thresholds, hours: float | None
) -> None:
    history = TypeHistory(step_s=300, queued=series(*queued), wait_mins=series(*wait))
    assert history.hours_over(thresholds) == (pytest.approx(hours) if hours is not None else None)


def test_hours_at_the_maximum_count_steps_whose_level_reached_it() -> None:
    history = TypeHistory(
        step_s=1800,
        level=series(10, 20, 20, 25, 3, step=1800),
        maximum=series(20, 20, None, 20, 0, step=1800),  # a step without a maximum: not known
    )
    assert history.hours_at_max == pytest.approx(1.0)  # two half hours
    assert TypeHistory(step_s=60).hours_at_max is None


def test_a_type_only_the_history_names_is_shown_when_it_queued_or_sat_at_its_maximum() -> None:
    quiet = TypeHistory(step_s=300, queued=series(0, 1, 0), level=series(5, 5, 5))
    busy = TypeHistory(
        step_s=3600,
        queued=series(*[12.0] * 3, *[0.0] * 9, step=3600),
        level=series(*[20.0] * 12, step=3600),
        maximum=series(*[20.0] * 12, step=3600),
        job_mins=10.0,
    )
    reports = capacity_report(
        [], {}, since=WEEK, now=NOW, history={"quiet": quiet, BIG: busy}, thresholds=ALERT
    )
    assert [r.runner_type for r in reports] == [BIG]
    (report,) = reports
    assert report.hours_over == 3 and report.hours_at_max == 12 and report.maximum == 20
    # 12 h at the maximum make the case alone; the peak of 12 with 10-minute jobs: +4 runners.
    assert report.recommendation == (
        "at its maximum 12 h, 0 incidents, 0.0 h firing: raise maxRunners 20 → 24 "
        "(drains its peak of 12 queued in 30 min)"
    )


def test_the_thresholds_are_what_the_alert_said_last_for_the_type() -> None:
    old = incident(1, 100, 1, {BIG: (5, 5)})
    new = incident(2, 10, 1, {BIG: (5, 5)})
    other = incident(3, 5, 1, {"windows.4xlarge": (5, 5)})
    stated = [(old, (20.0, None)), (new, (12.0, 25.0)), (other, (3.0, 3.0))]
    said = [
        i.model_copy(
            update={"numbers": replace(i.numbers, queue_size_threshold=q, queue_time_threshold=w)}
        )
        for i, (q, w) in stated
    ]
    assert stated_thresholds(BIG, said, ALERT) == Thresholds(12.0, 25.0)
    assert stated_thresholds("linux.4xlarge", said, ALERT) == Thresholds(3.0, 3.0)  # any
    assert stated_thresholds(BIG, [], ALERT) == ALERT


def test_a_resolved_incident_still_says_what_the_rule_fires_at() -> None:
    """The resolve clears the incident's numbers; its peak keeps the last firing thresholds, and
    a report over past incidents (all resolved, most weeks) must still use them."""
    resolved = incident(1, 10, 1, {BIG: (5, 5)})
    resolved = changed(
        resolved,
        numbers=replace(resolved.numbers, queue_size_threshold=None),
        peak=replace(resolved.peaks.numbers, queue_size_threshold=8.0, queue_time_threshold=30.0),
    )
    assert stated_thresholds(BIG.upper(), [resolved], ALERT) == Thresholds(8.0, 30.0)


def test_each_types_report_goes_where_its_latest_incident_went_else_where_its_route_says() -> None:
    moved = incident(1, 100, 1, {BIG: (5, 5)}).model_copy(update={"channel": "C0TEAM"})
    latest = incident(2, 10, 1, {BIG: (5, 5)}).model_copy(update={"channel": "C0OPS"})
    reports = [TypeReport(BIG), TypeReport("linux.g5.4xlarge"), TypeReport("windows")]
    by = report_channels(
        reports,
        [moved, latest],
        default="C0DEFAULT",
        routed=lambda name: "C0GPU" if name.startswith("linux.g5") else "C0DEFAULT",
    )
    assert {c: [r.runner_type for r in rs] for c, rs in by.items()} == {
        "C0DEFAULT": ["windows"],
        "C0OPS": [BIG],
        "C0GPU": ["linux.g5.4xlarge"],
    }
    # The default channel always gets its report, if only to say the week was quiet.
    assert report_channels([], [], default="C0DEFAULT", routed=lambda n: "C0X") == {"C0DEFAULT": []}


def test_a_type_never_at_its_maximum_gets_a_minimum_not_a_bigger_maximum() -> None:
    """Two incidents while the history never saw the type at its maximum: the jobs waited for
    runners to start, so the recommendation is the minimum (warm runners), not maxRunners."""
    step = 300.0
    times = [WEEK.timestamp() + i * step for i in range(2016)]
    history = TypeHistory(
        step_s=step,
        queued={at: (12.0 if i % 288 < 6 else 0.0) for i, at in enumerate(times)},
        level={at: 10.0 for at in times},
        maximum={at: 20.0 for at in times},
    )
    incidents = [
        (incident(1, 100, 1, {BIG: (12, 20)}), []),
        (incident(2, 50, 1, {BIG: (9, 15)}), []),
    ]
    [big] = capacity_report(incidents, LIVE, since=WEEK, now=NOW, history={BIG: history})
    assert big.hours_at_max == 0
    assert big.recommendation == (
        "2 incidents, 2.0 h firing, never at its maximum of 20: raise minRunners 4 → 16 "
        "(warm runners for its peak of 12 queued)"
    )
    assert "maxRunners" not in big.recommendation


def test_the_readings_scale_set_is_the_alerts_runner_type_in_one_report() -> None:
    """Readings name ARC's scale set (`linux-2xlarge`) where no setting maps it back; the
    alerts, and a scale-up from Slack, name `linux.2xlarge`: one type, one report."""
    history = TypeHistory(step_s=300, queued=series(12, 12, 0), job_mins=6.0)
    live = {"linux-2xlarge": RunnerTypeMetrics(minimum=4, maximum=20, job_duration_mins=6.0)}
    incidents = [(incident(1, 50, 1, {BIG: (12, 20)}), [scaled("alice", "Linux.2xlarge")])]
    for only in (None, "linux-2xlarge"):
        [big] = capacity_report(
            incidents,
            live,
            since=WEEK,
            now=NOW,
            only=only,
            history={"linux-2xlarge": history},
            thresholds=ALERT,
        )
        assert (big.runner_type, big.incidents, big.maximum) == (BIG, 1, 20)
        assert big.hours_over == pytest.approx(10 / 60) and big.scale_ups == {"alice": 1}


def test_a_schedule_day_is_a_day_name_not_any_word_starting_like_one() -> None:
    assert parse_schedule("Monday 09:00 Europe/London") == Schedule("mon", 9, 0, "Europe/London")
    assert parse_schedule("tues 08:30") == Schedule("tue", 8, 30)
    for bad in ("mongoose 09:00", "sunset 18:00", "wednes-day 09:00"):
        with pytest.raises(ValueError, match="is not a day"):
            parse_schedule(bad)


def test_a_scale_up_taken_on_from_an_early_warning_is_its_scalers_and_its_types_alone() -> None:
    # alice scaled from the early warning; the incident that took it on recorded it with no
    # actor, and the report said "1 scale-ups (someone 1)" for every type of the incident.
    taken = Event(
        at=NOW,
        kind="scaled",
        text="Took on the early warning's scale-up of linux.2xlarge by alice (minRunners 16 → 21): "
        "it goes back when the incident resolves, unless someone changes it meanwhile",
        scale=ScaleUp(runner_type=BIG, added=5, by="alice", at=NOW, field="minRunners"),
    )
    incidents = [(incident(1, 5, 1, {BIG: (30, 12), "windows.4xlarge": (3, 4)}), [taken])]
    [big, windows] = capacity_report(incidents, LIVE, since=WEEK, now=NOW)
    assert big.scale_ups == {"alice": 1}
    assert windows.scale_ups == {}


def test_who_took_a_scale_up_on_is_the_name_the_event_records_whatever_its_words() -> None:
    # The words of a taken-on scale-up end the name at its first " (": a display name such as
    # "Alice (she/her)" is whole only in what the event records.
    made = ScaleUp(runner_type=BIG, added=5, by="Alice (she/her)", at=NOW, field="minRunners")
    taken = Event(
        at=NOW + timedelta(minutes=3),
        kind="scaled",
        text="Took on the early warning's scale-up of linux.2xlarge by Alice (she/her) "
        "(minRunners 16 → 21)",
        scale=made,
    )
    incidents = [(incident(1, 5, 1, {BIG: (30, 12), "windows.4xlarge": (3, 4)}), [taken])]
    [big, windows] = capacity_report(incidents, LIVE, since=WEEK, now=NOW)
    assert big.scale_ups == {"Alice (she/her)": 1}
    assert windows.scale_ups == {}


@pytest.mark.parametrize(
    ("unschedulable_h", "raises"),
    [
        (None, True),  # no runner pods source: the size is the question
        (1.0, True),  # an hour with no node: not the week's story
        (20.0, False),  # most of its time at the maximum its pods could not be scheduled
    ],
)
def test_no_maxrunners_raise_for_a_type_whose_pods_sat_unschedulable(
    unschedulable_h: float | None, raises: bool
) -> None:
    at_max = {NOW.timestamp() - 3600 * h: 20.0 for h in range(30)}
    history = {
        BIG: TypeHistory(
            step_s=3600, level=at_max, maximum=at_max, unschedulable_hours=unschedulable_h
        )
    }
    incidents = [(incident(n, 10 * n, 2, {BIG: (60, 75)}), []) for n in (1, 2)]
    [big] = capacity_report(incidents, LIVE, since=WEEK, now=NOW, history=history)
    assert ("raise maxRunners" in big.recommendation) is raises, big.recommendation
    if not raises:
        assert "unschedulable 20 h (no node fits)" in big.recommendation
        assert "cluster autoscaler or Karpenter" in big.recommendation


def test_oom_kills_in_the_window_are_counted_with_their_workflows_under_the_alerts_name() -> None:
    kills = [
        OomKill("linux-2xlarge", f"p{n}", "u", workflow, NOW - timedelta(days=days))
        for n, (days, workflow) in enumerate([(1, "pull"), (2, "pull"), (3, ""), (9, "trunk")])
    ]
    incidents = [(incident(1, 10, 2, {BIG: (60, 75)}), [])]
    [big] = capacity_report(incidents, LIVE, since=WEEK, now=NOW, kills=kills)
    assert (big.oom_kills, big.oom_workflows) == (3, (("pull", 2),))


def test_a_dry_run_pilot_s_acts_say_how_much_sooner_they_would_have_come_than_people() -> None:
    """A team trying the pilot in dry run reads in the report what it would have added, and how
    long before a person's first scale-up it would have: the case for turning it on."""

    def would(minutes_in: float, runners: int, runner_type: str = BIG) -> Event:
        at = NOW - timedelta(hours=3) + timedelta(minutes=minutes_in)
        dry = DryRun(runner_type=runner_type, runners=runners)
        text = f"queuepilot (policy, dry run) would have scaled {runner_type} by +{runners}"
        return Event(at=at, kind="pilot_dry_run", text=text, would=dry)

    person = scaled("alice").model_copy(update={"at": NOW - timedelta(hours=3, minutes=-10)})
    incidents = [
        (incident(1, 3, 1, {BIG: (35, 40)}), [would(2, 10), would(3, 8), person]),
        (incident(2, 30, 1, {BIG: (30, 20)}), [would(1, 6), would(2, 6, "linux.4xlarge")]),
    ]
    [big] = [
        r for r in capacity_report(incidents, LIVE, since=WEEK, now=NOW) if r.runner_type == BIG
    ]
    assert big.dry_runs == DryRuns(acts=3, runners=24, sooner_mins=(8.0,))
    said = render_report([big], days=7, kept_days=30)
    assert (
        "the pilot's dry run: 3 acts would have added +24, the first 8 min before a person's "
        "first scale-up" in said
    ), said
