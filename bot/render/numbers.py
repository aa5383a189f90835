"""The queue's numbers in words, for every message that says them. Nothing here decides or
recomputes (`bot.domain.reading.judging` judges, the incident keeps readings and peaks), so every
surface says one reading. A label names one measure (longest wait and slowest recent start are two
rows); a change is only between readings of one measure; each peak is at its own moment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import NamedTuple

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.headline import Headline, StillLive
from bot.domain.incident.incidents import (
    CAPPED,
    DRAINED,
    UNDER,
    Incident,
    Resolution,
    Snapshot,
    sums_types,
    thresholds,
)
from bot.domain.incident.trend import SPARK_POINTS, Trend, sparkline
from bot.domain.reading.fleet import (
    FleetSnapshot,
    RunnerTypeMetrics,
    measured,
    source_name,
    worst_first,
)
from bot.domain.reading.judgement import Judgement
from bot.domain.units import change, duration, minutes, number
from bot.render import mrkdwn as md

TOP_TYPES = 5  # the root and status show the worst few; `/queue` shows more
MAX_RUNNER_ROWS = 15
MAX_PEAK_ROWS = 5
EMPTY = Trend()
NOT_KNOWN = "longest wait not known"
# How a moment is written: a Slack date in a message, UTC in a file.
Clock = Callable[[datetime], str]


def queued_said(queued: float | None, *, bold: bool = False) -> str:
    """ "*43* queued", "" when not read."""
    star = "*" if bold else ""
    return "" if queued is None else f"{star}{number(queued)}{star} queued"


def busy_said(busy: float | None, registered: float | None) -> str:
    """ "busy 20/24" (a registered count read below the busy one is older than it)."""
    if busy is None:
        return ""
    known = registered is not None
    return f"busy {number(busy)}" + (f"/{number(max(registered, busy))}" if known else "")


def judged_parts(j: Judgement) -> list[str]:
    """A judgement's numbers, in the order every surface shows them."""
    parts = [part for part in (queued_said(j.queued, bold=True), wait_part(j)) if part]
    if j.busy is not None and j.registered is not None:
        booting = f", {j.booting} booting" if j.booting else ""
        parts.append(busy_said(j.busy, j.registered) + booting)
    return parts


def wait_part(j: Judgement, *, bold: bool = True) -> str:
    """ "longest wait *12 min*" ("as the alert said at 14:02" where the alert's stands in), or
    "longest wait not known: …" while jobs queue."""
    if (said := _wait_words(j.wait_mins, j.wait_over, j.wait_of_starts)) is None:
        why = j.wait_unknown or "the source gives none"
        return md.escape(f"{NOT_KNOWN}: {why}") if j.queued else ""
    when = f" as the alert said at {md.time_of(j.wait_alert_at)}" if j.wait_alert_at else ""
    return _labelled(said, bold) + when


def wait_words(queue: RunnerQueue | RunnerTypeMetrics) -> tuple[str, str] | None:
    """("longest wait", "114 min"), ("slowest recent start", "over 60 min"): as measured."""
    return _wait_words(queue.longest_wait_mins, queue.wait_over, queue.wait_of_starts)


def _wait_words(
    mins: float | None, over: bool | None = None, of_starts: bool | None = None
) -> tuple[str, str] | None:
    if mins is None:
        return None
    label = "slowest recent start" if of_starts else "longest wait"
    return label, f"{'over ' if over else ''}{minutes(mins)}"


def wait_of(queue: RunnerQueue | RunnerTypeMetrics, *, bold: bool = False) -> str:
    """A queue's wait as it was measured: "longest wait 114 min", "" when not read."""
    return _labelled(wait_words(queue), bold)


def _labelled(said: tuple[str, str] | None, bold: bool) -> str:
    return "" if said is None else f"{said[0]} {f'*{said[1]}*' if bold else said[1]}"


