"""A warning before the alert: will this runner type's queue cross the alert's thresholds soon?

Jobs in the system (`busy + queued`, ARC: assigned) must build: a least-squares line whose slope
stands well above both the fit's scatter and the readings' noise. The forecast then steps through
the horizon: capacity is the runners now, the maximum once a boot has passed; the wait is the
queue over the throughput (Little's law). A standing warning (`sustained`) stands while the
forecast still crosses within the horizon.
"""

from __future__ import annotations

import json
import math
import secrets
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from dataclasses import fields as fields_of
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from bot.domain.alerting.value_string import finite
from bot.domain.incident.incidents import EARLY_WARNING, Event, Incident, would_event
from bot.domain.reading.fleet import RunnerTypeMetrics
from bot.domain.reading.judgement import Judgement, slope_fit
from bot.domain.reading.runner_names import runner_key
from bot.domain.scale.scale_ups import ScaleUp, follow
from bot.domain.units import duration, number

WINDOW = 5  # readings the growth is fitted over: fewer cannot tell a trend from a wander
# Standard errors the slope must stand above flat: Student's t at 3 degrees of freedom, ~0.5%
# one-sided; then the same at the readings' noise (a normal's tail). Lower bars let a wandering
# queue warn daily.
T_MIN = 6.0
T_NOISE = 4.0
NOISE_READINGS = 30
MIN_STRAYS = 5  # strays the noise is measured by: a median of fewer swings with each reading
MIN_RISE = 5.0  # jobs the line must rise across the window: noise lines up by chance, not far
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
    """What the alert rule said last: the latest incident showing this runner type that states
    its thresholds, else the latest that states any, else `fallback` (the settings')."""
    stated = [
        (incident, said)
        for incident in sorted(incidents, key=lambda i: i.started_at, reverse=True)
        for numbers in (incident.numbers, incident.peaks.numbers)
        if (said := Thresholds(numbers.queue_size_threshold, numbers.queue_time_threshold)).known
    ]
    key = runner_key(name)
    named = [said for i, said in stated if key in {runner_key(n) for n in i.shown_types}]
    return next(iter(named or [said for _, said in stated]), fallback)


@dataclass(frozen=True)
class Point:
    at: datetime
    in_system: float


@dataclass(frozen=True)
class Forecast:
    runner_type: str
    queued: float
    growth_per_min: float
    maximum: float | None
    runners: float  # serving the type now
    in_mins: float  # until the queue crosses a threshold (0: it has)
    crosses: str  # which: "queued" or "wait"
    advice: str = ""  # the judgement's, in the words the incident's surfaces use

    @property
    def text(self) -> str:
        """`linux.2xlarge: queue building, 9 jobs queued at its maximum of 20 runners, jobs
        arriving 1.4/min faster than they finish; at this rate the alert fires in ~11 min; +6
        runners would drain it in 30 min`."""
        queued = number(self.queued)
        jobs = f"{queued} {'job' if self.queued == 1 else 'jobs'} queued"
        jobs = "no jobs queued yet" if queued == "0" else jobs
        where = ""
        if self.maximum is not None and self.runners >= self.maximum:
            where = f" at its maximum of {number(self.maximum)} runners"
        elif self.maximum is not None:
            where = f" on {number(self.runners)} runners of its maximum of {number(self.maximum)}"
        if self.growth_per_min < MIN_GROWTH:  # a standing warning whose queue stopped rising
            text = f"{self.runner_type}: queue holding, {jobs}{where}; the alert fires {self.when}"
            text += " all the same"
        else:
            text = (
                f"{self.runner_type}: queue building, {jobs}{where}, jobs arriving "
                f"{self.growth_per_min:.1f}/min faster than they finish; at this rate the alert "
                f"fires {self.when}"
            )
        return f"{text}; {self.advice}" if self.advice else text

    @property
    def when(self) -> str:
        """ "in ~11 min"; "any minute now" once crossed: the rule's pending period decides."""
        if self.in_mins <= 0:
            return "any minute now"
        return "in under a minute" if self.in_mins < 1 else f"in ~{math.ceil(self.in_mins)} min"


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
    """When `name`'s queue crosses `thresholds` within `horizon_mins` at the growth its readings
    show (`past`: oldest first); None when it does not or the evidence is not there."""
    current = in_system(now)
    if not thresholds.known or current is None or now.queued is None:
        return None
    growth = _growth([*past, Point(at, current)], now, sustained=sustained)
    if growth is None or (not sustained and growth < MIN_GROWTH):
        return None
    # The runners serving it: never fewer than are busy (the gauges are read a moment apart).
    runners = max(finite(now.registered) or 0.0, finite(now.busy) or 0.0, 0.0)
    crossing = _crossing(now, current, growth, runners, thresholds, boot_mins, horizon_mins)
    if crossing is None:
        return None
    in_mins, crosses = crossing
    if not sustained and now.queued < MIN_QUEUED and in_mins >= boot_mins:
        return None
    return Forecast(
        runner_type=name,
        queued=now.queued,
        growth_per_min=growth,
        maximum=finite(now.maximum),
        runners=runners,
        in_mins=in_mins,
        crosses=crosses,
        advice=now.judged.advice if now.judged is not None else "",
    )


