"""A warning before the alert: will this runner type's queue cross the alert's thresholds soon?

Every alerting tool in this field speaks once the alert has fired. The fleet reading already
says where each type is heading, so queuepilot can say it minutes earlier, with what would stop
it. The model, per runner type, from its last few readings:

- **Jobs in the system** `N = busy + queued` (ARC: its assigned jobs) changes by arrivals minus
  completions. Its growth is the smallest of the slope of `N` over a short and a longer window
  of readings and, where the backend counts them, arrivals minus completions: a surge shows in
  all, one noisy step in only some. Growth counts only when `N` rose at every one of the last
  `EVIDENCE` readings (three readings in a row, not one spike).
- **Capacity** is the runners now (the most of registered and busy: a reading can lag a
  runner's registration), and the type's maximum once a boot time has
  passed (the autoscaler adds runners up to it; unknown maximum: the runners now).
- **Queued** at `t` minutes is `N(t) − capacity(t)`, and the **longest wait** about the queue
  over the throughput at capacity (`capacity / job duration`, at least one runner's, Little's
  law), never more than the longest wait now plus `t` where that is read; without a job
  duration, that alone.
- The crossing is the first minute, within the horizon, at which either reaches the alert's
  threshold. **Runners that would hold it** stop the growth: `growth × job duration` more than
  are busy now (beyond the maximum, when the type is at it; else said beside its headroom).

More runners never bring a crossing sooner (a property test holds the model to it). Pure: the
early warning's upkeep (`bot.status.early_warning`) decides what to post from it.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from enum import StrEnum
from itertools import pairwise
from typing import Any

from bot.domain.fleet import RunnerTypeMetrics
from bot.domain.incidents import Incident
from bot.domain.runner_names import runner_key
from bot.domain.units import number

EVIDENCE = 2  # readings in a row with more jobs in the system than the one before
SHORT, LONG = 3, 6  # readings in the short and the long slope
STEP_MINS = 0.25  # the forecast's resolution
MIN_GROWTH = 0.2  # jobs/min: below it a queue is holding, not building


@dataclass(frozen=True)
class Thresholds:
    """Where the alert fires: more than `queued` jobs waiting, or a wait over `wait_mins`."""

    queued: float | None = None
    wait_mins: float | None = None

    @property
    def known(self) -> bool:
        return self.queued is not None or self.wait_mins is not None


def stated_thresholds(name: str, incidents: Sequence[Incident], fallback: Thresholds) -> Thresholds:
    """What the alert rule said last: the latest incident naming this runner type that states
    its thresholds, else the latest that states any, else `fallback` (the settings'). A
    resolved incident's numbers are cleared (the resolve carries none); its peak keeps the
    thresholds of its last firing notification, which is what the rule fires at next. Types
    are matched by `runner_key`, as the incident's view matches an alert's label to a reading."""
    stated = [
        (incident, said)
        for incident in sorted(incidents, key=lambda i: i.started_at, reverse=True)
        if (said := _stated(incident)).known
    ]
    named = [said for incident, said in stated if runner_key(name) in shown_types(incident)]
    return next(iter(named or [said for _, said in stated]), fallback)


def shown_types(incident: Incident) -> set[str]:
    """The runner types an incident shows, by `runner_key` (as a view matches a label to a
    reading)."""
    return {runner_key(name) for name in incident.shown_types}


def _stated(incident: Incident) -> Thresholds:
    for numbers in (incident.numbers, incident.peak):
        said = Thresholds(numbers.queue_size_threshold, numbers.queue_time_threshold)
        if said.known:
            return said
    return Thresholds()


@dataclass(frozen=True)
class Point:
    """One past reading of a runner type: when, and its jobs in the system (busy + queued)."""

    at: datetime
    in_system: float


@dataclass(frozen=True)
class Forecast:
    runner_type: str
    queued: float
    growth_per_min: float
    maximum: float | None
    at_maximum: bool
    in_mins: float  # until the queue crosses a threshold (0: it has)
    crosses: str  # which: "queued" or "wait"
    hold_runners: int | None  # more runners that would stop the growth
    headroom: float | None = None  # runners that still fit under the maximum

    @property
    def text(self) -> str:
        """`linux.2xlarge: queue building, 9 queued and +1.4/min at its maximum of 20; at this
        rate the alert fires in ~11 min; +6 runners would hold it`"""
        where = ""
        if self.maximum is not None:
            where = (
                f" at its maximum of {number(self.maximum)}"
                if self.at_maximum
                else (f" (maximum {number(self.maximum)})")
            )
        when = "any minute now" if self.in_mins < 1 else f"in ~{math.ceil(self.in_mins)} min"
        text = (
            f"{self.runner_type}: queue building, {number(self.queued)} queued and "
            f"+{self.growth_per_min:.1f}/min{where}; at this rate the alert fires {when}"
        )
        if self.hold_runners and self.at_maximum:
            text += f"; +{self.hold_runners} runners would hold it"
        elif self.hold_runners and self.headroom is not None:
            room = number(self.headroom)
            text += f"; ~+{self.hold_runners} runners would hold it ({room} fit under the maximum)"
        return text


def forecast(
    name: str,
    now: RunnerTypeMetrics,
    at: datetime,
    past: Sequence[Point],
    thresholds: Thresholds,
    *,
    boot_mins: float,
    horizon_mins: float,
    sustained: bool = False,
) -> Forecast | None:
    """When `name`'s queue crosses `thresholds` within `horizon_mins`, at the growth its
    readings show (`past`: the earlier readings, oldest first); None when it does not, or the
    evidence is not there. `sustained`: a warning stands already, and it takes a growth that
    stops (not one reading that did not rise) to withdraw it."""
    current = in_system(now)
    if not thresholds.known or current is None or now.queued is None:
        return None
    points = [*past, Point(at, current)]
    growth = _growth(points, now, sustained=sustained)
    if growth is None or growth < MIN_GROWTH:
        return None
    registered = _runners(now)
    maximum = _known(now.maximum)
    duration = _known(now.job_duration_mins)
    crossing = _crossing(
        now, points[-1].in_system, growth, registered, thresholds, boot_mins, horizon_mins
    )
    if crossing is None:
        return None
    in_mins, crosses = crossing
    hold = None
    if duration is not None and duration > 0:
        hold = max(math.ceil(growth * duration), 1)
    return Forecast(
        runner_type=name,
        queued=now.queued,
        growth_per_min=growth,
        maximum=maximum,
        at_maximum=maximum is not None and registered >= maximum,
        headroom=max(maximum - registered, 0.0) if maximum is not None else None,
        in_mins=in_mins,
        crosses=crosses,
        hold_runners=hold,
    )


def in_system(metrics: RunnerTypeMetrics) -> float | None:
    """Jobs in the system now: ARC's assigned jobs (queued and running), else busy runners plus
    queued jobs."""
    if metrics.assigned is not None:
        return metrics.assigned
    if metrics.busy is None or metrics.queued is None:
        return None
    return metrics.busy + metrics.queued


def gauges_in_system(gauges: dict[str, float]) -> float:
    """The same, from a past reading's kept gauges (`HistoryPoint.gauges`; a type not kept had
    nothing queued or assigned)."""
    if "assigned" in gauges:
        return gauges["assigned"]
    return gauges.get("busy", 0.0) + gauges.get("queued", 0.0)


def _growth(points: Sequence[Point], now: RunnerTypeMetrics, *, sustained: bool) -> float | None:
    """Jobs in the system per minute, or None without the evidence of a steady rise: the
    smallest of the short slope, the long slope and, where the backend counts them, arrivals
    minus completions (in the backend's own minutes, which a compressed demo fleet keeps)."""
    if len(points) < EVIDENCE + 1:
        return None
    recent = points[-(EVIDENCE + 1) :]
    if not sustained and any(b.in_system <= a.in_system for a, b in pairwise(recent)):
        return None
    growth = min(_slope(points[-SHORT:]), _slope(points[-LONG:]))
    if now.arrival_per_min is not None and now.completed_per_min is not None:
        growth = min(growth, now.arrival_per_min - now.completed_per_min)
    return growth if math.isfinite(growth) else None


def _known(value: float | None) -> float | None:
    """A gauge the forecast can use: None for one not read, NaN or infinite."""
    return value if value is not None and math.isfinite(value) else None


def _runners(now: RunnerTypeMetrics) -> float:
    """The runners serving the type now: those registered, and never fewer than are busy (the
    two gauges are read a moment apart; a busy runner is a runner)."""
    registered, busy = _known(now.registered), _known(now.busy)
    return max(registered or 0.0, busy or 0.0, 0.0)


def _slope(points: Sequence[Point]) -> float:
    minutes = (points[-1].at - points[0].at).total_seconds() / 60
    return (points[-1].in_system - points[0].in_system) / minutes if minutes > 0 else 0.0


def _crossing(
    now: RunnerTypeMetrics,
    in_system: float,
    growth: float,
    registered: float,
    thresholds: Thresholds,
    boot_mins: float,
    horizon_mins: float,
) -> tuple[float, str] | None:
    """(minutes until a threshold is reached, which one), stepping through the horizon.

    The longest wait is the queue over the throughput at capacity (Little's law, counting at
    least one runner: none serving is no reason to say the alert fires now), and never more
    than the longest wait now plus `t` where the backend reads it: the oldest job ages a
    minute a minute, whatever the queue. Without a job duration it is that alone. A wait "over"
    a bound is a floor, not a cap; the slowest recent start (ARC's metrics) is no queued job's
    age, so it neither caps nor floors anything: the forecast reads as if no wait was read."""
    maximum = _known(now.maximum)
    maximum = maximum if maximum is not None else registered
    duration = _known(now.job_duration_mins)
    if duration is not None and duration <= 0:
        duration = None
    waited = None if now.wait_of_starts else _known(now.longest_wait_mins)
    steps = int(horizon_mins / STEP_MINS)
    for step in range(steps + 1):
        t = step * STEP_MINS
        capacity = registered if t < boot_mins else max(registered, maximum)
        queued = max(in_system + growth * t - capacity, 0.0)
        if thresholds.queued is not None and queued >= thresholds.queued:
            return t, "queued"
        if thresholds.wait_mins is not None and queued > 0:
            aged = max(waited or 0.0, 0.0) + t
            if duration is None:
                wait = aged
            else:  # served: max(capacity, 1) / duration jobs a minute
                wait = queued * duration / max(capacity, 1.0)
                if waited is not None and now.wait_over:
                    wait = max(wait, aged)
                elif waited is not None and not now.wait_of_starts:
                    wait = min(wait, aged)
            if wait >= thresholds.wait_mins:
                return t, "wait"
    return None


# -- a warning's life in Slack ---------------------------------------------------------------


# A warning cleared this recently comes back as an edit of its message, not a new one, and is
# still the one the incident takes on if the alert fires: its episode is not over yet.
REUSE_S = 900
# When a scale-up made from a warning goes back (`WarningState.episode_over`), in words.
SCALE_UNTIL = f"its queue has stopped building for {REUSE_S // 60} min"


class Phase(StrEnum):
    ACTIVE = "active"  # the forecast crosses a threshold soon
    CLEARED = "cleared"  # it no longer does, and the alert did not fire
    FOLDED = "folded"  # the alert fired: the incident carries it on
    DISMISSED = "dismissed"  # someone said not to warn about this type for a while


@dataclass(frozen=True)
class WarningState:
    runner_type: str
    channel: str
    uid: str  # what the post's metadata names it by, for a lookup after a lost answer
    phase: Phase
    text: str  # the forecast in words (`bot.domain.early_warning.Forecast.text`)
    warned_at: float  # when this warning was first raised
    updated_at: float
    version: int = 1
    shown: int = 0  # the version Slack shows (0: not posted yet)
    ts: str = ""
    incident_id: str = ""  # FOLDED: the incident that took it on
    by: str = ""  # DISMISSED: who
    until: float = 0.0  # DISMISSED: until when
    # ACTIVE: the time of the last good reading, when the fleet has not been read since: the
    # forecast is on hold (0: it is current).
    held_since: float = 0.0
    hold_runners: int = 0  # ACTIVE: runners the forecast says would hold the queue (0: unknown)
    scalable: bool = False  # the runner type has a scale target: the message offers Scale up
    # What was scaled from this warning, and later what became of it (put back, left), in words.
    scaled: str = ""

    @classmethod
    def raised(
        cls, runner_type: str, channel: str, text: str, now: float, **fields: Any
    ) -> WarningState:
        uid = secrets.token_hex(6)
        return cls(runner_type, channel, uid, Phase.ACTIVE, text, now, now, **fields)

    def episode_over(self, now: float) -> str:
        """Why this warning's queue is over ("" while it is not), for a scale-up made from it:
        cleared and not back within `REUSE_S` (a queue that pauses, or that the scale-up
        stopped, often builds again), or dismissed and the dismissal run out. Active, or folded
        into an incident (which then owns the scale-up), it is not over."""
        if self.phase is Phase.CLEARED and now - self.updated_at >= REUSE_S:
            return "the queue stopped building"
        if self.phase is Phase.DISMISSED and now >= self.until:
            return "the early warning was dismissed and did not come back"
        return ""

    def changed(self, now: float, **fields: Any) -> WarningState:
        """This warning with `fields` changed, as a new version (unchanged: itself)."""
        updated = replace(self, **fields)
        if updated == self:
            return self
        return replace(updated, version=self.version + 1, updated_at=now)

    @property
    def member(self) -> str:
        return f"warning:{self.runner_type}"

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, raw: str | None) -> WarningState | None:
        try:
            data = json.loads(raw or "")
            return cls(**{**data, "phase": Phase(data["phase"])})
        except (ValueError, TypeError, KeyError):
            return None
