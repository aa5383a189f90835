"""A warning before the alert: will this runner type's queue cross the alert's thresholds soon?

Every alerting tool in this field speaks once the alert has fired. The fleet reading already
says where each type is heading, so queuepilot can say it minutes earlier, with what would stop
it. The model, per runner type, from its last few readings:

- **Jobs in the system** `N = busy + queued` (ARC: its assigned jobs) changes by arrivals minus
  completions. The evidence of a build is a least-squares line through `N` at the last `WINDOW`
  readings that rises beyond what the readings' own scatter explains: its slope at least
  `T_MIN` standard errors above flat, and at least `MIN_RISE` jobs from the window's first
  reading to its last. Five readings alone misjudge their own scatter often enough (a wander
  that happens to line up looks like a line with no scatter: a queue wandering over ten jobs
  warned six times a day), so the slope must also stand `T_NOISE` standard errors above flat
  at the readings' noise measured over the last `NOISE_READINGS`: how far each reading strays
  from the line through its two neighbours (a steady rise strays not at all, the one bend where
  it begins is outvoted by the median; a reading that repeats the one before, a backend not yet
  refreshed, is left out, as a rise read in steps would stray like noise). A queue wandering
  over a few jobs in any order never draws such a line (the fitted rise of values in a range of
  `r` jobs is at most 1.2 `r` over five readings); three rises in a row, which noise makes every
  few dozen readings, are not evidence. A warning also needs at least `MIN_QUEUED` jobs queued
  now, unless the crossing comes before a runner asked for now could boot (a surge onto idle
  runners: waiting for a queue would leave nothing to act on). The growth is arrivals minus
  completions where the backend counts both, as the incident's recommendation reads it, else
  that slope.
- **Capacity** is the runners now (the most of registered and busy: a reading can lag a
  runner's registration), and the type's maximum once a boot time has
  passed (the autoscaler adds runners up to it; unknown maximum: the runners now).
- **Queued** at `t` minutes is `N(t) − capacity(t)`, and the **longest wait** about the queue
  over the throughput at capacity (`capacity / job duration`, at least one runner's, Little's
  law), never more than the longest wait now plus `t` where that is read; without a job
  duration, that alone.
- The crossing is the first minute, within the horizon, at which either reaches the alert's
  threshold. **The runners it recommends** are the reading's judgement of the type
  (`bot.domain.judgement`), as every incident surface renders it.

A standing warning (`sustained`) needs no fresh evidence: it stands while the forecast, at the
growth the window shows (none, when it falls), still crosses within the horizon, and is withdrawn
only once it does not (a queue just under its threshold is no queue "no longer building"). More
runners never bring a crossing sooner, and a queue that only wanders never warns (property tests
hold the model to both). Pure: the early warning's upkeep (`bot.status.early_warning`) decides
what to post from it.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from bot.domain.fleet import RunnerTypeMetrics
from bot.domain.incidents import EARLY_WARNING, Event, Incident
from bot.domain.judgement import finite
from bot.domain.runner_names import runner_key
from bot.domain.units import duration, number

# Readings the growth is fitted over: four intervals, four minutes at the default reading
# interval of a minute; fewer cannot tell a trend from a wander.
WINDOW = 5
# Standard errors the slope must stand above flat: Student's t for the fit's 3 degrees of
# freedom at about 0.5% one-sided (noise passes ~1 window in 200; 3.0 let ~1 in 35 through:
# 16 false warnings a day for a queue wandering over 6 jobs, 3 now).
T_MIN = 6.0
# Standard errors the slope must stand above flat at the noise of the last readings: measured
# over some thirty of them, it is known well enough for a normal's tail (4: 0.003% one-sided).
# `make bench`: a build of +2 jobs/min on a queue wandering over 4 jobs is warned before 30 are
# queued in 19 seeds of 40 (6: 5; the fit's bar alone: 34, but 2 to 9 false warnings a day on
# a queue wandering over 10 jobs); 3 let about one false warning a day through.
T_NOISE = 4.0
# Readings the noise is measured over: half an hour at the default reading interval. A dozen
# still let a queue wandering over ten jobs warn about once in two days (the median of ten
# strays is itself noisy); thirty, none in twenty simulated days of wanders over 10 to 40 jobs.
NOISE_READINGS = 30
# Strays needed to measure the noise by: the median of fewer swings with each reading.
MIN_STRAYS = 5
# Jobs the fitted line must rise across the window: noise of a few jobs can line up by chance
# in five readings (a perfect line has no scatter), never by more than 1.2 times its range.
MIN_RISE = 5.0
MIN_QUEUED = 3.0  # jobs queued now before a warning (unless sooner than a boot): fewer is noise
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
    hold_runners: int | None  # more runners the reading's judgement asks for
    headroom: float | None = None  # runners that still fit under the maximum
    advice: str = ""  # the recommendation, in the words the incident's surfaces use

    @property
    def text(self) -> str:
        """`linux.2xlarge: queue building, 9 jobs queued and +1.4 jobs/min at its maximum of 20
        runners; at this rate the alert fires in ~11 min; +6 runners would drain it in 30 min`"""
        queued = number(self.queued)
        jobs = "no jobs queued yet" if queued == "0" else f"{queued} {_jobs(self.queued)} queued"
        when = "any minute now" if self.in_mins < 1 else f"in ~{math.ceil(self.in_mins)} min"
        if self.growth_per_min < MIN_GROWTH:  # a standing warning whose queue stopped rising
            text = (
                f"{self.runner_type}: queue holding, {jobs}{self._where()}; "
                f"the alert fires {when} all the same"
            )
        else:
            text = (
                f"{self.runner_type}: queue building, {jobs} and +{self.growth_per_min:.1f} "
                f"jobs/min{self._where()}; at this rate the alert fires {when}"
            )
        return f"{text}; {self.advice}" if self.advice else text

    def _where(self) -> str:
        if self.maximum is None:
            return ""
        if self.at_maximum:
            return f" at its maximum of {number(self.maximum)} runners"
        running = number(self.maximum - (self.headroom or 0.0))
        return f" on {running} runners of its maximum of {number(self.maximum)}"


def _jobs(count: float) -> str:
    return "job" if count == 1 else "jobs"


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
    growth = _growth([*past, Point(at, current)], now, sustained=sustained)
    if growth is None or (not sustained and growth < MIN_GROWTH):
        return None
    registered = _runners(now)
    maximum = finite(now.maximum)
    crossing = _crossing(now, current, growth, registered, thresholds, boot_mins, horizon_mins)
    if crossing is None:
        return None
    in_mins, crosses = crossing
    if not sustained and now.queued < MIN_QUEUED and in_mins >= boot_mins:
        return None
    # The reading's judgement of the type, as the root, a status, diagnostics and the form
    # render it: the same words and number on every surface.
    ahead = now.judged
    return Forecast(
        runner_type=name,
        queued=now.queued,
        growth_per_min=growth,
        maximum=maximum,
        at_maximum=maximum is not None and registered >= maximum,
        headroom=max(maximum - registered, 0.0) if maximum is not None else None,
        in_mins=in_mins,
        crosses=crosses,
        hold_runners=ahead.runners if ahead is not None else None,
        advice=ahead.advice if ahead is not None else "",
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
    """Jobs in the system per minute, or None without the evidence of a build over the last
    `WINDOW` readings (a standing warning needs none: its growth, floored at none, only says
    whether the crossing still comes): arrivals minus completions where the backend counts both
    (jobs in the system grow by exactly that; the line only shows it), else the line's slope.
    Only when the crossing comes: the runners the warning advises are the reading's judgement,
    whose direction is the queue's own."""
    window = points[-WINDOW:]
    fit = _fit(window) if len(window) == WINDOW else None
    if fit is None:
        return None
    slope, error = fit
    # A reading that repeats the one before is a backend not refreshed yet: a rise read in such
    # steps would stray like noise.
    noise = _noise(_refreshed(points[-NOISE_READINGS:])) / _spread(window) ** 0.5
    span = (window[-1].at - window[0].at).total_seconds() / 60
    evident = slope >= T_MIN * error and slope >= T_NOISE * noise and slope * span >= MIN_RISE
    if not sustained and not evident:
        return None
    growth = slope
    arrivals, completions = finite(now.arrival_per_min), finite(now.completed_per_min)
    if arrivals is not None and completions is not None:
        growth = arrivals - completions  # the demand itself, where the backend counts it
    if not math.isfinite(growth):
        return None
    return max(growth, 0.0) if sustained else growth


