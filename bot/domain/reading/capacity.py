"""Capacity planning: per runner type, what its incidents, the live reading and the backend's
history say about its size, and the one change that would have prevented most of them."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from functools import reduce
from typing import TypeVar
from zoneinfo import ZoneInfo

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import Event, Incident, RunnersSeen, most_runners
from bot.domain.queue_cost.cost import Waited, summed
from bot.domain.queue_cost.waited import (
    Covered,
    at_max,
    by_hour_of_week,
    covered_by_max,
    covered_by_min,
    job_hours,
)
from bot.domain.reading.early_warning import Thresholds, stated_thresholds
from bot.domain.reading.fleet import (
    OomKill,
    RunnerTypeMetrics,
    longest_wait,
    of_measure,
    of_type,
    ranked_workflows,
)
from bot.domain.reading.judgement import to_drain
from bot.domain.reading.runner_names import runner_key, same_type
from bot.domain.reading.runner_pods import STUCK_SHARE
from bot.domain.scale.scale_record import TypeScaled, scale_record
from bot.domain.units import number, plural

NO_TYPE = ""  # incidents whose alert and readings named no runner type
RECOMMEND_INCIDENTS = 2
RECOMMEND_FIRING = timedelta(hours=2)
RECOMMEND_AT_MAX_H = 8.0  # hours at the maximum in the window that make its size a question
# Hours unschedulable (and half the hours at the maximum) that make the nodes the limit.
UNSCHEDULABLE_H = 2.0
SHOWN_OVER_H = 0.25  # a type only the history names is shown from a quarter hour over or at max
V = TypeVar("V")

Series = Mapping[float, float]  # unix time -> value, one per step of a range query


@dataclass(frozen=True, kw_only=True)
class HistoryFigures:
    """What a backend's history says of one runner type over the window, shown as it is."""

    wait_p50_mins: float | None = None
    wait_p90_mins: float | None = None
    # Every job's queue time (ARC's histogram), or the longest wait at queuepilot's readings.
    quantiles_of: str = "queue time"
    # Minutes Pending summed over its pods, the longest one waited, hours any was unschedulable.
    pending_pod_mins: float | None = None
    pending_longest_mins: float | None = None
    unschedulable_hours: float | None = None


@dataclass(frozen=True)
class TypeHistory(HistoryFigures):
    """One runner type over the report's window: series a step apart, and quantiles."""

    step_s: float
    queued: Series = field(default_factory=dict)
    wait_mins: Series = field(default_factory=dict)
    level: Series = field(default_factory=dict)  # runners wanted or registered
    maximum: Series = field(default_factory=dict)
    job_mins: float | None = None  # the mean minutes a job ran
    # ARC deletes a killed pod within seconds, so most kills show only on the nodes.
    node_oom_kills: float | None = None

    def hours_over(self, thresholds: Thresholds) -> float | None:
        """Hours over the alert's thresholds, alerting or not (None: no threshold or series)."""
        pairs = ((self.queued, thresholds.queued), (self.wait_mins, thresholds.wait_mins))
        known = [(series, limit) for series, limit in pairs if limit is not None and series]
        over = {at for series, limit in known for at, value in series.items() if value > limit}
        return len(over) * self.step_s / 3600 if known else None

    @property
    def hours_at_max(self) -> float | None:
        if not self.level or not self.maximum:
            return None
        return len(at_max(self.level, self.maximum)) * self.step_s / 3600

    @property
    def peak_queued(self) -> float | None:
        return max(self.queued.values()) if self.queued else None


@dataclass(frozen=True)
class FleetHistory:
    types: Mapping[str, TypeHistory] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class DryRuns:
    """A dry-run pilot's acts on a type over the window, and for each incident where a person
    scaled it too, the minutes its first act came before the person's first (negative: after)."""

    acts: int
    runners: int
    sooner_mins: tuple[float, ...] = ()


