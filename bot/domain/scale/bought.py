"""What a scale-up bought: how fast its type's queue drained before its runners registered and
after, and the minutes that took off the drain, arrivals held. Where arrivals changed too much to
tell a faster drain from fewer jobs coming, or too few readings frame it, it says why not."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict

from bot.domain.reading.judgement import slope_fit

WINDOW = timedelta(minutes=5)  # the drain's rate is read over this long on each side
READINGS = 3  # fewer on a side cannot give a rate
# Arrivals that moved by more than this share (and by half a job a minute) explain a change in
# the drain as well as the runners could: a surge ending looks just like capacity arriving.
ARRIVALS_MOVED, ARRIVALS_FLOOR = 0.25, 0.5
ASSUMED = "against the drain before it, arrivals held"
NO_ARRIVALS = "no arrival rate tells a faster drain from fewer jobs coming"


@dataclass(frozen=True)
class Reading:
    """The type's queue at one reading, and the jobs arriving a minute then (None: unknown)."""

    at: datetime
    queued: float
    arrivals: float | None


class Bought(BaseModel):
    """`fell_before`/`fell_after`: jobs a minute the queue fell (negative: rose), after as with the
    arrivals before; `saved_mins`: None where the rate before would never have drained it; `why`:
    why it is not measurable."""

    at: datetime | None  # when its runners registered
    fell_before: float | None = None
    fell_after: float | None = None
    arrivals: tuple[float, float] | None = None  # a minute, before and after
    queued: float | None = None  # at the moment its runners registered
    saved_mins: float | None = None
    why: str = ""

    model_config = ConfigDict(frozen=True)

    @property
    def measured(self) -> bool:
        return not self.why


def bought(
    registered_at: datetime | None,
    readings: Sequence[Reading],
    *,
    after: datetime | None = None,
    until: datetime | None = None,
    window: timedelta = WINDOW,
) -> Bought:
    """What runners that registered at `registered_at` bought, from the type's `readings` (any
    order): the rate before is read from `after` (an earlier scale-up's runners) at the
    earliest, the rate after up to `until` (the next one's, or the resolve) at the latest."""
    if registered_at is None:
        return Bought(at=None, why="its runners were not seen registered")
    start = max(registered_at - window, after) if after else registered_at - window
    end = min(registered_at + window, until) if until else registered_at + window
    ordered = sorted(readings, key=lambda r: r.at)
    before = [r for r in ordered if start <= r.at <= registered_at]
    later = [r for r in ordered if registered_at < r.at <= end]
    if len(before) < READINGS or len(later) < READINGS:
        sides = f"{len(before)} before its runners came and {len(later)} after"
        return Bought(at=registered_at, why=f"too few readings frame it ({sides})")
    fit_before, fit_after = _fell(before), _fell(later)
    if fit_before is None or fit_after is None:
        return Bought(at=registered_at, why="the queue's readings give no rate")
    (fell_before, error_before), (fell_after, error_after) = fit_before, fit_after
    queued = before[-1].queued
    measured = Bought(
        at=registered_at, fell_before=fell_before, fell_after=fell_after, queued=queued
    )
    was, now = _mean([r.arrivals for r in before]), _mean([r.arrivals for r in later])
    if was is None or now is None:
        return measured.model_copy(update={"why": NO_ARRIVALS})
    measured = measured.model_copy(update={"arrivals": (was, now)})
    if abs(now - was) > max(ARRIVALS_MOVED * was, ARRIVALS_FLOOR):
        moved = "fell" if now < was else "rose"
        said = f"arrivals {moved} from {was:.1f} to {now:.1f} jobs/min as its runners came"
        return measured.model_copy(update={"why": said})
    # The drain after as those runners would have made it with the arrivals before, so a change
    # in arrivals the check above let through is not credited to them.
    held_after = fell_after + now - was
    measured = measured.model_copy(update={"fell_after": held_after})
    # A gain within the rates' own scatter is none: two standard errors of their difference.
    scatter = 2 * math.hypot(error_before, error_after)
    if held_after - fell_before <= scatter or queued <= 0:
        return measured.model_copy(update={"saved_mins": 0.0})
    if fell_before <= 2 * error_before:
        return measured  # at the rate before, the queue would not surely have drained at all
    return measured.model_copy(update={"saved_mins": queued / fell_before - queued / held_after})


def _fell(readings: Sequence[Reading]) -> tuple[float, float] | None:
    """Jobs a minute the queue fell over `readings`, and the standard error of it."""
    minutes = [(r.at - readings[0].at).total_seconds() / 60 for r in readings]
    fit = slope_fit(minutes, [r.queued for r in readings])
    return (-fit[0], fit[1]) if fit is not None else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
