"""What a scale-up bought, on simulated queues with a known truth: during a steady surge the
runners' faster drain is credited with the minutes it took off, against the rate before; at a
surge's end, when arrivals fell as the runners came, it is not measurable, and says why."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.scale.bought import Reading, bought

T0 = datetime(2026, 11, 28, 14, 0, tzinfo=UTC)
CAME = T0 + timedelta(minutes=10)  # the runners registered


def simulated(
    arrivals: tuple[float, float],
    served: tuple[float, float],
    *,
    queued: float = 60.0,
    every_s: float = 30.0,
    noise: float = 0.0,
    seed: int = 0,
) -> list[Reading]:
    """Twenty minutes of a queue read every `every_s`: jobs arrive and are served a minute at
    the first rates until the runners come, at the second after; counts jittered by `noise`."""
    rng, readings, t = random.Random(seed), [], 0.0
    while t <= 20 * 60:
        at = T0 + timedelta(seconds=t)
        side = 0 if at <= CAME else 1
        shown = max(queued + rng.uniform(-noise, noise), 0.0)
        readings.append(Reading(at, round(shown), arrivals[side] + rng.uniform(-0.2, 0.2)))
        queued = max(queued + (arrivals[side] - served[side]) * every_s / 60, 0.0)
        t += every_s
    return readings


def test_a_scale_up_during_a_steady_surge_is_credited_with_the_minutes_it_took_off() -> None:
    # Jobs arrive 6 a minute throughout; runners served 7 before, 10 once the +N came.
    readings = simulated((6.0, 6.0), (7.0, 10.0), noise=1.0)
    found = bought(CAME, readings)
    assert found.measured, found.why
    assert found.fell_before is not None and abs(found.fell_before - 1.0) < 0.4
    assert found.fell_after is not None and abs(found.fell_after - 4.0) < 0.4
    # At 1 job/min the 50 queued then took ~50 min; at 4, ~12.5: ~37 min off.
    assert found.queued is not None and found.saved_mins is not None
    truth = found.queued / 1.0 - found.queued / 4.0
    assert abs(found.saved_mins - truth) <= 0.25 * truth, (found, truth)


def test_one_made_as_the_surge_ended_is_not_measurable() -> None:
    # The same runners, but the surge ends as they come: arrivals 6 -> 1 a minute.
    found = bought(CAME, simulated((6.0, 1.0), (7.0, 10.0)))
    assert not found.measured and found.saved_mins is None
    assert found.why.startswith("arrivals fell from 6.0 to 1.0 jobs/min"), found.why


def test_a_queue_that_rose_before_is_credited_with_its_turn_but_no_minutes() -> None:
    found = bought(CAME, simulated((6.0, 6.0), (5.0, 9.0)))
    assert found.measured and found.saved_mins is None
    assert found.fell_before is not None and found.fell_before < 0 < (found.fell_after or 0)


def test_runners_that_drained_no_faster_bought_no_minutes() -> None:
    found = bought(CAME, simulated((6.0, 6.0), (7.0, 7.0)))
    assert found.measured and found.saved_mins == 0.0


def test_too_few_readings_or_none_registered_say_why() -> None:
    sparse = simulated((6.0, 6.0), (7.0, 10.0), every_s=200)
    assert "too few readings" in bought(CAME, sparse).why
    assert bought(None, sparse).why == "its runners were not seen registered"
    # An earlier scale-up's runners bound the rate before: its drain is not this one's.
    bounded = bought(CAME, simulated((6.0, 6.0), (7.0, 10.0)), after=CAME - timedelta(seconds=45))
    assert "too few readings" in bounded.why
    no_rate = [Reading(r.at, r.queued, None) for r in simulated((6.0, 6.0), (7.0, 10.0))]
    assert "no arrival rate" in bought(CAME, no_rate).why


readings = st.lists(
    st.builds(
        Reading,
        st.datetimes(
            min_value=datetime(2026, 11, 28, 13, 50), max_value=datetime(2026, 11, 28, 14, 30)
        ).map(lambda d: d.replace(tzinfo=UTC)),
        st.floats(min_value=0, max_value=1e6, allow_nan=False),
        st.none() | st.floats(min_value=0, max_value=1e4, allow_nan=False),
    ),
    max_size=60,
)


@given(readings)
def test_any_readings_give_a_measure_or_why_not_never_a_flattering_number(
    given_readings: list[Reading],
) -> None:
    found = bought(CAME, given_readings)
    assert found.measured != bool(found.why)
    if found.saved_mins is not None:
        assert found.saved_mins >= 0
        assert found.fell_after is not None and found.fell_before is not None
        assert found.saved_mins == 0 or found.fell_after > found.fell_before > 0