@dataclass(frozen=True)
class TypeReport(HistoryFigures):
    runner_type: str
    incidents: int = 0
    firing: timedelta = timedelta()
    peak_queued: float | None = None
    peak_wait: RunnerQueue | None = None  # the longest oldest job's age, as it was measured
    peak_start: RunnerQueue | None = None  # the slowest recent start: its own measure
    scale_ups: Mapping[str, int] = field(default_factory=dict)  # who -> how many
    scaled: TypeScaled | None = None  # what came of them, over its incidents' scale records
    minimum: float | None = None
    maximum: float | None = None
    busy: float | None = None  # the most its incidents saw busy, of `registered`
    registered: float | None = None
    hours_at_max: float | None = None
    hours_over: float | None = None
    oom_kills: int = 0
    oom_workflows: tuple[tuple[str, int], ...] = ()
    recommendation: str = ""
    # What the queue cost (`bot.domain.queue_cost.waited`): job-hours waited, those at the
    # maximum, the same by UTC hour of week, and what the recommendation would have served of them.
    waited_hours: float | None = None
    waited_at_max_hours: float | None = None
    waited_by_hour: tuple[float, ...] = ()
    covered: Covered | None = None
    cost: Waited | None = None  # its incidents' jobs, as their records say it (`summed`)
    dry_runs: DryRuns | None = None

    @property
    def share_at_max(self) -> float | None:
        if not self.waited_hours or self.waited_at_max_hours is None:
            return None
        return self.waited_at_max_hours / self.waited_hours


@dataclass(frozen=True)
class Raise:
    field: str  # "maxRunners" or "minRunners"
    was: float
    to: float


def capacity_report(
    incidents: Sequence[tuple[Incident, Sequence[Event]]],
    live: Mapping[str, RunnerTypeMetrics],
    *,
    since: datetime,
    now: datetime,
    only: str | None = None,
    history: Mapping[str, TypeHistory] | None = None,
    thresholds: Thresholds | None = None,
    kills: Sequence[OomKill] = (),
) -> list[TypeReport]:
    """One report per runner type with incidents in [since, now], or whose history shows it over
    the thresholds or at its maximum (or `only`), worst first."""
    grouped: dict[str, list[tuple[Incident, Sequence[Event]]]] = {}
    for incident, events in incidents:
        if incident.started_at > now or (incident.resolved.at or now) < since:
            continue
        for name in _types_of(incident):
            grouped.setdefault(name, []).append((incident, events))
    # The readings may name a type otherwise than its alerts (ARC's `linux-2xlarge`).
    names = {runner_key(name): name for name in grouped}
    history = _named_as(history or {}, names)
    live = _named_as(live, names)
    if only:
        only = {**{runner_key(n): n for n in history}, **names}.get(runner_key(only), only)
    reports = []
    for name in [only] if only else sorted({*grouped, *history}):
        kept = grouped.get(name, [])
        stated = stated_thresholds(name, [i for i, _ in incidents], thresholds or Thresholds())
        past = history.get(name)
        report = _report(name, kept, live.get(name), since, now, past, stated)
        killed = [
            k for k in kills if since <= (k.at or now) <= now and same_type(k.runner_type, name)
        ]
        on_nodes = round(past.node_oom_kills or 0) if past else 0
        if killed or on_nodes:
            workflows = ranked_workflows(k.workflow for k in killed)  # those whose pods were caught
            report = replace(report, oom_kills=max(len(killed), on_nodes), oom_workflows=workflows)
        # Without thresholds to judge it by, a type whose history queued at all is shown.
        unjudged = report.hours_over is None and (report.peak_queued or 0) > 0
        over = max(report.hours_over or 0, report.hours_at_max or 0) >= SHOWN_OVER_H
        if only or kept or unjudged or over:
            reports.append(report)
    return sorted(
        reports, key=lambda r: (-r.firing, -(r.hours_over or 0), -r.incidents, r.runner_type)
    )


def report_channels(
    reports: Sequence[TypeReport],
    incidents: Sequence[Incident],
    *,
    default: str,
    routed: Callable[[str], str],
) -> dict[str, list[TypeReport]]:
    """Each type's part goes to its latest incident's channel, else its early warning's
    (`routed`); `default` always gets a report."""
    latest: dict[str, str] = {}
    for incident in sorted(incidents, key=lambda i: i.started_at):
        latest.update(dict.fromkeys(_types_of(incident), incident.channel or default))
    out: dict[str, list[TypeReport]] = {default: []}
    for report in reports:
        channel = latest.get(report.runner_type) or routed(report.runner_type)
        out.setdefault(channel, []).append(report)
    return out


def _named_as(values: Mapping[str, V], names: Mapping[str, str]) -> dict[str, V]:
    return {names.get(runner_key(name), name): value for name, value in values.items()}


def _types_of(incident: Incident) -> list[str]:
    return sorted(incident.shown_types) or [NO_TYPE]


