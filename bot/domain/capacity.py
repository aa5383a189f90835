"""Capacity planning after the alert: per runner type, what its incidents over a week (or a month)
say about its size, and the one change that would have prevented most of them.

From queuepilot's own records (the incidents it kept, their timelines) and the fleet's live
reading: incidents and their firing time within the window, the peak queue and wait, the
scale-ups made from Slack and by whom, and the maximum now. The recommendation is in one line:
a type that queued at its maximum on several incidents (or for hours) gets the maximum that
would have drained its worst peak within the drain target (`bot.domain.forecast`); a type that
queued once, briefly, gets none. Pure: `/queue report` reads and renders it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.domain.fleet import RunnerTypeMetrics
from bot.domain.incidents import Event, Incident
from bot.domain.units import number

NO_TYPE = ""  # incidents whose alert and readings named no runner type
RECOMMEND_INCIDENTS = 2
RECOMMEND_FIRING = timedelta(hours=2)
_SCALED = re.compile(r"Scaled (\S+) by ")


@dataclass(frozen=True)
class TypeReport:
    runner_type: str
    incidents: int = 0
    firing: timedelta = timedelta()
    peak_queued: float | None = None
    peak_wait_mins: float | None = None
    scale_ups: Mapping[str, int] = field(default_factory=dict)  # who -> how many
    minimum: float | None = None
    maximum: float | None = None
    recommendation: str = ""


def capacity_report(
    incidents: Sequence[tuple[Incident, Sequence[Event]]],
    live: Mapping[str, RunnerTypeMetrics],
    *,
    since: datetime,
    now: datetime,
    only: str | None = None,
    job_minutes: Mapping[str, float] | None = None,
) -> list[TypeReport]:
    """One report per runner type that had incidents in [since, now] (or `only`), worst first."""
    grouped: dict[str, list[tuple[Incident, Sequence[Event]]]] = {}
    for incident, events in incidents:
        if incident.started_at > now or (incident.resolved_at or now) < since:
            continue
        for name in _types_of(incident):
            grouped.setdefault(name, []).append((incident, events))
    names = [only] if only else sorted(grouped)
    reports = [
        _report(name, grouped.get(name, []), live.get(name), since, now, job_minutes or {})
        for name in names
    ]
    return sorted(reports, key=lambda r: (-r.firing, -r.incidents, r.runner_type))


def _types_of(incident: Incident) -> list[str]:
    names = {*incident.peak_types, *(incident.live.runner_types if incident.live else {})}
    return sorted(names) or [NO_TYPE]


def _report(
    name: str,
    incidents: Sequence[tuple[Incident, Sequence[Event]]],
    live: RunnerTypeMetrics | None,
    since: datetime,
    now: datetime,
    job_minutes: Mapping[str, float],
) -> TypeReport:
    firing = sum(
        (min(i.resolved_at or now, now) - max(i.started_at, since) for i, _ in incidents),
        timedelta(),
    )
    peaks = [i.peak_types.get(name) for i, _ in incidents]
    queued = [p.queued for p in peaks if p is not None and p.queued is not None]
    waits = [
        p.longest_wait_mins for p in peaks if p is not None and p.longest_wait_mins is not None
    ]
    scalers = Counter(
        e.actor_name or e.actor or "someone"
        for _, events in incidents
        for e in events
        if e.kind == "scaled" and _scaled_type(e.text) in (name, None)
    )
    report = TypeReport(
        runner_type=name,
        incidents=len(incidents),
        firing=max(firing, timedelta()),
        peak_queued=max(queued) if queued else None,
        peak_wait_mins=max(waits) if waits else None,
        scale_ups=dict(scalers.most_common()),
        minimum=live.minimum if live else None,
        maximum=live.maximum if live else None,
    )
    duration = (live.job_duration_mins if live else None) or job_minutes.get(name)
    return _recommended(report, duration)


def _scaled_type(text: str) -> str | None:
    """The runner type a scale-up event names ("Scaled linux.2xlarge by +10: …")."""
    found = _SCALED.match(text)
    return found[1] if found else None


def _recommended(report: TypeReport, duration: float | None) -> TypeReport:
    """The maximum that drains the worst peak within 30 minutes, when the type queued often or
    long enough for a size to matter; with what the numbers were."""
    often = report.incidents >= RECOMMEND_INCIDENTS or report.firing >= RECOMMEND_FIRING
    if not often or not report.runner_type:
        return report
    hours = report.firing.total_seconds() / 3600
    why = f"{report.incidents} incidents, {hours:.1f} h firing"
    if report.maximum is None or report.peak_queued is None or not duration:
        return _with(report, f"{why}: a bigger fleet may be due (its maximum is not known here)")
    more = math.ceil(report.peak_queued * duration / 30)  # drains the peak in 30 min
    if more <= 0:
        return _with(report, f"{why}, but no queue at the peak: the size is not the cause")
    to = report.maximum + more
    return _with(
        report,
        f"{why}: raise maxRunners {number(report.maximum)} → {number(to)} (drains its "
        f"peak of {number(report.peak_queued)} queued in 30 min)",
    )


def _with(report: TypeReport, recommendation: str) -> TypeReport:
    return TypeReport(**{**report.__dict__, "recommendation": recommendation})


@dataclass(frozen=True)
class Schedule:
    """When the weekly report goes out (`REPORT_SCHEDULE`, e.g. `mon 09:00 Europe/London`)."""

    day: str  # mon … sun
    hour: int
    minute: int
    timezone: str = "UTC"


DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")


def parse_schedule(text: str | None) -> Schedule | None:
    """`<day> HH:MM [IANA time zone]`, the day's first three letters; ValueError saying what is
    wrong. Blank: no weekly report."""
    if text is None or not text.strip():
        return None
    words = text.split()
    if len(words) not in (2, 3):
        raise ValueError("use `<day> HH:MM [time zone]`, e.g. `mon 09:00 Europe/London`")
    day, at = words[0].lower()[:3], _TIME.fullmatch(words[1])
    if day not in DAYS:
        raise ValueError(f"{words[0]!r} is not a day: one of {', '.join(DAYS)}")
    if at is None:
        raise ValueError(f"{words[1]!r} is not a time of day (HH:MM, 24 h)")
    zone = words[2] if len(words) == 3 else "UTC"
    try:
        ZoneInfo(zone)
    except (ValueError, KeyError, OSError):
        raise ValueError(f"{zone!r} is not a time zone (IANA, e.g. Europe/London)") from None
    return Schedule(day, int(at[1]), int(at[2]), zone)