def in_system(metrics: RunnerTypeMetrics) -> float | None:
    """ARC's assigned jobs (queued and running), else busy runners plus queued jobs."""
    if metrics.assigned is not None:
        return metrics.assigned
    if metrics.busy is None or metrics.queued is None:
        return None
    return metrics.busy + metrics.queued


def gauges_in_system(gauges: dict[str, float]) -> float:
    """The same from a past reading's kept gauges (a type not kept had none in the system)."""
    if "assigned" in gauges:
        return gauges["assigned"]
    return gauges.get("busy", 0.0) + gauges.get("queued", 0.0)


def _growth(points: Sequence[Point], now: RunnerTypeMetrics, *, sustained: bool) -> float | None:
    """Jobs in the system per minute, or None without the evidence of a build (a standing warning
    needs none): arrivals less completions where both are counted, else the slope."""
    window = points[-WINDOW:]
    fit = _fit(window) if len(window) == WINDOW else None
    if fit is None:
        return None
    recent = points[-NOISE_READINGS:]
    noise = _noise(_changes(recent))
    if _minutes(window)[-1] < WINDOW - 1 and fit[0] > 0:
        # Readings less than a minute apart: five rise too little however steep the build, so
        # the line reaches back as far as the evidence needs, held to the noise of the readings
        # before the five (a rise's own readings measure none, and counted in it, let it through
        # only once they were most of the last 30). Readings a minute apart keep the five:
        # reaching back there, a wandering queue warned a few times a day (docs/benchmarks.md).
        noise = _noise_before(recent[:-WINDOW]) or noise
        window = _reach(recent, fit[0], noise)
        fit = _fit(window)
        if fit is None:
            return None
    slope, error = fit
    evident = (
        slope >= T_MIN * error
        and slope >= T_NOISE * noise / _spread(window) ** 0.5
        and slope * _minutes(window)[-1] >= MIN_RISE - 1e-9
    )
    if not sustained and not evident:
        return None
    growth = slope
    arrivals, completions = finite(now.arrival_per_min), finite(now.completed_per_min)
    if arrivals is not None and completions is not None:
        growth = arrivals - completions
    if not math.isfinite(growth):
        return None
    return max(growth, 0.0) if sustained else growth


def _reach(recent: Sequence[Point], slope: float, noise: float) -> list[Point]:
    """The readings a rise at `slope` (the last `WINDOW`'s) is judged over: as many as it takes
    for a line at that slope to rise `MIN_RISE` and stand `T_NOISE` standard errors above flat at
    `noise` (all of `recent` when none do). The evidence is then the line fitted through them.
    Sized to the rise alone, the warning came as late as 28 s into 29 s of a job a second to 30
    queued."""
    for n in range(WINDOW, len(recent) + 1):
        window = recent[-n:]
        risen = slope * _minutes(window)[-1] >= MIN_RISE - 1e-9
        if risen and slope * _spread(window) ** 0.5 >= T_NOISE * noise:
            return list(window)
    return list(recent)


def _noise_before(before: Sequence[Point]) -> float:
    """The noise a rise after `before` must stand out of (0 with too few readings): the larger
    of how far each strays from its neighbours (`_noise`: a queue that jumps) and from their own
    level (the median absolute deviation, scaled to a normal's: a queue that drifts)."""
    if len(before) < MIN_STRAYS + 2:
        return 0.0
    levels = [p.in_system for p in before]
    middle = statistics.median(levels)
    level = 1.4826 * statistics.median(abs(v - middle) for v in levels)
    return max(_noise(_changes(before)), level if math.isfinite(level) else 0.0)


def _changes(points: Sequence[Point]) -> list[Point]:
    """Repeated readings left out: a backend not refreshed makes a rise in steps look like noise."""
    return [p for k, p in enumerate(points) if k == 0 or p.in_system != points[k - 1].in_system]


def _minutes(points: Sequence[Point]) -> list[float]:
    return [(p.at - points[0].at).total_seconds() / 60 for p in points]


