"""What the queue cost in the capacity report: job-hours waited, what a recommendation would have
covered of them, and the weekly post's chart of when in the week they were waited."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.domain.queue_cost.waited import HOURS_OF_WEEK, Covered, summed
from bot.domain.reading.capacity import TypeReport
from bot.render import mrkdwn as md
from bot.render.chart import MAX_TITLE, chart

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# Slack's bar chart takes at most 20 categories and 6 series, so the 168 hours of the week fit
# neither as categories nor as one line: the 7 days are the categories and six 4-hour bands of
# the UTC day the series, grouped by day. Every hour keeps its day and its time of day, and
# the text names the busiest single hour.
BAND_H = 4
BANDS = tuple(f"{h:02d}–{h + BAND_H:02d} UTC" for h in range(0, 24, BAND_H))
MAX_SERIES = 6  # a bar chart's, as Slack takes it


def job_hours_said(hours: float) -> str:
    """ "412 job-hours", "4.2 job-hours", "25 job-min"."""
    if hours < 1:
        return f"{hours * 60:.0f} job-min"
    return f"{hours:.1f} job-hours" if hours < 10 else f"{hours:.0f} job-hours"


def waited_said(report: TypeReport) -> str | None:
    """ "270 job-hours waited, 96% at the maximum": in the type's line."""
    if report.waited_hours is None:
        return None
    text = f"{job_hours_said(report.waited_hours)} waited"
    if (share := report.share_at_max) is not None:
        text += f", {share:.0%} at the maximum"
    return text


def covered_said(covered: Covered) -> str:
    """What the recommendation would have served, with the assumption it rests on."""
    runners = "runner added" if covered.field == "maxRunners" else "warm runner added"
    return (
        f"would have covered ~{covered.share:.0%} of the {job_hours_said(covered.of_hours)} "
        f"waited, if each {runners} served one queued job a step"
    )


def busiest_hour(hours: Sequence[float]) -> tuple[str, float, int] | None:
    """The busiest hour ("Tue 14:00–15:00 UTC"), its job-hours and how many others were as busy."""
    if len(hours) != HOURS_OF_WEEK or max(hours) <= 0:
        return None
    top = max(range(HOURS_OF_WEEK), key=lambda i: (hours[i], -i))
    day, hour = divmod(top, 24)
    equals = sum(1 for h in hours if round(h, 1) == round(hours[top], 1)) - 1
    return f"{DAYS[day]} {hour:02d}:00–{hour + 1:02d}:00 UTC", hours[top], equals


def total_line(reports: Sequence[TypeReport]) -> str | None:
    """ "412 job-hours waited in all (…); the busiest hour of the week …": every type read."""
    known = [r for r in reports if r.waited_hours is not None]
    if not known:
        return None
    total = sum(r.waited_hours or 0.0 for r in known)
    text = f"{job_hours_said(total)} waited in all (the queue summed over the window)"
    if busiest := busiest_hour(summed([r.waited_by_hour for r in known if r.waited_by_hour])):
        when, hours, equals = busiest
        text += f"; the busiest hour of the week {when}, {job_hours_said(hours)}"
        text += f" ({equals} other hours as busy)" if equals else ""
    return text


def hour_of_week_chart(reports: Sequence[TypeReport], days: int) -> list[dict[str, Any]]:
    """The chart, and its alt text in a context under it (the block has none)."""
    hours = summed([r.waited_by_hour for r in reports if r.waited_by_hour])
    if not hours or sum(hours) <= 0:
        return []
    per_day = [hours[d * 24 : (d + 1) * 24] for d in range(7)]
    values = {
        band: [round(sum(day[b * BAND_H : (b + 1) * BAND_H]), 1) for day in per_day]
        for b, band in enumerate(BANDS)
    }
    axes = {"categories": list(DAYS), "x_label": "UTC day", "y_label": "job-hours waited"}
    title = md.truncate(f"Job-hours waited by UTC hour, last {days} days", MAX_TITLE)
    block = chart("capacity_waited", title, "bar", values, axes)
    return [block, md.context([_alt_text(title, per_day)])]


def _alt_text(title: str, per_day: Sequence[Sequence[float]]) -> str:
    """The chart in words: each day's job-hours, and the busiest 4-hour band."""
    days = ", ".join(f"{d} {sum(h):.0f}" for d, h in zip(DAYS, per_day, strict=True))
    bands = [
        (sum(hours[b * BAND_H : (b + 1) * BAND_H]), -d, -b)
        for d, hours in enumerate(per_day)
        for b in range(len(BANDS))
    ]
    most, day, band = max(bands)  # the earliest of equals
    return (
        f"{title}, by day: {days}; the most on {DAYS[-day]} {BANDS[-band]} "
        f"({job_hours_said(most)})."
    )