def _report(
    name: str,
    incidents: Sequence[tuple[Incident, Sequence[Event]]],
    live: RunnerTypeMetrics | None,
    since: datetime,
    now: datetime,
    history: TypeHistory | None,
    thresholds: Thresholds,
) -> TypeReport:
    firing = sum(
        (min(i.resolved.at or now, now) - max(i.started_at, since) for i, _ in incidents),
        timedelta(),
    )
    peaks = [p for i, _ in incidents if (p := i.peaks.types.get(name)) is not None]
    queued = [p.queued for p in peaks if p.queued is not None]
    if history is not None and history.peak_queued is not None:
        queued.append(history.peak_queued)
    minimum, maximum = (live.minimum, live.maximum) if live else (None, None)
    if maximum is None and history is not None and history.maximum:
        maximum = history.maximum[max(history.maximum)]  # the latest the history knows
    # Where incidents cover the type, its runners as they recorded them, not as they are now
    # (a raised maximum put back since), nor the history's series.
    ran = RunnersSeen()
    for incident, _ in incidents:
        ran = most_runners(ran, incident.peaks.runners.get(name))
    if ran.maximum is not None:
        minimum, maximum = ran.minimum, ran.maximum
    duration = (live.job_duration_mins if live else None) or (history.job_mins if history else None)
    made = [e.scale for _, events in incidents for e in events if e.scale is not None]
    scalers = Counter(done.by or "someone" for done in made if same_type(done.runner_type, name))
    records = (r for i, _ in incidents for r in scale_record(i) if same_type(r.runner_type, name))
    scaled = reduce(TypeScaled.plus, records, TypeScaled(name))
    past: dict[str, object] = {}
    if history is not None:
        past = {f.name: getattr(history, f.name) for f in fields(HistoryFigures)}
        past.update(hours_at_max=history.hours_at_max, hours_over=history.hours_over(thresholds))
        past.update(_waited(history))
    costs = [
        cost for i, _ in incidents if (cost := of_type(i.queue_cost.by_type, name)) is not None
    ]
    report = TypeReport(
        runner_type=name,
        dry_runs=_dry_runs(name, incidents),
        incidents=len(incidents),
        cost=summed(costs),
        firing=max(firing, timedelta()),
        peak_queued=max(queued, default=None),
        peak_wait=longest_wait(of_measure(peaks, starts=False)),
        peak_start=longest_wait(of_measure(peaks, starts=True)),
        scale_ups=dict(scalers.most_common()),
        scaled=scaled if scaled.all.count else None,
        minimum=minimum,
        maximum=maximum,
        busy=ran.busy,
        registered=ran.registered,
        **past,
    )
    recommendation, raised = _recommendation(report, duration)
    covered = _covered(history, raised, report.waited_hours) if history and raised else None
    return replace(report, recommendation=recommendation, covered=covered)


def _dry_runs(name: str, incidents: Sequence[tuple[Incident, Sequence[Event]]]) -> DryRuns | None:
    acts, runners, sooner = 0, 0, []
    for _, events in incidents:
        would = [e for e in events if e.would is not None and same_type(e.would.runner_type, name)]
        people = [
            e.at
            for e in events
            if e.scale is not None and not e.scale.pilot and same_type(e.scale.runner_type, name)
        ]
        acts += len(would)
        runners += sum(e.would.runners for e in would if e.would is not None)
        if would and people:
            sooner.append((min(people) - min(e.at for e in would)).total_seconds() / 60)
    return DryRuns(acts, runners, tuple(sooner)) if acts else None


def _waited(history: TypeHistory) -> dict[str, object]:
    if (waited := job_hours(history.queued, history.step_s)) is None:
        return {}
    steps = (history.queued, history.level, history.maximum, history.step_s)
    at_top = covered_by_max(*steps, math.inf) if history.level and history.maximum else None
    by_hour = by_hour_of_week(history.queued, history.step_s)
    return {"waited_hours": waited, "waited_at_max_hours": at_top, "waited_by_hour": by_hour}


def _covered(history: TypeHistory, raised: Raise, waited: float | None) -> Covered | None:
    """The job-hours the raise would have served, if each runner added served one queued job a
    step: above the maximum while at it, or warm where the level was under the new minimum."""
    if not waited or not history.level:
        return None
    if raised.field == "minRunners":
        served = covered_by_min(history.queued, history.level, history.step_s, raised.to)
    elif history.maximum:
        steps = (history.queued, history.level, history.maximum, history.step_s)
        served = covered_by_max(*steps, raised.to - raised.was)
    else:
        return None
    return Covered(raised.field, served, waited)