def wait_known(queue: RunnerQueue | RunnerTypeMetrics) -> str:
    """A queue's wait as measured (its judgement's where judged), or NOT_KNOWN while jobs queue."""
    judged = queue.judged if isinstance(queue, RunnerTypeMetrics) else None
    if judged is not None:
        return wait_part(judged, bold=False)
    return wait_of(queue) or (NOT_KNOWN if queue.queued else "")


def type_parts(
    queue: RunnerQueue | RunnerTypeMetrics | None, absent: str = "", *, bold: bool = True
) -> tuple[list[str], list[str]]:
    """A type's numbers and advice: its judgement's, else its numbers alone; `absent` where the
    source did not list it (no count was read: not "0 queued")."""
    if absent or queue is None:
        return [absent] if absent else [], []
    judged = queue.judged if isinstance(queue, RunnerTypeMetrics) else None
    if judged is not None:
        return judged_parts(judged), [part for part in (judged.heading, judged.advice) if part]
    parts = (queued_said(queue.queued, bold=bold), wait_of(queue, bold=bold))
    return [part for part in parts if part], []


def head_figures(head: Headline, *, queued_first: bool = False) -> list[str]:
    """The headline's waits and queued jobs, as every one-line surface says them."""
    waits = [wait_of(head.wait), wait_of(head.start) if head.start is not None else ""]
    queued = [queued_said(head.queued)]
    return [figure for figure in (queued + waits if queued_first else waits + queued) if figure]


def type_lines(
    view: FleetSnapshot, trend: Trend = EMPTY, *, top: int = TOP_TYPES, home: bool = False
) -> list[str]:
    """The worst `top` types, then how many more; on the App Home, names as code and maximums."""
    ranked = worst_first(view.runner_types)
    # A source that counts only jobs queued longer than a threshold says nothing of the others.
    over = view.queued_over_mins
    absent = f"none queued over {minutes(over)}" if over else "none queued"
    lines = []
    for name, metrics in ranked[:top]:
        here = absent if name in view.absent else ""
        parts, advice = type_parts(metrics, here)
        if spark := sparkline(trend.queued_of(name, SPARK_POINTS)):
            parts.append(spark)  # plain: Slack draws inline code red on grey; bars need no escape
        label = md.runner_name(name) if name else "all runner types"
        if home:
            label = f"`{md.runner_name(name)}`"
            parts += [] if here else _maximum(metrics)
        lines.append(f"• {label}: {' · '.join(parts + advice) or 'no numbers'}")
    if more := max(len(ranked) - top, 0) + view.hidden:
        also = " (`/queue` lists them)" if view.is_live else ""  # a live reading's, not an alert's
        lines.append(f"+{more} more runner types{also}")
    return lines


def _maximum(metrics: RunnerTypeMetrics) -> list[str]:
    j = metrics.judged
    maximum = j.maximum if j is not None else metrics.maximum
    busy = "" if j is not None else busy_said(metrics.busy, metrics.registered)
    return [part for part in (busy, maximum is not None and f"max {number(maximum)}") if part]


def source_note(view: FleetSnapshot) -> str:
    """Where the numbers come from, and what went wrong if they are the alert's instead."""
    note = md.in_zone(md.escape(view.note), view.at)  # "GitHub's quota … until 14:02:07 UTC"
    if view.note and not view.is_live:
        return f"⚠️ {note}"
    head = f"Live from {md.escape(source_name(view.source))}" if view.is_live else "From the alert"
    if view.is_live and view.paced_s:
        head += f", read {read_at(view)}"
    return f"{head} · ⚠️ {note}" if view.note else head


def read_at(fleet: FleetSnapshot) -> str:
    """When the reading was made, and when the next comes where its source paces it to a quota."""
    when = f"at {md.time_of(fleet.at)}"
    if fleet.paced_s:
        when += f", next at {md.time_of(fleet.at + timedelta(seconds=fleet.paced_s))}"
    return when


def _comparable(now: RunnerQueue, was: RunnerQueue | None) -> float | None:
    """The earlier wait of now's measure; a wait "over" a bound has no change: it is the bound."""
    if was is None or now.wait_over or was.wait_over:
        return None
    return was.longest_wait_mins if bool(now.wait_of_starts) == bool(was.wait_of_starts) else None


