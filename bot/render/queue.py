"""Live queues as people read them: one line per runner type, shared by the root message,
status replies and `/queue`. Pure functions of a fleet view and the incident's trend.

A line: `• linux.2xlarge: 43 queued · longest wait 10 min · busy 120/120 · ▂▄▆█ · growing
+3.0 jobs/min: +6 runners would drain it in 30 min`, worst first (longest wait, then most queued).
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import timedelta

from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics, worst_first
from bot.domain.forecast import (
    DRAIN_TARGET_MINS,
    Outlook,
    Recommendation,
    metrics_outlook,
    runners_to_drain,
)
from bot.domain.incidents import Incident
from bot.domain.runner_names import runner_key
from bot.domain.trend import SPARK_POINTS, Trend, slope_per_min, sparkline
from bot.domain.units import minutes, number, wait_parts
from bot.render.mrkdwn import escape, truncate

TOP_TYPES = 5  # the root and status show the worst few; `/queue` shows more
MAX_NAME = 80
# The slope of the queue is taken over this much of the recent trend.
SLOPE_WINDOW = timedelta(minutes=30)
EMPTY = Trend()


def type_outlook(
    name: str,
    metrics: RunnerTypeMetrics,
    trend: Trend = EMPTY,
    *,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Outlook | None:
    """Where this type's queue is heading: from the backend's rates, else from the trend."""
    return _outlook(metrics, trend.times(), trend.queued_of(name), within_mins)


def _outlook(
    metrics: RunnerTypeMetrics,
    times: list[float],
    queued: list[float | None],
    within_mins: float,
) -> Outlook | None:
    points: list[tuple[float, float]] = []
    if times:
        since = times[-1] - SLOPE_WINDOW.total_seconds()
        points = [
            (at, q) for at, q in zip(times, queued, strict=True) if at >= since and q is not None
        ]
    if not metrics.queued:  # an empty queue: nothing to drain, whatever its rates say
        return None
    return metrics_outlook(metrics, slope_per_min=slope_per_min(points), within_mins=within_mins)


def absent_text(view: FleetSnapshot) -> str:
    """What a source that lists no job of a type said of it: nothing queued, or, from one that
    counts only jobs queued longer than a threshold, nothing queued longer than that."""
    over = view.queued_over_mins
    return f"none queued over {minutes(over)}" if over else "none queued"


def _line(
    name: str,
    metrics: RunnerTypeMetrics,
    times: list[float],
    queued: list[float | None],
    within_mins: float,
    *,
    absent: str = "",
) -> str:
    parts = []
    if absent:
        parts.append(absent)  # not "0 queued": no count was read, only no listing
    elif metrics.queued is not None:
        parts.append(f"*{number(metrics.queued)}* queued")
    wait = wait_parts(
        metrics.longest_wait_mins, over=metrics.wait_over, of_starts=metrics.wait_of_starts
    )
    if wait is not None:
        parts.append(f"{wait[0]} *{wait[1]}*")
    total = metrics.registered
    if metrics.busy is not None and total is not None:
        parts.append(f"busy {number(metrics.busy)}/{number(total)}")
    spark = sparkline(queued)
    if spark:
        parts.append(f"`{spark}`")
    ahead = _outlook(metrics, times, queued, within_mins)
    if ahead is not None and ahead.text:
        parts.append(ahead.text)
    label = truncate(escape(name), MAX_NAME) if name else "all runner types"
    return f"• {label}: {' · '.join(parts) or 'no numbers'}"


def type_lines(
    view: FleetSnapshot,
    trend: Trend = EMPTY,
    *,
    top: int = TOP_TYPES,
    within_mins: float = DRAIN_TARGET_MINS,
) -> list[str]:
    """The worst `top` types, then how many more were left out."""
    ranked = worst_first(view.runner_types)
    times = trend.times()  # read once for every line
    # A line needs only the sparkline's points and the slope's window: parse only those.
    since = bisect_left(times, times[-1] - SLOPE_WINDOW.total_seconds()) if times else 0
    last = max(len(times) - since, SPARK_POINTS)
    recent = times[-last:]
    absent, said = set(view.absent), absent_text(view)
    lines = [
        _line(
            n,
            m,
            recent,
            trend.queued_of(n, last),
            within_mins=within_mins,
            absent=said if n in absent else "",
        )
        for n, m in ranked[:top]
    ]
    more = max(len(ranked) - top, 0) + view.hidden
    if more:
        lines.append(f"+{more} more runner types (`/queue` lists them)")
    return lines


def source_note(view: FleetSnapshot, backend: str) -> str:
    """Where the numbers come from, and what went wrong if they are the alert's instead."""
    if view.note and not view.is_live:
        return f"⚠️ {escape(view.note)}"
    head = f"Live from {escape(backend)}" if view.is_live else "From the alert"
    return f"{head} · ⚠️ {escape(view.note)}" if view.note else head


def recommend_for(
    incident: Incident, runner_type: str, *, within_mins: float = DRAIN_TARGET_MINS
) -> Recommendation | None:
    """How many runners to add to `runner_type`: what the scale modal prefills.

    From the live reading when the incident has one (rates, job duration, the trend), the same
    outlook its status shows; else from the alert's queue, one runner per queued job.
    """
    live, key = incident.live, runner_key(runner_type)
    if live is not None and live.is_live:
        for name, metrics in live.runner_types.items():
            if runner_key(name) != key:
                continue
            # The root's and a status's own outlook: one recommendation, in the same words.
            ahead = type_outlook(name, metrics, incident.trend, within_mins=within_mins)
            if ahead is None:
                return None
            return Recommendation(ahead.runners or 0, ahead.text)
    queue = next((q for n, q in incident.runner_types.items() if runner_key(n) == key), None)
    queued = queue.queued if queue is not None else None
    if queued is None and len(incident.runner_types) <= 1:
        queued = incident.numbers.max_queue_size
    return runners_to_drain(queued, within_mins=within_mins)
