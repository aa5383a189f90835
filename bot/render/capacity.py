"""`/queue report`: the capacity report as one ephemeral answer (mrkdwn, escaped, capped), and the
weekly post with charts of each type's firing hours and of the job-hours waited by hour of week."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from bot.domain.message import Rendered
from bot.domain.queue_cost.waited import HOURS_OF_WEEK, Covered, summed
from bot.domain.reading.capacity import NO_TYPE, DryRuns, TypeReport
from bot.domain.reading.fleet import OOM_KEEP_DAYS
from bot.domain.scale.scale_record import TypeScaled
from bot.domain.units import duration, minutes, number
from bot.render import mrkdwn as md
from bot.render.chart import MAX_CATEGORIES, MAX_TITLE, chart, series_labels
from bot.render.cost import cost_said
from bot.render.numbers import busy_said, queued_said, wait_of

MAX_TYPES = 10
MAX_SCALERS = 5  # who scaled a type up, most first: the rest are counted
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# Slack's bar chart takes at most 20 categories and 6 series, so the 168 hours of the week are
# drawn as 7 days of six 4-hour bands of the UTC day; the text names the busiest single hour.
BAND_H = 4
BANDS = tuple(f"{h:02d}–{h + BAND_H:02d} UTC" for h in range(0, 24, BAND_H))
MAX_SERIES = 6  # a bar chart's, as Slack takes it


def render_report(
    reports: Sequence[TypeReport],
    *,
    days: int,
    kept_days: int,
    history: str = "",
    missing: str = "",
    read_back_to: datetime | None = None,
) -> str:
    """`history` names where the history comes from ("" when none); `missing` what of it could
    not be read, and why; `read_back_to`: how far back the incidents read reach."""
    head = f"*Capacity report · the last {days} days*"
    kept = f" Incidents are kept {kept_days} days (`INCIDENT_RETENTION_DAYS`): older ones are gone."
    kept = kept if days > kept_days else ""
    if read_back_to is not None:
        kept += (
            f" Only the most recent incidents are read, back to {md.slack_date(read_back_to)}: "
            "older ones of the window are not counted."
        )
    if not any(r.incidents or r.hours_over or r.hours_at_max or r.peak_queued for r in reports):
        quiet = f"{head}\nNo queue incident in these {days} days"
        if history:
            quiet += (
                ", and no runner type over the thresholds or at its maximum in "
                f"{md.escape(history)}'s history"
            )
        return f"{quiet}.{kept}" + (f"\n_{_missing(missing)}_" if missing else "")
    lines = [head]
    for report in reports[:MAX_TYPES]:
        lines.append(_type_line(report))
        if report.cost is not None:
            lines.append(f"   ↳ {md.escape(f'its incidents cost {cost_said(report.cost)}')}")
        if report.recommendation:
            advice = md.escaped(report.recommendation, 300)
            if report.covered is not None:
                advice += f": {covered_said(report.covered)}"
            lines.append(f"   ↳ {advice}")
    if len(reports) > MAX_TYPES:
        more = md.escape(f"`/queue report {days}d <type>`")
        lines.append(f"_{len(reports) - MAX_TYPES} more runner types: {more}_")
    if total := total_line(reports):
        lines.append(total)
    lines.append(f"_{_sources(reports, history, missing)}_{kept}")
    return md.truncate("\n".join(lines), 2900)


def _sources(reports: Sequence[TypeReport], history: str, missing: str) -> str:
    own = "From queuepilot's own incidents and the live reading"
    if any(r.oom_workflows for r in reports):
        own += f" (the OOM-killed pods its readings caught, kept {OOM_KEEP_DAYS} days)"
    if not history:
        if missing:
            return f"{own}. {_missing(missing)}"
        return (
            f"{own}. Queue time, hours at the maximum and over the thresholds need the fleet's "
            "readings (a `METRICS_BACKEND` other than `alert`)."
        )
    # "queue time" from a histogram, "sampled longest wait" from queuepilot's own readings
    quantiled = [r.quantiles_of for r in reports if r.wait_p50_mins is not None]
    known = [
        quantiled[0] if quantiled else "",
        any(r.hours_at_max is not None for r in reports) and "hours at the maximum",
        any(r.hours_over is not None for r in reports) and "hours over the alert's thresholds",
        any(r.pending_pod_mins is not None for r in reports) and "runner pods Pending",
    ]
    partly = f" ({md.escaped(missing, 300)})" if missing else ""
    if not (said := [what for what in known if what]):
        return f"{own}; {md.escape(history)}'s history had nothing more on these types{partly}."
    return f"{own}; {', '.join(said)} from {md.escape(history)}'s history{partly}."


def _missing(missing: str) -> str:
    return f"Queue time and hours at the maximum are not in it: {md.escaped(missing, 300)}."


def _type_line(report: TypeReport) -> str:
    name = "_alerts naming no runner type_"
    if report.runner_type != NO_TYPE:
        name = md.escaped(report.runner_type, 100)
    parts = [md.plural(report.incidents, "incident")]
    if report.incidents:
        parts.append(f"{duration(report.firing)} firing")
    if report.hours_over is not None:
        parts.append(f"{_hours(report.hours_over)} over the thresholds")
    if report.wait_p50_mins is not None and report.wait_p90_mins is not None:
        p50, p90 = (
            duration(timedelta(minutes=m)) for m in (report.wait_p50_mins, report.wait_p90_mins)
        )
        parts.append(f"{md.escape(report.quantiles_of)} p50 {p50}, p90 {p90}")
    if report.hours_at_max is not None:
        parts.append(f"{_hours(report.hours_at_max)} at the maximum")
    if waited := waited_said(report):
        parts.append(waited)
    if report.pending_pod_mins is not None:
        parts.append(_pending(report))
    if report.oom_kills:
        named = ", ".join(f"{md.escaped(w, 60)} {n}" for w, n in report.oom_workflows)
        kills = md.plural(report.oom_kills, "OOM kill")
        parts.append(f"{kills} ({named})" if named else kills)
    if report.peak_queued is not None:
        parts.append(f"peak {queued_said(report.peak_queued)}")
    parts += [wait_of(peak) for peak in (report.peak_wait, report.peak_start) if peak is not None]
    if report.maximum is not None:
        low = number(report.minimum) if report.minimum is not None else "?"
        runners = f"runners {low}–{number(report.maximum)}"
        if report.registered is not None and (busy := busy_said(report.busy, report.registered)):
            runners += f" ({busy} at most in its incidents)"
        parts.append(runners)
    if report.scale_ups:
        named = list(report.scale_ups.items())  # most first
        who = ", ".join(f"{md.escaped(n, 40)} {c}" for n, c in named[:MAX_SCALERS])
        if len(named) > MAX_SCALERS:
            who += f", {len(named) - MAX_SCALERS} others"
        parts.append(f"{md.plural(sum(report.scale_ups.values()), 'scale-up')} ({who})")
    if report.scaled is not None:
        parts += _came_up(report.scaled)
    if report.dry_runs is not None:
        parts.append(_dry_runs(report.dry_runs))
    return f"• *{name}*: " + " · ".join(parts)


def _dry_runs(runs: DryRuns) -> str:
    """ "the pilot's dry run: 3 acts would have added +24 runners, the first 9 min before …"."""
    said = f"the pilot's dry run: {md.plural(runs.acts, 'act')} would have added +{runs.runners}"
    if not runs.sooner_mins:
        return said + " (no person scaled it)"
    mins = statistics.median(runs.sooner_mins)
    when = f"{minutes(abs(mins))} {'before' if mins >= 0 else 'after'}"
    many = len(runs.sooner_mins)
    of = f" (median of {many} incidents)" if many > 1 else ""
    return f"{said}, the first {when} a person's first scale-up{of}"


def _came_up(scaled: TypeScaled) -> list[str]:
    """ "2 of 3 came up (the pilot's 1 of 1), 1 not known", "capacity added a median 6 min …"."""
    every, pilot, mins = scaled.all, scaled.pilot, scaled.capacity_mins
    came = f"{every.came} of {every.count} came up"
    came += f" (the pilot's {pilot.came} of {pilot.count})" if pilot.count else ""
    came += f", {every.not_known} not known" if every.not_known else ""
    if (median := scaled.capacity_median) is None:
        return [came]
    many = len(mins) != 1
    added = f"capacity added {'a median ' if many else ''}{minutes(median)} after the alert"
    return [came, added + (f" ({len(mins)} incidents)" if many else "")]


def _pending(report: TypeReport) -> str:
    """ "runner pods Pending 72 pod-hours, the longest 6 h, 6.0 h unschedulable"."""
    mins = report.pending_pod_mins or 0.0
    summed = f"{mins / 60:.0f} pod-hours" if mins >= 120 else f"{mins:.0f} pod-min"
    text = f"runner pods Pending {summed}"
    if report.pending_longest_mins is not None and mins:
        text += f", the longest {duration(timedelta(minutes=report.pending_longest_mins))}"
    if report.unschedulable_hours:
        text += f", {_hours(report.unschedulable_hours)} unschedulable"
    return text


def _hours(hours: float) -> str:
    return f"{hours:.1f} h" if hours < 10 else f"{hours:.0f} h"


def report_message(reports: Sequence[TypeReport], *, days: int, **said: Any) -> Rendered:
    """The weekly post: the report, a bar chart of each type's firing hours and one of the
    job-hours waited by hour of week."""
    text = render_report(reports, days=days, **said)
    blocks = md.sections(text.splitlines())
    firing = [r for r in reports if r.runner_type and r.firing.total_seconds() > 0]
    if firing := firing[:MAX_CATEGORIES]:
        labels = series_labels([r.runner_type for r in firing])
        hours = [round(r.firing.total_seconds() / 3600, 1) for r in firing]
        axes = {"categories": labels, "y_label": "hours"}
        title = f"Hours firing, last {days} days"
        blocks.append(chart("capacity_hours", title, "bar", {"hours firing": hours}, axes))
    blocks += hour_of_week_chart(reports, days)
    return md.rendered(text.splitlines()[0].strip("*"), blocks)


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
    banded = [
        [sum(day[b * BAND_H : (b + 1) * BAND_H]) for b in range(len(BANDS))] for day in per_day
    ]
    values = {band: [round(day[b], 1) for day in banded] for b, band in enumerate(BANDS)}
    axes = {"categories": list(DAYS), "x_label": "UTC day", "y_label": "job-hours waited"}
    title = md.truncate(f"Job-hours waited by UTC hour, last {days} days", MAX_TITLE)
    # In words: each day's job-hours, and the busiest 4-hour band (the earliest of equals).
    totals = ", ".join(f"{d} {sum(h):.0f}" for d, h in zip(DAYS, per_day, strict=True))
    most, day, band = max((h, -d, -b) for d, sums in enumerate(banded) for b, h in enumerate(sums))
    alt = f"{title}, by day: {totals}; the most on {DAYS[-day]} {BANDS[-band]} "
    alt += f"({job_hours_said(most)})."
    return [chart("capacity_waited", title, "bar", values, axes), md.context([alt])]
