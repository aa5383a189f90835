"""Live queues as people read them, one line per runner type, worst first, shared by the root,
status replies, `/queue`, diagnostics and the App Home. Each line renders the reading's judgement
(`bot.domain.judgement`) and computes none of its own: `• linux.2xlarge: *43* queued · longest
wait *10 min* · busy 120/120, 8 booting · ▂▄▆█ · ▲ rising +3.0 jobs/min · +6 runners …`.
"""

from __future__ import annotations

from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics, source_name, worst_first
from bot.domain.judgement import Judgement
from bot.domain.trend import SPARK_POINTS, Trend, sparkline
from bot.domain.units import minutes, number, wait_parts
from bot.render import mrkdwn as md

TOP_TYPES = 5  # the root and status show the worst few; `/queue` shows more
EMPTY = Trend()


def absent_text(view: FleetSnapshot) -> str:
    """What a source that lists no job of a type said of it: nothing queued, or, from one that
    counts only jobs queued longer than a threshold, nothing queued longer than that."""
    over = view.queued_over_mins
    return f"none queued over {minutes(over)}" if over else "none queued"


def judged_parts(j: Judgement) -> list[str]:
    """A judgement's numbers, in the order every surface shows them."""
    parts = []
    if j.queued is not None:
        parts.append(f"*{number(j.queued)}* queued")
    if j.wait:
        parts.append(f"{j.wait_label} *{j.wait}*")
    if j.busy is not None and j.registered is not None:
        runners = f"busy {number(j.busy)}/{number(max(j.registered, j.busy))}"
        parts.append(runners + (f", {j.booting} booting" if j.booting else ""))
    return parts


def advice_parts(j: Judgement) -> list[str]:
    return [part for part in (j.heading, j.advice) if part]


def type_parts(metrics: RunnerTypeMetrics | None, absent: str = "") -> tuple[list[str], list[str]]:
    """A type's numbers and advice: its judgement's; `absent` where the source did not list it (no
    count was read: not "0 queued"); a 0.25 replica's reading judged none: its numbers alone."""
    if absent or metrics is None:
        return [absent] if absent else [], []
    if (j := metrics.judged) is not None:
        return judged_parts(j), advice_parts(j)
    parts = [f"*{number(metrics.queued)}* queued"] if metrics.queued is not None else []
    wait = wait_parts(
        metrics.longest_wait_mins, over=metrics.wait_over, of_starts=metrics.wait_of_starts
    )
    return [*parts, f"{wait[0]} *{wait[1]}*"] if wait is not None else parts, []


def type_lines(view: FleetSnapshot, trend: Trend = EMPTY, *, top: int = TOP_TYPES) -> list[str]:
    """The worst `top` types, then how many more were left out."""
    ranked = worst_first(view.runner_types)
    absent = absent_text(view)
    lines = []
    for name, metrics in ranked[:top]:
        parts, advice = type_parts(metrics, absent if name in view.absent else "")
        if spark := sparkline(trend.queued_of(name, SPARK_POINTS)):
            parts.append(f"`{spark}`")
        label = md.runner_name(name) if name else "all runner types"
        lines.append(f"• {label}: {' · '.join(parts + advice) or 'no numbers'}")
    if more := max(len(ranked) - top, 0) + view.hidden:
        lines.append(f"+{more} more runner types (`/queue` lists them)")
    return lines


def source_note(view: FleetSnapshot) -> str:
    """Where the numbers come from, and what went wrong if they are the alert's instead."""
    if view.note and not view.is_live:
        return f"⚠️ {md.escape(view.note)}"
    head = f"Live from {md.escape(source_name(view.source))}" if view.is_live else "From the alert"
    return f"{head} · ⚠️ {md.escape(view.note)}" if view.note else head