def _recommendation(report: TypeReport, duration: float | None) -> tuple[str, Raise | None]:
    """The maximum that drains the worst peak within 30 minutes, when a size matters."""
    at_top = report.hours_at_max or 0.0
    often = (
        report.incidents >= RECOMMEND_INCIDENTS
        or report.firing >= RECOMMEND_FIRING
        or at_top >= RECOMMEND_AT_MAX_H
    )
    if not often or not report.runner_type:
        return "", None
    hours = report.firing.total_seconds() / 3600
    why = f"{plural(report.incidents, 'incident')}, {hours:.1f} h firing"
    if at_top >= 1:
        why = f"at its maximum {at_top:.0f} h, {why}"
    stuck = report.unschedulable_hours or 0.0
    if stuck >= UNSCHEDULABLE_H and stuck >= STUCK_SHARE * at_top:
        return (
            f"{why}: its runner pods sat unschedulable {stuck:.0f} h (no node fits): the node "
            "group is the limit, not maxRunners: look at the cluster autoscaler or Karpenter"
        ), None
    if report.hours_at_max is not None and at_top < SHOWN_OVER_H and report.peak_queued:
        return _warmer(report, why)
    if report.maximum is None or report.peak_queued is None or not duration:
        unknown = "its maximum" if report.maximum is None else "its jobs' duration"
        if report.maximum is not None and report.peak_queued is None:
            unknown = "its peak queue"
        return f"{why}: a bigger fleet may be due ({unknown} is not known here)", None
    more = to_drain(report.peak_queued, duration, 30)
    if more <= 0:
        return f"{why}, but no queue at the peak: the size is not the cause", None
    raised = Raise("maxRunners", report.maximum, report.maximum + more)
    was, to, peak = number(raised.was), number(raised.to), number(report.peak_queued)
    text = f"{why}: raise maxRunners {was} → {to} (drains its peak of {peak} queued in 30 min)"
    return text, raised


def _warmer(report: TypeReport, why: str) -> tuple[str, Raise | None]:
    """A type never at its maximum queued for runners to start, not for room: warm runners
    (ARC keeps `minRunners` idle on top of its jobs) take the peak at once."""
    peak = report.peak_queued or 0
    of = f" of {number(report.maximum)}" if report.maximum else ""
    held = f"never at its maximum{of}" if not report.hours_at_max else f"rarely at its maximum{of}"
    if report.minimum is None or report.maximum is None:
        said = f"{why}, {held}: not the ceiling; a larger minRunners (warm runners) may be due"
        return said, None
    to = min(report.maximum, report.minimum + math.ceil(peak))
    if to <= report.minimum:
        return f"{why}, {held}: not the ceiling, and its minimum is its maximum", None
    text = (
        f"{why}, {held}: raise minRunners {number(report.minimum)} → {number(to)} (warm "
        f"runners for its peak of {number(peak)} queued)"
    )
    return text, Raise("minRunners", report.minimum, to)


@dataclass(frozen=True)
class Schedule:
    """`REPORT_SCHEDULE`, e.g. `mon 09:00 Europe/London`."""

    day: str  # mon … sun
    hour: int
    minute: int
    timezone: str = "UTC"


DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_TIME = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")


def parse_schedule(text: str | None) -> Schedule | None:
    """`<day> HH:MM [IANA time zone]`; ValueError saying what is wrong; blank: no report."""
    if text is None or not text.strip():
        return None
    words = text.split()
    if len(words) not in (2, 3):
        raise ValueError("use `<day> HH:MM [time zone]`, e.g. `mon 09:00 Europe/London`")
    word, at = words[0].lower(), _TIME.fullmatch(words[1])
    day = word[:3]
    # `tues` and `monday` are days, `mongoose` and `sunset` are not.
    if day not in DAYS or not _DAY_NAMES[DAYS.index(day)].startswith(word):
        raise ValueError(f"{words[0]!r} is not a day: one of {', '.join(DAYS)}")
    if at is None:
        raise ValueError(f"{words[1]!r} is not a time of day (HH:MM, 24 h)")
    zone = words[2] if len(words) == 3 else "UTC"
    try:
        ZoneInfo(zone)
    except (ValueError, KeyError, OSError):
        raise ValueError(f"{zone!r} is not a time zone (IANA, e.g. Europe/London)") from None
    return Schedule(day, int(at[1]), int(at[2]), zone)