def status_figures(current: Snapshot, previous: Snapshot | None) -> tuple[list[str], str]:
    """A status's fields ("Queued jobs: *43* (▲ +6)") and notification line: a change only from
    the same measure (a sum of the types' queues is none from the alert's own figure)."""
    now_n, before = current.numbers, previous.numbers if previous else None
    items = []
    for starts, mins in ((False, now_n.max_queue_time_mins), (True, now_n.slowest_start_mins)):
        if mins is None:
            continue
        wait = measured(mins, current.runner_types.values(), starts=starts)
        label, value = wait_words(wait) or ("", "")
        was = before and (before.slowest_start_mins if starts else before.max_queue_time_mins)
        earlier = previous and measured(was, previous.runner_types.values(), starts=starts)
        delta = change(mins, _comparable(wait, earlier or None), "min")
        items.append((label.capitalize(), value, delta))
    if now_n.max_queue_size is not None:
        alike = previous and sums_types(current.runner_types) == sums_types(previous.runner_types)
        was = before.max_queue_size if before and alike else None
        items.append(
            ("Queued jobs", number(now_n.max_queue_size), change(now_n.max_queue_size, was))
        )
    line = ", ".join(f"{label.lower()} {value}{paren(d)}" for label, value, d in items)
    return [figure(label, value, paren(d)) for label, value, d in items], line


def type_changes(current: Snapshot, previous: Snapshot | None) -> list[str]:
    """Current runner types worst first with their change; then the ones that stopped queueing."""
    before = previous.runner_types if previous else {}
    rows = []
    for name, queue in worst_first(current.runner_types):
        was = before.get(name)
        parts = []
        if queue.queued is not None:
            delta = change(queue.queued, was.queued if was else None)
            parts.append(f"{number(queue.queued)} queued{paren(delta)}")
        if wait := wait_of(queue):
            delta = change(queue.longest_wait_mins, _comparable(queue, was), "min")
            parts.append(f"{wait}{paren(delta)}")
        rows.append(f"• {md.runner_name(name)}: {' · '.join(parts) or 'no numbers'}")
    rows += gone_lines(previous, current.runner_types)
    return _capped(rows[:MAX_RUNNER_ROWS], len(rows) - MAX_RUNNER_ROWS)


def gone_lines(previous: Snapshot | None, now: Mapping[str, object]) -> list[str]:
    gone = sorted(set(previous.runner_types if previous else {}) - set(now))
    return [f"• {md.runner_name(name)}: no longer queueing" for name in gone]


class Peak(NamedTuple):
    """One of the worst numbers seen, labelled by its measure, and when (None: no reading kept)."""

    label: str
    value: str
    at: datetime | None


class Peaks(NamedTuple):
    wait: Peak | None
    start: Peak | None
    queued: Peak | None


def peak_figures(incident: Incident) -> Peaks:
    peak, types = incident.peaks.numbers, incident.peaks.types.values()
    waits = []
    for mins, starts, at in (
        (peak.max_queue_time_mins, False, incident.peaks.wait_at),
        (peak.slowest_start_mins, True, incident.peaks.start_at),
    ):
        said = wait_words(measured(mins, types, starts=starts))  # "over" as the type read it
        waits.append(Peak(f"Peak {said[0]}", said[1], at) if said else None)
    if peak.max_queue_size is None:
        return Peaks(*waits, None)
    # Of several types, their sum at one moment; before a snapshot named them, the alert's figure.
    label = "Peak queued jobs (as the alert said)"
    if incident.peak_summed:
        typed = sum(1 for queue in types if queue.queued is not None)
        label = "Peak queued jobs (all runner types)" if typed > 1 else "Peak queued jobs"
    moment = incident.peaks.moment
    at = moment.at if moment is not None else None
    return Peaks(*waits, Peak(label, number(peak.max_queue_size), at))


def peak_said(item: Peak, clock: Clock, bold: str = "*") -> str:
    """ "Peak queued jobs: *43* at 14:05"."""
    return figure(item.label, item.value, at_said(item, clock), bold)


