"""What one reading means for one runner type, decided once and stored with it. The direction
comes from the queue itself (rates lag a turn by their window)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from bot.domain.alerting.alerts import stored_short
from bot.domain.alerting.value_string import finite
from bot.domain.reading.runner_pods import PodCause
from bot.domain.units import minutes, number, plural

DRAIN_TARGET_MINS = 30.0
BOOT_MINS = 5.0  # how long a new runner may take to register before it counts as stuck
DIRECTION_READINGS = 3  # a turn shows within two readings of it
RECENT_READINGS = 6  # looked back over, past readings that repeat the one before
SURE_READINGS = 3  # fewer distinct readings cannot tell a climb from a wobble
TELLING_READINGS = 4  # from this many distinct readings a turn must stand out of their scatter
# Student's t at one-sided 97.5%, by degrees of freedom.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}
RISE_READINGS = 3  # a rise shows once this many readings asked for it, however short the window
SLOW_DRAIN_TARGETS = 2.0  # a falling queue that clears within this many targets needs no runner
# A queue's noise: arrivals less completions, each a count of chance events, differ by four jobs
# with no trend, or a twentieth of a long queue.
NOISE_JOBS, NOISE_SHARE = 4.0, 0.05
TOLERANCE = 0.1  # HPA's: a recommendation within a tenth of the current one changes nothing


class Direction(StrEnum):
    RISING = "rising"
    HOLDING = "holding"
    FALLING = "falling"


class Judgement(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        **stored_short(
            "queued=q wait_mins=w wait_over=w+ wait_of_starts=ws wait_unknown=w? wait_alert_at=wa "
            "direction=d "
            "change_per_min=r registered=reg booting=boot maximum=max runners=n needed=need "
            "added_since=add maximum_added=add+ raise_maximum_by=max+ clears_in_mins=clr "
            "within_mins=T causes=pc cannot_start=stuck held=hld unplaced=unp nodes_short=nsh "
            "pods_read=pr own=own window_mins=win cap=cap"
        ),
    )

    at: datetime  # the reading's time: a surface that shows an older one says so
    queued: float | None = None
    wait_mins: float | None = None
    wait_over: bool = False  # more than `wait_mins`, by how much nobody knows
    wait_of_starts: bool = False  # the slowest recent start, not the oldest job's age
    wait_unknown: str = ""  # why the wait is not known, said instead of a blank
    # The alert's wait as it said it then, standing in where the reading knows none.
    wait_alert_at: datetime | None = None
    direction: Direction | None = None  # None: fewer than three readings observed
    change_per_min: float | None = None  # the observed queue's, over the direction's readings
    busy: float | None = None
    registered: float | None = None
    booting: int = 0
    maximum: float | None = None
    runners: int = 0  # to add now
    needed: int = 0  # before the runners booting are counted
    added_since: int = 0  # runners added from Slack since this reading (`added`)
    maximum_added: int = 0
    raise_maximum_by: int = 0  # the maximum must rise this much for `runners` to fit
    clears_in_mins: float | None = None  # a falling queue's, by itself
    within_mins: float = DRAIN_TARGET_MINS
    why: str = ""
    # While new pods cannot start, more runners (or a higher maximum) would wait the same.
    causes: tuple[PodCause, ...] = ()
    cannot_start: int = 0
    # Stuck pods hold their slots under the maximum (ARC counts them); while any find no node,
    # the runners past the maximum wait for nodes (`nodes_short`), not for a raise.
    held: int = 0
    unplaced: int = 0
    nodes_short: int = 0
    # Whether a new runner pod waits for a node was read: whether new ones start is known.
    pods_read: bool = False
    # What this reading alone advised, and the window the shown advice is held over.
    own: int = 0
    window_mins: float = 0.0
    # The most one scale request may add to the type: advice past it is a number nobody can act on.
    cap: int | None = None

    @property
    def heading(self) -> str:
        """ "▲ rising +2.0 jobs/min", "▼ falling 3.0 jobs/min", "holding", or ""."""
        rate = self.change_per_min
        if self.direction is Direction.RISING:
            return "▲ rising" + (f" +{rate:.1f} jobs/min" if rate else "")
        if self.direction is Direction.FALLING:
            return "▼ falling" + (f" {-rate:.1f} jobs/min" if rate else "")
        return self.direction.value if self.direction is not None else ""

    @property
    def advice(self) -> str:
        """The advice in every surface's words; "" when nothing queues or grows."""
        within = minutes(self.within_mins)
        if self.runners:
            does = f"drain it in {within}" if self.queued else "keep it from queueing"
            runners = plural(self.runners, "runner")
            text = f"+{runners} would {does}"
            if self.beyond_cap:
                text = f"+{runners} (the cap); more would be needed to {does}"
            if (to := self.new_maximum) is not None and self.maximum is not None:
                was = number(self.maximum)
                text += f"; raise the maximum by {self.raise_maximum_by} ({was} → {to})"
            if self.nodes_short:
                text += f"; {self._no_node}"
            return text + self._pending_note + self._held_note
        if self.nodes_short:
            return f"none until nodes fit: {self._no_node}"
        if self.cannot_start and self.needed:
            stuck = f"{plural(self.cannot_start, 'new runner pod')} cannot start"
            return f"none until pods start: {stuck}, and more runners would wait the same way"
        if (mins := self.clears_in_mins) is not None:
            return f"none: it clears {'within a minute' if mins < 1 else f'in ~{eta(mins)}'}"
        if self.booting and self.queued:
            said = f"+{plural(self.booting, 'runner')} on their way should drain it in {within}"
            return said + self._pending_note
        if self.queued and self.pending:
            return f"none yet: +{plural(self.pending, 'runner')} if the queue keeps rising"
        return ""

    @property
    def _pending_note(self) -> str:
        """Said where this reading alone asks more than the window has held yet."""
        return f" (+{self.pending} more if the queue keeps rising)" if self.pending else ""

    @property
    def wanted(self) -> int:
        return 0 if self.cannot_start else max(self.needed - self.booting, 0)

    @property
    def pending(self) -> int:
        """Runners this reading alone asks beyond what is shown: a rise the window has not held;
        never past the cap, which no request may pass (past it, "more would be needed")."""
        more = max(self.own - self.added_since - self.wanted, 0)
        return min(more, max(self.cap - self.runners, 0)) if self.cap is not None else more

    @property
    def beyond_cap(self) -> int:
        """Runners advised past the cap of one request, that `runners` leaves out."""
        capped = self.cap is not None and self.runners >= self.cap
        return max(self.wanted - self.runners, 0) if capped else 0

    @property
    def supply(self) -> float:
        return (running_of(self.registered, self.busy) or 0.0) + self.booting

    @property
    def desired(self) -> float:
        """The capacity this reading alone asks for, as HPA's desired replicas; the capacity
        there is while new pods cannot start."""
        if self.cannot_start:
            return self.supply
        return self.supply - self.added_since + self.own

    @property
    def _held_note(self) -> str:
        """Said where only the window advises, so a falling queue beside it contradicts nothing."""
        if self.own > self.added_since or not self.wanted or not self.window_mins:
            return ""
        return f" (asked for within the last {minutes(self.window_mins)}: a dip changes nothing)"

    @property
    def _no_node(self) -> str:
        pods = "pod finds" if self.unplaced == 1 else "pods find"
        return (
            f"{self.nodes_short} more need nodes ({self.unplaced} new runner {pods} none), "
            "not a higher maximum"
        )

    @property
    def new_maximum(self) -> int | None:
        if not self.raise_maximum_by or self.maximum is None:
            return None
        return math.ceil(self.maximum) + self.raise_maximum_by


