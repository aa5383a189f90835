"""The judgement of a runner type's reading, as a table: the direction from the observed queue
(never from rates that lag it), the advice, booting runners and the maximum."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, RunnerTypeMetrics
from bot.domain.reading.judgement import Direction, added, direction_of
from bot.domain.reading.judging import judge, judged
from bot.render.numbers import wait_part

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)
MINUTE = 60.0


def past(*queued: float, apart: float = MINUTE) -> list[tuple[float, float]]:
    """The queue at the readings before NOW, `apart` seconds apart, oldest first."""
    start = NOW.timestamp() - apart * len(queued)
    return [(start + apart * i, q) for i, q in enumerate(queued)]


AT_MAX = {"busy": 30.0, "registered": 30.0, "desired": 30.0, "maximum": 30.0}


@pytest.mark.parametrize(
    ("before", "reading", "direction", "runners", "advice"),
    [
        # The surge still in a ten-minute rate window while the queue visibly falls: falling.
        (
            (20, 17),
            {"queued": 12, "arrival_per_min": 25, "completed_per_min": 6.6, **AT_MAX},
            Direction.FALLING,
            0,
            "none: it clears in ~3 min",
        ),
        # Rising at the maximum: the runners that drain it, and how far the maximum must rise.
        (
            (10, 14),
            {"queued": 18, "job_duration_mins": 10, **AT_MAX},
            Direction.RISING,
            46,
            "+46 runners would drain it in 30 min; raise the maximum by 46 (30 → 76)",
        ),
        # A plateau: no growth, the queue itself to drain.
        (
            (20, 21),
            {"queued": 20, "job_duration_mins": 15, **AT_MAX},
            Direction.HOLDING,
            10,
            "+10 runners would drain it in 30 min; raise the maximum by 10 (30 → 40)",
        ),
        # Rates that say the queue shrinks while it rises: rising, sized by what it did.
        (
            (4, 8),
            {"queued": 12, "arrival_per_min": 1, "completed_per_min": 5, "job_duration_mins": 6},
            Direction.RISING,
            27,
            "+27 runners would drain it in 30 min",
        ),
        # Runners already booting cover what is needed: none more.
        (
            (20, 20),
            {
                "queued": 20,
                "job_duration_mins": 15,
                "busy": 30,
                "registered": 30,
                "desired": 42,
                "maximum": 60,
            },
            Direction.HOLDING,
            0,
            "+12 runners on their way should drain it in 30 min",
        ),
        # A long queue falling by a twentieth in two readings drains: it clears by itself.
        (
            (110, 105),
            {"queued": 100, "job_duration_mins": 10, "busy": 10, "registered": 10},
            Direction.FALLING,
            0,
            "none: it clears in ~20 min",
        ),
        # A scale set at zero asking for ten: all ten are booting.
        (
            (10, 10),
            {
                "queued": 10,
                "job_duration_mins": 30,
                "busy": 0,
                "registered": 0,
                "desired": 10,
                "maximum": 20,
            },
            Direction.HOLDING,
            0,
            "+10 runners on their way should drain it in 30 min",
        ),
        # A maximum just raised: the room under it counts at once.
        (
            (20, 20),
            {
                "queued": 20,
                "job_duration_mins": 15,
                "busy": 30,
                "registered": 30,
                "desired": 30,
                "maximum": 60,
            },
            Direction.HOLDING,
            10,
            "+10 runners would drain it in 30 min",
        ),
        # A slide within the noise of a long queue: holding, and drained as it stands (its
        # slope is noise too: read as a drain, the advice would flip reading to reading).
        (
            (100, 99),
            {"queued": 98, "job_duration_mins": 10, "busy": 10, "registered": 10},
            Direction.HOLDING,
            33,
            "+33 runners would drain it in 30 min",
        ),
        # One reading only: no direction; the rates alone size it.
        (
            (),
            {"queued": 10, "arrival_per_min": 3, "completed_per_min": 1, "job_duration_mins": 3},
            None,
            7,
            "+7 runners would drain it in 30 min",
        ),
    ],
)
def test_a_reading_is_judged_by_what_its_queue_did(
    before: tuple[float, ...],
    reading: dict[str, float],
    direction: Direction | None,
    runners: int,
    advice: str,
) -> None:
    verdict = judge(RunnerTypeMetrics(**reading), past(*before), at=NOW)
    assert verdict.direction is direction
    assert verdict.runners == runners
    assert verdict.advice == advice


def test_a_queue_that_drained_is_given_no_runners_whatever_its_rates_remember() -> None:
    """Capacity arrived and took the queue to 0 while the surge is still in the rates' window:
    the queue visibly drained, so nothing is advised (no "keep it from queueing")."""
    surge = {"arrival_per_min": 5, "completed_per_min": 2, "job_duration_mins": 10, **AT_MAX}
    for before in ((10, 5), (5, 0), (0, 0)):
        verdict = judge(RunnerTypeMetrics(queued=0, **surge), past(*before), at=NOW)
        assert (verdict.runners, verdict.raise_maximum_by, verdict.advice) == (0, 0, ""), before
    # Before any queue was observed, the rates alone say it is about to queue.
    first = judge(RunnerTypeMetrics(queued=0, **surge), [], at=NOW)
    assert first.advice.startswith("+30 runners would keep it from queueing")


def test_scale_ups_after_a_reading_count_once_however_often_they_are_counted() -> None:
    """+10 on maxRunners, then +2 on minRunners, between two readings: each counted once, the
    maximum raised once, however many times the incident's judgement is taken again."""
    metrics = RunnerTypeMetrics(queued=30, job_duration_mins=30, **AT_MAX)
    reading = judge(metrics, past(30, 30), at=NOW)
    assert (
        reading.advice == "+30 runners would drain it in 30 min; raise the maximum by 30 (30 → 60)"
    )
    after_first = added(reading, 10, maximum_by=10)
    after_both = added(after_first, 12, maximum_by=10)
    assert after_both == added(reading, 12, maximum_by=10) == added(after_both, 12, maximum_by=10)
    assert (after_both.maximum, after_both.booting, after_both.runners) == (40, 12, 18)
    assert after_both.advice == (
        "+18 runners would drain it in 30 min; raise the maximum by 18 (40 → 58)"
    )