def figure(label: str, value: str, after: str = "", bold: str = "*") -> str:
    """ "Queued jobs: *43* (▲ +6)": a headline's number and what follows it."""
    return f"{label}: {bold}{value}{bold}{after}"


def at_said(item: Peak, clock: Clock) -> str:
    return f" at {clock(item.at)}" if item.at is not None else ""


def drained_in(incident: Incident, bold: str = "*") -> str:
    """ "Drained in: *55 min* from the peak", where the live readings saw the queue drain by the
    drain rule (a followed queue that only fell under the alert's thresholds did not drain)."""
    peak, follow = incident.peaks.moment, incident.drain.follow
    drained = incident.resolved.how is Resolution.DRAINED
    followed = follow is None or follow.ended == DRAINED
    if incident.resolved.at is None or not (drained and followed and peak):
        return ""
    return figure("Drained in", duration(incident.resolved.at - peak.at), " from the peak", bold)


def left_queued(incident: Incident, bold: str = "*") -> str:
    """ "Still queued at resolve: *1 job* (the alert cleared under its thresholds)": what the last
    live reading saw of a resolve other than by draining, and why it resolved anyway."""
    view, follow, how = incident.live, incident.drain.follow, incident.resolved.how
    if incident.resolved.at is None or view is None or not view.is_live:
        return ""
    if how is Resolution.MANUAL:
        why = "resolved by hand"
    elif follow is not None and follow.ended == UNDER:
        why = "the alert cleared and the queue fell under its thresholds"
    elif follow is not None and follow.ended == CAPPED:
        followed = duration(incident.resolved.at - follow.cleared_at)
        why = f"the alert cleared; following stopped at its cap, {followed} later"
    elif how is Resolution.ALERT:
        why = "the alert cleared under its thresholds"
    else:  # drained by the drain rule: what it left (within DRAIN_MAX_QUEUED) is drained
        return ""
    if not (queued := sum(m.queued or 0 for m in view.runner_types.values())):
        return ""
    return figure("Still queued at resolve", md.plural(round(queued), "job"), f" ({why})", bold)


def impact_figures(
    incident: Incident, clock: Clock, bold: str = "*"
) -> tuple[list[str], list[str]]:
    """The summary's peaks, then how the queue ended: drained in, or still queued at resolve."""
    peaks = [peak_said(peak, clock, bold) for peak in peak_figures(incident) if peak is not None]
    ended = (drained_in(incident, bold), left_queued(incident, bold))
    return peaks, [said for said in ended if said]


def peak_rows(incident: Incident) -> list[str]:
    """Each runner type at its worst: the summary's, and the root's once resolved."""
    rows = []
    for name, queue in worst_first(incident.peaks.types)[:MAX_PEAK_ROWS]:
        if said := " · ".join(type_parts(queue, bold=False)[0]):
            rows.append(f"• {md.runner_name(name) or 'all runner types'}: {said}")
    return _capped(rows, len(incident.peaks.types) - MAX_PEAK_ROWS)


def _capped(rows: list[str], more: int) -> list[str]:
    return [*rows, f"+{more} more runner types"] if more > 0 else rows