class Advised(NamedTuple):
    """An earlier reading in the advice window (epoch seconds): its `own`, `supply`, `wanted`."""

    at: float
    own: int
    supply: float
    shown: int


def advise(
    j: Judgement,
    *,
    duration: float | None,
    net_arrivals: float,
    points: Sequence[tuple[float, float]],
    earlier: Sequence[Advised] = (),
    rise_mins: float = 0.0,
) -> Judgement:
    """`points`: the observed queue's, `earlier`: the window's advice, both oldest first."""
    duration = duration if duration and duration > 0 else None
    sure = sure_slopes(points)
    advised = _advised(j, duration, net_arrivals, max(sure[0], 0.0), rise_of(points))
    advised = advised.model_copy(update={"own": advised.wanted})
    if advised.clears_in_mins is not None and sure[1] < 0:
        return advised  # a queue surely clearing in time by itself: a drain is not noise
    noise = to_drain(max(NOISE_JOBS, NOISE_SHARE * (j.queued or 0.0)), duration, j.within_mins)
    held = max(to_drain(j.queued or 0.0, duration, j.within_mins) - j.booting, 0)
    return _stabilized(advised, earlier, rise_mins, noise, held)


def _stabilized(
    j: Judgement, earlier: Sequence[Advised], rise_mins: float, noise: int, held: int = 0
) -> Judgement:
    """Stabilized as HPA's `behavior` stabilizes a scale, on capacity: each reading's advice is
    what it desired less the capacity there is now. What is shown rises to the least any reading
    of the rise window asked and falls to the most any of the same window asked: a spike or dip of
    a few readings moves nothing, and the ask ends once the runners that came cover what every
    reading wanted. The longer window governs only what may be put back, never an ask. A dip
    within the queue's `noise` (runners), a fall not yet told from a wobble, or a rise within
    HPA's tolerance moves nothing; `held`: what the queue would ask if it held where it stands."""
    if j.cannot_start or not earlier or (not j.queued and not j.own):
        return j  # nothing queued and none advised is none at once: no runner to add to idle ones
    supply = j.supply

    def now(runners: int, then: float) -> int:
        return max(runners - math.floor(max(supply - then, 0.0)), 0)

    before = now(earlier[-1].shown, earlier[-1].supply)
    if j.clears_in_mins is not None and not j.own and before:
        # A fall not sure yet (a sure one ends the ask in `advise`) asks what the queue would if
        # it held where it stands, no more than was shown, and is kept so in the window.
        j = j.model_copy(update={"own": min(before, held)})
    asked = [(a.at, now(a.own, a.supply)) for a in earlier]
    rising = [n for t, n in asked if t > j.at.timestamp() - rise_mins * 60]
    if len(rising) < RISE_READINGS - 1:
        rising = [n for _, n in asked[-(RISE_READINGS - 1) :]]
    # Up to the least of the rise window, down to the most of the same window: one reading
    # moves neither way, and runners that came lower every reading of it at once.
    shown = min(max(before, min([j.own, *rising])), max([j.own, *rising]))
    if shown and shown < before <= shown + noise:
        shown = before  # a dip within the queue's noise
    if before and before < shown <= before + min(TOLERANCE * before, noise):
        shown = before  # a rise within HPA's tolerance, and the queue's noise, moves nothing
    if shown == j.own:
        return j if j.own == j.wanted else _fitted(j, shown + j.booting, j.why)
    if shown > j.own:
        why = "kept: this reading's dip is within the queue's noise"
    else:
        why = f"{j.own - shown} more if the queue keeps rising"
    return _fitted(j, shown + j.booting, why)