def _fit(points: Sequence[Point]) -> tuple[float, float] | None:
    return slope_fit(_minutes(points), [p.in_system for p in points])


def _spread(points: Sequence[Point]) -> float:
    """Sum of squared distances of the readings' times from their mean (minutes²)."""
    xs = _minutes(points)
    mean_x = sum(xs) / len(xs)
    return sum((x - mean_x) ** 2 for x in xs)


def _noise(points: Sequence[Point]) -> float:
    """The readings' noise as a standard deviation (0 with too few): the median of how far each
    strays from the line through its neighbours, scaled to a normal's."""
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
    return 1.4826 * statistics.median(strays)


def _crossing(
    now: RunnerTypeMetrics,
    in_system: float,
    growth: float,
    registered: float,
    thresholds: Thresholds,
    boot_mins: float,
    horizon_mins: float,
) -> tuple[float, str] | None:
    """(minutes until a threshold is reached, which one). The wait counts at least one runner
    and the oldest job ages a minute a minute; a wait "over" a bound is a floor, and the slowest
    recent start (ARC) is no queued job's age. A queue that forms ahead has no job older than the
    time since it formed (the alert's wait is the oldest job's age)."""
    maximum = finite(now.maximum)
    maximum = maximum if maximum is not None else registered
    duration = finite(now.job_duration_mins)
    duration = duration if duration and duration > 0 else None
    forming = not now.queued
    waited = 0.0 if forming else None if now.wait_of_starts else finite(now.longest_wait_mins)
    formed_at: float | None = None if forming else 0.0
    for step in range(int(horizon_mins / STEP_MINS) + 1):
        t = step * STEP_MINS
        capacity = registered if t < boot_mins else max(registered, maximum)
        queued = max(in_system + growth * t - capacity, 0.0)
        if thresholds.queued is not None and queued >= thresholds.queued:
            return t, "queued"
        if thresholds.wait_mins is not None and queued > 0:
            formed_at = t if formed_at is None else formed_at
            aged = max(waited or 0.0, 0.0) + t - formed_at
            if duration is None:
                wait = aged
            else:  # served: max(capacity, 1) / duration jobs a minute
                wait = queued * duration / max(capacity, 1.0)
                if waited is not None and now.wait_over and not forming:
                    wait = max(wait, aged)
                elif waited is not None:
                    wait = min(wait, aged)
            if wait >= thresholds.wait_mins:
                return t, "wait"
    return None


# A warning cleared this recently comes back as an edit of its message, and is still the one
# the incident takes on if the alert fires: its episode is not over yet.
REUSE_S = 900
SCALE_UNTIL = f"its queue has stopped building for {REUSE_S // 60} min"


class Phase(StrEnum):
    ACTIVE = "active"  # the forecast crosses a threshold soon
    CLEARED = "cleared"  # it no longer does, and the alert did not fire
    FOLDED = "folded"  # the alert fired: the incident carries it on
    DISMISSED = "dismissed"  # someone said not to warn about this type for a while


def scaled_words(scaled: Sequence[ScaleUp]) -> str:
    return " · ".join(up.words for up in scaled)


def scaled_from(
    said: str, plan: str, rid: str, made: ScaleUp, judged: Judgement | None, verify_s: float
) -> ScaleUp:
    """A scale-up made from a warning, as its message says it (`said`, and `plan`: when it goes
    back), put back by the record `rid`, its runners followed until `verify_s` after it."""
    up = made.model_copy(update={"said": said, "fate": plan, "back": rid})
    return follow(up, judged, verify_s=verify_s)


def warning_acts(state: WarningState) -> list[ScaleUp]:
    """The pilot's scale-ups from the warning, oldest first."""
    return [up for up in state.scaled if up.at is not None and up.pilot]


def fate_told(
    state: WarningState, rid: str, told: str, *, ended: bool = False
) -> tuple[ScaleUp, ...]:
    """`told` as the fate of the first scale-up its record put back, the others with it told
    once; one not listed (scaled elsewhere) is added. An undone act keeps its own fate. `ended`:
    their record is done with them: nothing on the warning puts them back any more."""
    marked = [k for k, up in enumerate(state.scaled) if up.back == rid]
    mine = [k for k in marked if not state.scaled[k].undone]
    scaled = list(state.scaled)
    for k in marked:
        fate = told if mine and k == mine[0] else "" if k in mine else scaled[k].fate
        scaled[k] = scaled[k].model_copy(update={"back": "" if ended else rid, "fate": fate})
    return tuple(scaled) if mine else (*scaled, _told(state.runner_type, told, rid))