def root_figures(incident: Incident, head: Headline) -> list[str]:
    """The headline's wait and queued jobs against the alert's thresholds (else the alert's other
    values), beside the same measure's peak; a live headline says how many types were unread."""
    live, unread = head.live, ""
    queued = None if head.worst or head.queued is None else number(head.queued)
    if live is not None:
        types: Iterable[RunnerQueue | RunnerTypeMetrics] = live.runner_types.values()
        peaks, overs = Peaks(None, None, None), (None, None)
        if live.missing:  # a sum without them would read as fewer than there are
            unread = f"{len(live.missing)} runner types unread"
    else:
        types, peaks = incident.runner_types.values(), peak_figures(incident)
        overs = (incident.numbers.queue_time_over, incident.numbers.queue_size_over)
        if queued is not None and incident.peak_summed != sums_types(incident.runner_types):
            peaks = peaks._replace(queued=None)  # the types' sum is no peak of the alert's own
    summed = sum(1 for queue in types if queue.queued is not None)
    size_limit, time_limit = thresholds(incident)
    size_said = _against(size_limit, overs[1], number, summed=summed)
    rows = [
        *_wait_rows(head, peaks, _against(time_limit, overs[0], minutes)),
        ("queued jobs", queued, peaks.queued, [size_said, unread]),
    ]
    items = []
    for label, value, top, notes in rows:
        if value is not None and top is not None and top.value != value:
            notes.append(f"peak {top.value}{at_said(top, md.time_of)}")
        said = paren(", ".join(filter(None, notes)))
        if value is not None:
            items.append(figure(label.capitalize(), value, said))
        elif top is not None:
            items.append(peak_said(top, md.time_of) + said)
    return items or [
        f"{md.escaped(name, 100)} = *{number(value)}*"
        for name, value in incident.other_values.items()
    ]


Row = tuple[str, str | None, Peak | None, list[str | None]]


def _wait_rows(head: Headline, peaks: Peaks, against: str | None) -> list[Row]:
    """The headline's wait, then the slowest recent start beside an oldest job's age, each by its
    measure's peak (resolved: the peaks alone); `against` is said beside the first."""
    if head.worst:
        return [("", None, peaks.wait, [against]), ("", None, peaks.start, [])]
    said, of_starts = wait_words(head.wait), bool(head.wait.wait_of_starts)
    first = peaks.start if of_starts else peaks.wait
    rows: list[Row] = [(said[0] if said else "", said[1] if said else None, first, [against])]
    if not of_starts:
        label, value = (wait_words(head.start) if head.start is not None else None) or ("", None)
        rows.append((label, value, peaks.start, []))
    return rows


def _against(
    threshold: float | None, over: bool | None, shown: Callable[[float], str], *, summed: int = 1
) -> str | None:
    """The number against its threshold, or whether a rule crossed it. A queue `summed` over
    several types is not what the rule holds to its threshold: said so."""
    if threshold is not None:
        return f"threshold {shown(threshold)}" + (" for a runner type" if summed > 1 else "")
    if over is None:
        return None
    if summed > 1:
        return "a type over the rule's threshold" if over else "no type over the rule's threshold"
    return "over the rule's threshold" if over else "under the rule's threshold"


def paren(text: str | None) -> str:
    return f" ({text})" if text else ""


def wait_cell(queue: RunnerQueue | RunnerTypeMetrics) -> str:
    """A table's wait: as measured; "–" where no job waited, "?" where it was not read."""
    return wait_of(queue) or ("–" if queue.queued == 0 else "?")


def queued_cell(queued: float | None) -> str:
    return number(queued) if queued is not None else "?"


def point_cell(point: tuple[float | None, float | None] | None) -> str:
    """A moment of the trend (queued, wait) in a table, "43 · 12 min"; "" where not read then."""
    said = _wait_words(point[1]) if point else None
    return "" if point is None else queued_cell(point[0]) + (f" · {said[1]}" if said else "")


def still_live_said(live: StillLive, *, thresholds: bool = True) -> str:
    """What is still over when a Resolve asks; without `thresholds`, as the timeline keeps it."""
    queued, each = live.queued, " for a runner type" if live.per_type else ""
    jobs = queued is not None and f"{number(queued)} job{'' if queued == 1 else 's'} still queued"
    parts = []
    for said, threshold, shown, of in (
        (jobs, live.queued_threshold, number, each),
        (live.wait and f"the {wait_of(live.wait)}", live.wait_threshold, minutes, ""),
    ):
        if not said:
            continue
        if not thresholds:
            parts.append(said)
        elif threshold is None:  # from a rule that says only whether it was crossed
            parts.append(f"{said} (the alert last said it was over its threshold)")
        else:
            parts.append(f"{said} (the alert's threshold is {shown(threshold)}{of})")
    return ", ".join(parts)