def _advised(
    j: Judgement, duration: float | None, net_arrivals: float, sure: float, trend: float
) -> Judgement:
    queued = j.queued or 0.0
    if queued <= 0:
        # Only before the queue was ever observed do the rates speak: once observed, a surge's
        # rates still in their window must not ask for runners under a queue that drained.
        growth = net_arrivals if j.direction is None else 0.0
        if not growth or duration is None:
            return j
        return _fitted(j, math.ceil(growth * duration), "arrivals outrun completions")
    rate = j.change_per_min or 0.0
    if j.direction is Direction.FALLING and rate < 0:
        # A holding queue's slope is noise: read as a drain it would flip the advice.
        clears = queued / -rate
        if clears <= SLOW_DRAIN_TARGETS * j.within_mins:
            fell = f"the queue fell {-rate:.1f} jobs/min over the last readings"
            return j.model_copy(update={"clears_in_mins": clears, "why": fell})
        needed = to_drain(queued + rate * j.within_mins, duration, j.within_mins)
        return _fitted(j, needed, f"it falls, but would take ~{eta(clears)} by itself")
    # Growth: none while holding; the rates alone before any queue was observed; else the
    # observed growth beyond its scatter (the rates size the advice, never turn its direction).
    if j.direction is Direction.HOLDING:
        growth = 0.0
    elif j.direction is None:
        growth = net_arrivals
    else:
        growth = min(max(rate, 0.0), sure)
    if j.direction is Direction.RISING:
        growth = max(growth, trend)  # a climb the advice window's readings tell
    needed = to_drain(queued + growth * j.within_mins, duration, j.within_mins)
    each = f"of ~{minutes(duration)}" if duration else "at a runner each (no job duration)"
    why = f"drains {number(queued)} queued jobs {each} in {minutes(j.within_mins)}"
    if growth:
        why += f" while it grows {growth:.1f} jobs/min"
    return _fitted(j, needed, why)