def _told(runner_type: str, words: str, rid: str = "") -> ScaleUp:
    """A scale-up known by its words alone (one 0.27 kept, or one scaled elsewhere)."""
    return ScaleUp(runner_type=runner_type, added=0, by="", back=rid, fate=words)


@dataclass(frozen=True)
class WarningState:
    runner_type: str
    channel: str
    uid: str  # what the post's metadata names it by, for a lookup after a lost answer
    phase: Phase
    text: str  # `Forecast.text`
    warned_at: float  # when this warning was first raised
    updated_at: float
    version: int = 1
    shown: int = 0  # the version Slack shows (0: not posted yet)
    ts: str = ""
    incident_id: str = ""  # FOLDED: the incident that took it on
    incident_link: str = ""  # FOLDED: its root's permalink ("": not known yet)
    by: str = ""  # DISMISSED: who
    until: float = 0.0  # DISMISSED: until when
    held_since: float = 0.0  # ACTIVE: the last good reading's time while the fleet is unread
    scalable: bool = False  # the runner type has a scale target: the message offers Scale up
    scaled: tuple[ScaleUp, ...] = ()
    # A dry-run pilot's acts on it: (when, epoch seconds; runners), carried to the incident.
    would: tuple[tuple[float, int], ...] = ()

    @classmethod
    def raised(
        cls, runner_type: str, channel: str, text: str, now: float, **fields: Any
    ) -> WarningState:
        uid = secrets.token_hex(6)
        return cls(runner_type, channel, uid, Phase.ACTIVE, text, now, now, **fields)

    def episode_over(self, now: float) -> str:
        """Why this warning's queue is over, for a scale-up made from it ("" while it is not): a
        paused queue often builds again within `REUSE_S`."""
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

    def with_scaled(self, scaled: tuple[ScaleUp, ...]) -> WarningState:
        """Its scale-ups as they are now, as a new version. `updated_at` stays the readings'
        moment: the episode's end and the warning's reuse are measured from it."""
        return self.changed(self.updated_at, scaled=scaled)

    @property
    def member(self) -> str:
        return f"warning:{self.runner_type}"

    def dump(self) -> str:
        # `scaled` in words, as the form a rollback reads checks them against the scale-ups kept
        # beside (`dump_scaled`).
        data = {**asdict(self), "scaled": scaled_words(self.scaled)}
        return json.dumps(data, separators=(",", ":"))

    def dump_scaled(self) -> str:
        """The scale-ups, to keep beside the warning ("": none)."""
        dumped = [up.model_dump(mode="json", exclude_defaults=True) for up in self.scaled]
        return json.dumps(dumped, separators=(",", ":")) if dumped else ""

    @classmethod
    def load(cls, raw: str | None, scaled: str | None = None) -> WarningState | None:
        """The warning `raw` (`dump`'s), with the scale-ups `scaled` (`dump_scaled`'s)."""
        try:
            data = json.loads(raw or "")
            known = {k: v for k, v in data.items() if k in _FIELDS}
            ups = _scaled(str(data["runner_type"]), scaled, str(data.get("scaled") or ""))
            would = tuple((float(at), int(n)) for at, n in data.get("would") or ())
            return cls(**{**known, "phase": Phase(data["phase"]), "scaled": ups, "would": would})
        except (ValueError, TypeError, KeyError):
            return None


def _scaled(runner_type: str, raw: str | None, words: str) -> tuple[ScaleUp, ...]:
    """The scale-ups kept beside a warning (0.27 kept each as its words and its record's ID);
    unreadable, its words alone."""
    try:
        return tuple(
            ScaleUp.model_validate(up)
            if "runner_type" in up
            else _told(runner_type, " ".join(w for w in (up["said"], up["fate"]) if w), up["id"])
            for up in json.loads(raw or "[]")
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return (_told(runner_type, words),) if words else ()


_FIELDS = {f.name for f in fields_of(WarningState)}


def taken_on(state: WarningState, incident: Incident, now: datetime) -> tuple[Event, ...]:
    """The timeline's lines for the warning the incident took on: a dry-run pilot's acts on it,
    then the warning."""
    lead = incident.opened_at - datetime.fromtimestamp(state.warned_at, UTC)
    # An incident may come to show the warning's runner type after it opened.
    when = f"{duration(lead)} before the alert fired" if lead > timedelta(0) else "as it fired"
    text = f"Took on the early warning raised {when}, which said: {state.text}"
    on = "before the alert, on its early warning"
    would = [
        would_event(state.runner_type, runners, datetime.fromtimestamp(at, UTC), on)
        for at, runners in state.would
    ]
    return (*would, Event(at=now, kind=EARLY_WARNING, text=text))
