"""The advice held still over a window, as HPA's `behavior` holds a recommendation: readings
played one a minute through `judged`, each kept in the history as the fleet's readings keep it
(`troubled_gauges`), and the advice a responder would read after each."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.fleet import FleetSnapshot, HistoryPoint, RunnerTypeMetrics, troubled_gauges
from bot.domain.incidents import Event, ScaleDone, with_scale_ups
from bot.domain.judgement import Judgement
from bot.domain.judging import judged

START = datetime(2026, 11, 26, 12, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
WINDOW = timedelta(minutes=5)
NAME = "linux.2xlarge"
# A scale set at its maximum of 20, every runner busy, jobs of 10 minutes.
AT_MAX = {"busy": 20.0, "registered": 20.0, "desired": 20.0, "maximum": 20.0}


def reading(queued: float, **gauges: float) -> RunnerTypeMetrics:
    return RunnerTypeMetrics(queued=queued, job_duration_mins=10.0, **(AT_MAX | gauges))


def played(readings: Iterable[RunnerTypeMetrics], *, window: timedelta = WINDOW) -> list[Judgement]:
    """Each reading judged a minute after the one before, with the history the judged ones left."""
    history: list[HistoryPoint] = []
    shown = []
    for k, metrics in enumerate(readings):
        at = START + k * MINUTE
        fleet = FleetSnapshot(at=at, source="prometheus", runner_types={NAME: metrics})
        fleet = judged(fleet, history[-10:], interval=MINUTE, window=window)
        history.append(HistoryPoint(at, {}, {}, troubled_gauges(fleet.runner_types)))
        judgement = fleet.runner_types[NAME].judged
        assert judgement is not None
        shown.append(judgement)
    return shown


def changes(values: list[int]) -> int:
    return sum(1 for a, b in itertools.pairwise(values) if a != b)


def wobble(seed: int, readings: int = 40) -> list[RunnerTypeMetrics]:
    rng = random.Random(seed)
    return [reading(30 + rng.randint(-3, 3)) for _ in range(readings)]


def test_a_wobble_around_a_plateau_at_the_maximum_moves_the_advice_at_most_twice() -> None:
    for seed in range(20):
        advised = [j.runners for j in played(wobble(seed))]
        assert changes(advised) <= 2, (seed, advised)
        assert min(advised) > 0
    # Each reading alone moves with the wobble: what the window is for.
    alone = [j.runners for j in played(wobble(0), window=timedelta(0))]
    assert changes(alone) > 10


def test_a_true_climb_raises_the_advice_at_once_and_never_says_none() -> None:
    climb = [*wobble(1, 12), *(reading(33 + 4 * k) for k in range(1, 11))]
    shown = played(climb)
    rising = [j.runners for j in shown[12:]]
    assert rising == sorted(rising) and rising[-1] > rising[0] + 5
    assert all(j.advice and not j.advice.startswith("none") for j in shown)


def test_none_only_once_every_reading_in_the_window_advised_none() -> None:
    """A queue that falls fast enough to clear by itself keeps the plateau's advice for the
    window, said as held; once nothing queues, none at once: no runner for an empty queue."""
    plateau = [reading(30) for _ in range(6)]
    falling = [reading(q) for q in (24, 18, 12, 6)]
    shown = played([*plateau, *falling, reading(0, busy=12.0, registered=20.0)])
    falls = shown[6:10]
    assert falls[0].clears_in_mins is not None and falls[0].own == 0
    assert all(j.runners == shown[5].runners for j in falls)
    assert falls[0].advice.endswith("(held: this reading alone advises none)")
    assert shown[-1].runners == 0 and not shown[-1].advice


def test_runners_that_came_since_count_at_once() -> None:
    """Five runners the autoscaler started (booting in the reading), or five added from Slack
    after the reading: the advice falls by five at once, not once the window passed."""
    before = played([reading(30) for _ in range(4)])[-1]
    booting = played([*(reading(30) for _ in range(4)), reading(30, desired=25.0, maximum=25.0)])
    assert booting[-1].runners == before.runners - 5
    scaled_at = START + 3 * MINUTE + timedelta(seconds=20)
    done = ScaleDone(runner_type=NAME, added=5, by="U1", at=scaled_at, field="maxRunners", after=25)
    event = Event(at=scaled_at, kind="scaled", text="Scaled", actor="U1", scale=done)
    view = FleetSnapshot(
        at=START + 3 * MINUTE,
        source="prometheus",
        runner_types={NAME: reading(30).model_copy(update={"judged": before})},
    )
    counted = with_scale_ups(view, [event]).runner_types[NAME].judged
    assert counted is not None and counted.runners == before.runners - 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=30))
def test_the_held_advice_is_never_below_the_readings_own(queue: list[int]) -> None:
    """Whatever the queue does, the advice shown is at least what the reading alone advises, and
    says "none" only where nothing queues or every reading of the window advised none."""
    shown = played(reading(q) for q in queue)
    for k, j in enumerate(shown):
        assert j.wanted >= j.own
        window = shown[max(k - 4, 0) : k + 1]
        if j.wanted == 0 and j.queued:
            assert all(w.own == 0 for w in window)