def to_drain(backlog: float, duration: float | None, within_mins: float) -> int:
    """Without a duration, a runner per job (as PyTorch's scale-up-chron asks)."""
    if backlog <= 0:
        return 0
    if duration is None:
        return math.ceil(backlog)
    return max(math.ceil(backlog * duration / within_mins), 1)


def _fitted(j: Judgement, needed: int, why: str) -> Judgement:
    """`needed` less the runners booting, and how far the maximum must rise for the rest."""
    runners = 0 if j.cannot_start else max(needed - j.booting, 0)
    if j.cap is not None:
        runners = min(runners, j.cap)
    raise_by = nodes_short = 0
    running = running_of(j.registered, j.busy)
    if j.cannot_start:
        # The advice says why none; its reason says what they would be.
        why = f"~{plural(needed, 'runner')} once new pods start" if needed else ""
    elif needed and not runners:
        why = f"the {plural(j.booting, 'runner')} booting cover the ~{needed} needed"
    elif runners and j.maximum is not None and running is not None:
        room = max(math.floor(j.maximum - running) - j.booting - j.held, 0)
        raise_by = max(runners - room, 0)
        if raise_by and j.unplaced:  # the rest need nodes, not a higher maximum
            runners, nodes_short, raise_by = room, raise_by, 0
        elif raise_by:
            why += f"; only {room} fit under the maximum of {number(j.maximum)}"
    update = {"runners": runners, "needed": needed, "raise_maximum_by": raise_by, "why": why}
    return j.model_copy(update={**update, "nodes_short": nodes_short})


def asking(j: Judgement, runners: int) -> Judgement:
    """The judgement advising `runners` now (the pilot sizes its acts on its own window), with
    the maximum's raise they need: what a scale form shown it offers."""
    return _fitted(j, runners + j.booting, j.why)


def added(j: Judgement, runners: int, *, maximum_by: int = 0) -> Judgement:
    """The judgement once `runners` were added from Slack after its reading: they count as
    booting at once (so nobody is advised them twice), or as held while new pods cannot start."""
    if runners == j.added_since and maximum_by == j.maximum_added:
        return j
    stuck = "held" if j.cannot_start else "booting"
    update: dict[str, object] = {
        stuck: getattr(j, stuck) - j.added_since + runners,
        "added_since": runners,
        "maximum_added": maximum_by,
    }
    if j.maximum is not None:
        update["maximum"] = j.maximum - j.maximum_added + maximum_by
    base = j.model_copy(update=update)
    return _fitted(base, j.needed, f"+{runners} added since this reading") if j.needed else base


def direction_of(
    points: Sequence[tuple[float, float]], span_s: float = 0.0
) -> tuple[Direction | None, float | None]:
    """The observed queue's (epoch seconds, queued; oldest first) direction and change per minute
    over its last distinct values: a net change beyond the noise, the latest step not against
    it, and a slope beyond their scatter once four can tell. Where readings come faster than
    `span_s` (the rise window), the slope is that of the whole span: a jump of three readings a
    second apart is no climb of jobs per minute."""
    recent = list(points)[-RECENT_READINGS:]
    if len(recent) < DIRECTION_READINGS:
        return None, None
    if len({value for _, value in recent[-DIRECTION_READINGS:]}) == 1:
        return Direction.HOLDING, 0.0
    distinct = _distinct(recent)
    last = distinct[-DIRECTION_READINGS:]
    span = (last[-1][0] - last[0][0]) / 60
    if span <= 0:
        return None, None
    net, step = last[-1][1] - last[0][1], last[-1][1] - last[-2][1]
    rate = net / span
    allowed = max(NOISE_JOBS, NOISE_SHARE * max(value for _, value in last))
    # A value held over several readings is read where it last stood: a plateau that then
    # turns is a turn, not a curve.
    telling = _distinct(recent[::-1])[::-1][-TELLING_READINGS:]
    spanned = [p for p in points if p[0] >= points[-1][0] - span_s] if span_s else []
    if len(_distinct(spanned)) > TELLING_READINGS:
        telling = _distinct(spanned[::-1])[::-1]
        fit = slope_fit([(t - telling[0][0]) / 60 for t, _ in telling], [v for _, v in telling])
        if fit is not None:  # the change over the whole span, as the slope has it
            rate, net = fit[0], fit[0] * (telling[-1][0] - telling[0][0]) / 60
    low, high = _slope_bounds(telling) if len(telling) >= TELLING_READINGS else (rate, rate)
    if net > allowed and step >= 0 and low > 0:
        return Direction.RISING, rate
    if net < -allowed and step <= 0 and high < 0:
        return Direction.FALLING, rate
    rise = rise_of(points)
    return (Direction.RISING, rise) if rise else (Direction.HOLDING, rate)


