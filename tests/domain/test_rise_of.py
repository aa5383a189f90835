"""The advice window's climb (`rise_of`) on a queue that stopped climbing or turned down,
and on odd readings."""

from __future__ import annotations

import math
from datetime import timedelta

from bot.domain.reading.judgement import Direction, rise_of
from tests.domain.test_held_advice import played, reading

OPEN = {"busy": 10.0, "registered": 10.0, "desired": 10.0, "maximum": 200.0}
MINUTE = timedelta(minutes=1)
NONE = timedelta(0)


def r(queued: float):  # type: ignore[no-untyped-def]
    return reading(queued, **OPEN)


CLIMB = [r(10 + 6 * k) for k in range(8)]  # +6 a minute to 52


def test_a_queue_that_stopped_climbing_is_not_sized_for_the_climb() -> None:
    """Three readings at 52: the direction says holding (the last three agree), so the advice
    must drain 52 (18 runners), not 52 plus half an hour of a climb that stopped (78)."""
    j = played([*CLIMB, r(52), r(52)], every=MINUTE, window=NONE, rise=NONE)[-1]
    assert j.direction is Direction.HOLDING
    assert "grows" not in j.why and j.runners == 18, (j.runners, j.why)


def test_a_queue_that_turned_down_is_not_told_rising() -> None:
    """52 then 50: the latest step is against the climb (the direction's own rule turns it
    away), yet the window's readings call it rising +4/min and size 57 runners for it."""
    j = played([*CLIMB, r(52), r(50)], every=MINUTE, window=NONE, rise=NONE)[-1]
    assert j.direction is not Direction.RISING, (j.heading, j.runners, j.why)


def test_rise_of_on_odd_input() -> None:
    assert rise_of([]) == 0.0 and rise_of([(0.0, 1.0)]) == 0.0
    same_time = [(0.0, float(k)) for k in range(8)]
    assert rise_of(same_time) == 0.0
    assert rise_of([(60.0 * k, float("nan")) for k in range(8)]) == 0.0


def test_rise_of_on_a_huge_finite_reading_does_not_raise() -> None:
    """A queue too large to square (no real one is) gives no climb rather than an error."""
    huge = [(60.0 * k, 1e300 * (k + 1)) for k in range(8)]
    assert math.isfinite(rise_of(huge))