def test_a_wait_is_said_or_why_it_is_not_known() -> None:
    queued = judge(RunnerTypeMetrics(queued=5), [], at=NOW, source="alert")
    assert wait_part(queued, bold=False) == "longest wait not known: the alert does not say"
    over = judge(RunnerTypeMetrics(queued=5, longest_wait_mins=60, wait_over=True), [], at=NOW)
    assert wait_part(over, bold=False) == "longest wait over 60 min"
    idle = judge(RunnerTypeMetrics(queued=0), [], at=NOW)
    assert wait_part(idle, bold=False) == ""


def test_a_turn_shows_within_two_readings() -> None:
    climb = [10, 14, 18, 22, 26]
    turn = [20, 14, 8]
    seen = []
    queue: list[float] = []
    for value in climb + turn:
        queue.append(value)
        points = [(MINUTE * i, q) for i, q in enumerate(queue)][-3:]
        seen.append(direction_of(points)[0])
    assert seen[len(climb) - 1] is Direction.RISING
    assert Direction.FALLING in seen[len(climb) : len(climb) + 2]


def test_a_queue_falling_too_slowly_to_leave_alone_gets_what_its_drain_does_not_finish() -> None:
    metrics = RunnerTypeMetrics(queued=80, job_duration_mins=10, busy=10, registered=10)
    verdict = judge(metrics, past(100, 90, apart=10 * MINUTE), at=NOW)
    assert verdict.direction is Direction.FALLING
    assert verdict.advice == "+17 runners would drain it in 30 min"
    assert "would take ~80 min by itself" in verdict.why


def test_a_queue_read_in_steps_is_read_by_its_steps_and_holds_once_it_stops() -> None:
    """Readings that repeat the one before (a backend not refreshed, a queue moving in steps)
    tell nothing new: +4 a step, read twice a step, rises; the same three times, it holds."""
    stairs = [20, 20, 24, 24, 28]
    points = [(MINUTE * i, float(q)) for i, q in enumerate(stairs)]
    assert direction_of(points)[0] is Direction.RISING
    stopped = [*stairs, 28, 28]
    points = [(MINUTE * i, float(q)) for i, q in enumerate(stopped)]
    assert direction_of(points) == (Direction.HOLDING, 0.0)


@given(st.lists(st.integers(28, 32), min_size=3, max_size=6))
def test_a_queue_wandering_by_two_holds(values: list[int]) -> None:
    points = [(MINUTE * i, float(q)) for i, q in enumerate(values)]
    assert direction_of(points)[0] is Direction.HOLDING


def test_fewer_than_three_readings_tell_no_direction() -> None:
    assert direction_of([(0.0, 33.0), (MINUTE, 28.0)]) == (None, None)


@given(
    st.integers(5, 300),
    st.integers(0, 300),
    st.integers(0, 300),
    st.floats(0, 50),
    st.floats(0, 50),
    st.one_of(st.none(), st.floats(0.5, 60)),
)
def test_a_queue_falling_fast_enough_to_clear_in_time_is_never_given_runners(
    first: int,
    drop: int,
    second_drop: int,
    arrivals: float,
    completions: float,
    duration: float | None,
) -> None:
    """Three readings a minute apart, each lower or the same, falling more than the noise (four
    jobs, or a tenth) and fast enough to be empty within twice the 30-minute target: whatever
    the rates say, no runner and no higher maximum."""
    middle = max(first - drop, 0)
    now = max(middle - second_drop, 0)
    fell = first - now
    assume(fell > max(4, first / 10) and now / (fell / 2) <= 60)
    metrics = RunnerTypeMetrics(
        queued=now,
        arrival_per_min=arrivals,
        completed_per_min=completions,
        job_duration_mins=duration,
        **AT_MAX,
    )
    verdict = judge(metrics, past(first, middle), at=NOW)
    assert verdict.direction is Direction.FALLING
    assert (verdict.runners, verdict.raise_maximum_by) == (0, 0)
    assert "+" not in verdict.advice and "raise" not in verdict.advice


def test_a_fleet_is_judged_from_the_history_of_its_readings() -> None:
    history = [
        HistoryPoint(NOW - timedelta(minutes=m), {}, {}, {"linux.2xlarge": {"queued": q}})
        for m, q in ((2, 20.0), (1, 17.0), (30, 2.0))  # the last is too old to count
    ]
    fleet = FleetSnapshot(
        at=NOW,
        source="prometheus",
        runner_types={"linux.2xlarge": RunnerTypeMetrics(queued=12), "idle": RunnerTypeMetrics()},
    )
    read = judged(fleet, history, interval=timedelta(minutes=1))
    verdict = read.runner_types["linux.2xlarge"].judged
    assert verdict is not None and verdict.direction is Direction.FALLING
    assert verdict.change_per_min == -4.0
    idle = read.runner_types["idle"].judged
    # Absent before and no queue read now: two zeros tell no direction.
    assert idle is not None and idle.direction is None