def rise_of(points: Sequence[tuple[float, float]]) -> float:
    """A climb too slow for the last readings to tell, told by all of them (the advice window's):
    their slope where beyond their scatter and past the queue's noise, else 0."""
    every = _distinct(list(points))
    if len(every) <= TELLING_READINGS:
        return 0.0
    xs = [(t - every[0][0]) / 60 for t, _ in every]
    fit = slope_fit(xs, [value for _, value in every])
    if fit is None:
        return 0.0
    allowed = max(NOISE_JOBS, NOISE_SHARE * max(value for _, value in every))
    low, _ = _slope_bounds(every)
    if not (fit[0] * xs[-1] > allowed and low > 0):
        return 0.0
    # The latest reading below the line the others draw by more than their scatter: the climb
    # turned (a step down within it is the climb's own noise).
    before = slope_fit(xs[:-1], [value for _, value in every[:-1]])
    if before is not None:
        slope, _ = before
        mean_x, mean_y = sum(xs[:-1]) / len(xs[:-1]), sum(v for _, v in every[:-1]) / len(xs[:-1])
        line = [mean_y + slope * (x - mean_x) for x in xs[:-1]]
        strays = [abs(v - y) for (_, v), y in zip(every[:-1], line, strict=True)]
        scatter = math.sqrt(sum(d * d for d in strays) / max(len(strays) - 2, 1))
        expected = mean_y + slope * (xs[-1] - mean_x)
        if every[-1][1] < expected - max(2 * scatter, 1.0):
            return 0.0
    return fit[0]


def sure_slopes(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The queue's change per minute beyond its scatter (the slope's 97.5% bounds; 0 from too few
    distinct readings): growth past the lower, a fall below the upper."""
    last = _distinct(list(points)[-RECENT_READINGS:])
    if len(last) < SURE_READINGS:
        return 0.0, 0.0
    low, high = _slope_bounds(last)
    return low, (high if len(last) >= TELLING_READINGS else 0.0)  # three cannot tell a drain


def _slope_bounds(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The least-squares slope per minute's one-sided 97.5% bounds (Student's t)."""
    xs = [(t - points[0][0]) / 60 for t, _ in points]
    fit = slope_fit(xs, [value for _, value in points])
    if fit is None:
        return 0.0, 0.0
    slope, error = fit
    error *= _t_975(len(xs) - 2)
    return slope - error, slope + error


def _t_975(df: int) -> float:
    """Student's t at 97.5%: the table, else the Cornish-Fisher expansion (within 1% from 5 on)."""
    if df in T_975:
        return T_975[df]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def slope_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """The least-squares slope and its standard error; None without a spread or finite `ys`, or
    where they are too large to square (no queue is)."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread <= 0 or not math.isfinite(mean_y):
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    try:
        scatter = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in zip(xs, ys, strict=True))
    except OverflowError:
        return None
    error = math.sqrt(scatter / (len(xs) - 2) / spread)
    return (slope, error) if math.isfinite(slope) and math.isfinite(error) else None


def _distinct(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [p for k, p in enumerate(points) if k == 0 or p[1] != points[k - 1][1]]


def eta(mins: float) -> str:
    if mins < 1:
        return "under a minute" if mins > 0 else "0 min"
    if mins < 90:
        return f"{math.ceil(mins)} min"
    return f"{mins / 60:.1f} h"


def running_of(registered: float | None, busy: float | None) -> float | None:
    return max((v for v in map(finite, (registered, busy)) if v is not None), default=None)
