"""What the queue cost, in the capacity report and the weekly post, on a simulated week whose
jobs' waits are known: the job-hours in each type's line and in all, the busiest hour of the
week, what the recommendation would have covered, and a chart of the hours within Slack's
limits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import Incident
from bot.domain.reading.capacity import TypeReport, capacity_report
from bot.domain.reading.early_warning import Thresholds
from bot.domain.reading.fleet import RunnerTypeMetrics
from bot.render.capacity import BANDS, MAX_SERIES, render_report, report_message
from bot.render.chart import MAX_CATEGORIES, MAX_LABEL, MAX_TITLE
from sandbox.slack_limits import validate_blocks
from tests.support.fakes.queue_week import MAXIMUM, MINIMUM, MONDAY, Week, simulated

BIG = "linux.2xlarge"
END = MONDAY + timedelta(days=7)


def surge(n: int, day: int, start_h: float, hours: float, peak: float) -> Incident:
    started = MONDAY + timedelta(days=day, hours=start_h)
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
        peak_types={BIG: RunnerQueue(queued=peak, longest_wait_mins=60)},
    )


@pytest.fixture(scope="module")
def week() -> Week:
    return simulated(MONDAY)


def reports_of(week: Week) -> list[TypeReport]:
    """The week as `/queue report` reads it: the Tuesday surge alerted once."""
    assert week.history is not None
    peak = max(week.history.queued.values())
    live = {BIG: RunnerTypeMetrics(minimum=MINIMUM, maximum=MAXIMUM, job_duration_mins=30)}
    return capacity_report(
        [(surge(1, 1, 14.3, 4.5, peak), [])],
        live,
        since=MONDAY,
        now=END,
        history={BIG: week.history},
        thresholds=Thresholds(queued=10, wait_mins=30),
    )


def test_the_weeks_job_hours_waited_in_the_types_line_and_in_all(week: Week) -> None:
    reports = reports_of(week)
    text = render_report(reports, days=7, kept_days=30, history="Prometheus")
    print(text)  # the week's report, as the lead quotes it
    (report,) = reports
    assert report.waited_hours == pytest.approx(week.job_hours, rel=0.10)
    shown = f"{report.waited_hours:.0f} job-hours waited"
    line = next(x for x in text.splitlines() if x.startswith(f"• *{BIG}*"))
    assert f"{shown}, {report.share_at_max:.0%} at the maximum" in line
    total = next(x for x in text.splitlines() if "waited in all" in x)
    assert total.startswith(f"{shown} in all")
    assert "the busiest hour of the week Tue 16:00–17:00 UTC" in total
    advice = next(x for x in text.splitlines() if x.startswith("   ↳"))
    assert "raise maxRunners 20 → " in advice
    assert report.covered is not None
    said = f"would have covered ~{report.covered.share:.0%} of the {shown}, if each runner added"
    assert f"{said} served one queued job a step" in advice
    # More runners serve at most the queue at the maximum: never more than was waited there.
    assert report.covered.job_hours <= (report.waited_at_max_hours or 0) + 1e-9


def test_the_weekly_post_charts_the_job_hours_by_utc_day_and_4_hour_band(week: Week) -> None:
    reports = reports_of(week)
    message = report_message(reports, days=7, kept_days=30, history="Prometheus")
    assert validate_blocks(message.blocks) == []
    charts = [b for b in message.blocks if b["type"] == "data_visualization"]
    assert [c["block_id"] for c in charts] == ["capacity_hours", "capacity_waited"]
    waited = charts[1]
    assert len(waited["title"]) <= MAX_TITLE
    axes = waited["chart"]["axis_config"]
    assert axes["categories"] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert len(axes["categories"]) <= MAX_CATEGORIES
    series = waited["chart"]["series"]
    assert len(series) == len(BANDS) <= MAX_SERIES
    assert all(len(s["name"]) <= MAX_LABEL for s in series)
    drawn = {(s["name"], p["label"]): p["value"] for s in series for p in s["data"]}
    assert len(drawn) == 7 * 6  # every hour of the week in one bar
    assert sum(drawn.values()) == pytest.approx(reports[0].waited_hours, abs=0.05 * 42)
    # The tallest bar is Tuesday afternoon's, where the surge's queue drained.
    assert max(drawn, key=drawn.__getitem__) == ("16–20 UTC", "Tue")
    # Its alt text, in a context right under it (the block takes none).
    alt = message.blocks[message.blocks.index(waited) + 1]
    words = alt["elements"][0]["text"]
    assert words.startswith("Job-hours waited by UTC hour, last 7 days, by day: Mon ")
    assert "the most on Tue 16–20 UTC" in words


def test_without_a_queue_series_nothing_is_said_of_job_hours_and_no_chart_is_drawn() -> None:
    report = TypeReport(runner_type=BIG, incidents=2, firing=timedelta(hours=3), peak_queued=9)
    text = render_report([report], days=7, kept_days=30)
    assert "job-hours" not in text and "job-min" not in text
    message = report_message([report], days=7, kept_days=30)
    charts = [b["block_id"] for b in message.blocks if b["type"] == "data_visualization"]
    assert charts == ["capacity_hours"]


def test_hours_as_busy_as_the_busiest_are_counted_not_hidden() -> None:
    flat = tuple([0.0] * 24 + [15.0] * 6 + [0.0] * 138)  # Tuesday 00:00–06:00, equal
    report = TypeReport(runner_type=BIG, incidents=1, waited_hours=90, waited_by_hour=flat)
    text = render_report([report], days=7, kept_days=30)
    assert (
        "90 job-hours waited in all (the queue summed over the window); the busiest hour of the "
        "week Tue 00:00–01:00 UTC, 15 job-hours (5 other hours as busy)"
    ) in text