def _fit(points: Sequence[Point]) -> tuple[float, float] | None:
    """The least-squares slope of jobs in the system per minute, and its standard error (from
    the scatter about the line); None when the readings span no time or are not numbers."""
    xs = _minutes(points)
    ys = [p.in_system for p in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = _spread(points)
    if spread <= 0 or not math.isfinite(mean_y):
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    scatter = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in zip(xs, ys, strict=True))
    return slope, math.sqrt(scatter / (len(xs) - 2) / spread)


def _minutes(points: Sequence[Point]) -> list[float]:
    return [(p.at - points[0].at).total_seconds() / 60 for p in points]


def _spread(points: Sequence[Point]) -> float:
    """The sum of squared distances of the readings' times from their mean (minutes²)."""
    xs = _minutes(points)
    mean_x = sum(xs) / len(xs)
    return sum((x - mean_x) ** 2 for x in xs)


def _refreshed(points: Sequence[Point]) -> list[Point]:
    """The readings without those that repeat the one before (a backend read more often than it
    refreshes repeats itself)."""
    kept = list(points[:1])
    for point in points[1:]:
        if point.in_system != kept[-1].in_system:
            kept.append(point)
    return kept


def _noise(points: Sequence[Point]) -> float:
    """The readings' own noise, in jobs (a standard deviation; 0 with too few readings): the
    median of how far each reading strays from the line through its two neighbours, scaled to
    a standard deviation (the 1.4826 of a normal's median absolute deviation, and the stray's
    own spread, larger than one reading's by the neighbours' share)."""
    xs = _minutes(points)
    strays = []
    for i in range(1, len(points) - 1):
        gap = xs[i + 1] - xs[i - 1]
        if gap <= 0:
            continue
        w = (xs[i] - xs[i - 1]) / gap  # the later neighbour's weight at this reading's time
        line = points[i - 1].in_system * (1 - w) + points[i + 1].in_system * w
        strays.append(abs(points[i].in_system - line) / math.sqrt(1 + w * w + (1 - w) ** 2))
    if len(strays) < MIN_STRAYS or not all(math.isfinite(s) for s in strays):
        return 0.0
    strays.sort()
    middle = len(strays) // 2
    median = strays[middle] if len(strays) % 2 else (strays[middle - 1] + strays[middle]) / 2
    return 1.4826 * median


def _runners(now: RunnerTypeMetrics) -> float:
    """The runners serving the type now: those registered, and never fewer than are busy (the
    two gauges are read a moment apart; a busy runner is a runner)."""
    registered, busy = finite(now.registered), finite(now.busy)
    return max(registered or 0.0, busy or 0.0, 0.0)


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
    maximum = finite(now.maximum)
    maximum = maximum if maximum is not None else registered
    duration = finite(now.job_duration_mins)
    if duration is not None and duration <= 0:
        duration = None
    waited = None if now.wait_of_starts else finite(now.longest_wait_mins)
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
    # FOLDED: the permalink of that incident's root, its thread ("": not known yet, the root
    # not posted at the fold, or Slack did not say).
    incident_link: str = ""
    by: str = ""  # DISMISSED: who
    until: float = 0.0  # DISMISSED: until when
    # ACTIVE: the time of the last good reading, when the fleet has not been read since: the
    # forecast is on hold (0: it is current).
    held_since: float = 0.0
    # ACTIVE: the runners its reading's judgement advised (0: none). Read by 0.25's form only:
    # 0.26's takes the current reading's judgement; kept while both may run, go in 0.27.
    hold_runners: int = 0
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


def taken_on(state: WarningState, incident: Incident, now: datetime) -> Event:
    """The line the incident's timeline keeps for the warning it took on as its alert fired:
    how long before the alert the warning came, and what it forecast then."""
    lead = incident.opened_at - datetime.fromtimestamp(state.warned_at, UTC)
    # An incident may come to show the warning's runner type after it opened.
    when = f"{duration(lead)} before the alert fired" if lead > timedelta(0) else "as it fired"
    text = f"Took on the early warning raised {when}, which said: {state.text}"
    return Event(at=now, kind=EARLY_WARNING, text=text)
