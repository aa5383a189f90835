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

from bot.domain.incident.incidents import Event, counting_scale_ups
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, RunnerTypeMetrics, troubled_gauges
from bot.domain.reading.judgement import Direction, Judgement
from bot.domain.reading.judging import judged
from bot.domain.scale.scale_ups import ScaleUp

START = datetime(2026, 11, 26, 12, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
WINDOW = timedelta(minutes=5)
RISE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
NAME = "linux.2xlarge"
# A scale set at its maximum of 20, every runner busy, jobs of 10 minutes.
AT_MAX = {"busy": 20.0, "registered": 20.0, "desired": 20.0, "maximum": 20.0}


def reading(queued: float, **gauges: float) -> RunnerTypeMetrics:
    return RunnerTypeMetrics(queued=queued, job_duration_mins=10.0, **(AT_MAX | gauges))


def played(
    readings: Iterable[RunnerTypeMetrics],
    *,
    window: timedelta = WINDOW,
    rise: timedelta = RISE,
    every: timedelta = MINUTE,
    caps: dict[str, int] | None = None,
) -> list[Judgement]:
    """Each reading judged `every` after the one before, with the history the judged ones left
    (as much as the fleet's readings fetch: both windows)."""
    history: list[HistoryPoint] = []
    shown = []
    kept = max(10, int(max(window, rise) / every) + 1)
    for k, metrics in enumerate(readings):
        at = START + k * every
        fleet = FleetSnapshot(at=at, source="prometheus", runner_types={NAME: metrics})
        fleet = judged(fleet, history[-kept:], interval=every, window=window, rise=rise, caps=caps)
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
    alone = [j.runners for j in played(wobble(0), window=timedelta(0), rise=timedelta(0))]
    assert changes(alone) > 10


def test_a_true_climb_raises_the_advice_within_the_rise_window_and_never_says_none() -> None:
    """A rise shows once every reading of the rise window (a minute, and the two readings
    before) asked at least that much: the least of them, as HPA's scale-up stabilization takes."""
    climb = [*wobble(1, 12), *(reading(33 + 4 * k) for k in range(1, 11))]
    shown = played(climb)
    rising = [j.runners for j in shown[12:]]
    assert rising == sorted(rising) and rising[-1] > rising[0] + 5
    owns = [j.own for j in shown]
    for k in range(14, len(shown)):  # the least of the reading and the two before it, or within
        noise = max(4, 0.05 * (shown[k].queued or 0)) * 10 / 30 + 1  # the queue's noise of it
        assert shown[k].runners >= min(owns[k - 2 : k + 1]) - noise, (k, owns, rising)
    assert all(j.advice and not j.advice.startswith("none") for j in shown)


def test_a_spike_of_three_readings_at_the_maximum_moves_nothing_a_step_moves_it_in_the_window() -> (
    None
):
    """The walk's case: a scale set at its maximum, 24 ± 1 queued, readings a second apart, the
    fall window 20 s. A spike to 34, 40 and 36 used to take the root from +25 to +768 for 20 s;
    a step that stays shows within the rise window, and no "none" comes between two amounts."""
    rng = random.Random(7)
    flat = [reading(24 + rng.randint(-1, 1)) for _ in range(90)]
    spike = [reading(q) for q in (34, 40, 36)]
    after = [reading(24 + rng.randint(-1, 1)) for _ in range(60)]
    step = [reading(48 + rng.randint(-1, 1)) for _ in range(90)]
    shown = played(
        [*flat, *spike, *after, *step], window=timedelta(seconds=20), rise=RISE, every=SECOND
    )
    settled = shown[80].runners
    around_spike = [j.runners for j in shown[80:153]]
    assert max(around_spike) - min(around_spike) <= 2, around_spike
    assert max(j.own for j in shown[90:93]) > settled + 5  # the spike alone asked for far more
    stepped = [j.runners for j in shown[153:]]
    owns = [j.own for j in shown[153:]]
    assert stepped[-1] >= min(owns[-60:]) > settled + 5
    # Within the rise window (60 readings) and a few readings of the direction's own lag.
    first = next(k for k, n in enumerate(stepped) if n > settled + 2)
    assert first <= 60 + 6, stepped
    assert all(j.runners > 0 for j in shown[3:]), "none between two amounts at the maximum"


def test_the_advice_stays_within_one_requests_cap_and_says_more_would_be_needed() -> None:
    caps = {NAME: 10}
    shown = played([reading(30 + 6 * k) for k in range(12)], caps=caps)
    last = shown[-1]
    assert last.needed - last.booting > 10
    assert last.runners == 10 and last.beyond_cap > 0
    assert last.advice.startswith("+10 runners (the cap); more would be needed")
    assert all(j.runners <= 10 for j in shown)


def test_a_queue_draining_by_itself_asks_for_none_once_its_fall_is_sure() -> None:
    """A plateau's advice stands while the queue only wobbles; once the queue surely falls fast
    enough to clear within the target by itself, "none: it clears in ~N min" shows at once: a
    drain is not noise, and advice that still asks would send someone to add runners."""
    plateau = [reading(20) for _ in range(6)]
    falling = [reading(q) for q in (17, 14, 11, 8, 5, 2)]
    shown = played([*plateau, *falling, reading(0, busy=12.0, registered=20.0)])
    assert shown[5].runners > 0
    sure = next(k for k, j in enumerate(shown) if k > 5 and j.runners == 0)
    assert sure <= 8  # the third reading of the fall: four distinct values can tell a drain
    assert all(j.runners == 0 and j.advice.startswith("none: it clears") for j in shown[sure:-1])
    assert shown[-1].runners == 0 and not shown[-1].advice


def test_a_wobble_is_never_read_as_a_drain() -> None:
    for seed in range(20):
        shown = played(wobble(seed))
        assert all(j.runners > 0 and not j.advice.startswith("none") for j in shown), seed


def test_runners_that_came_since_count_at_once() -> None:
    """Five runners the autoscaler started (booting in the reading), or five added from Slack
    after the reading: the advice falls by five at once, not once the window passed."""
    before = played([reading(30) for _ in range(4)])[-1]
    booting = played([*(reading(30) for _ in range(4)), reading(30, desired=25.0, maximum=25.0)])
    assert booting[-1].runners == before.runners - 5
    scaled_at = START + 3 * MINUTE + timedelta(seconds=20)
    done = ScaleUp(runner_type=NAME, added=5, by="U1", at=scaled_at, field="maxRunners", after=25)
    event = Event(at=scaled_at, kind="scaled", text="Scaled", actor="U1", scale=done)
    view = FleetSnapshot(
        at=START + 3 * MINUTE,
        source="prometheus",
        runner_types={NAME: reading(30).model_copy(update={"judged": before})},
    )
    counted = counting_scale_ups(view, [event]).runner_types[NAME].judged
    assert counted is not None and counted.runners == before.runners - 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 60), min_size=1, max_size=30))
def test_the_advice_moves_only_within_what_its_windows_asked(queue: list[int]) -> None:
    """Whatever the queue does (one reading a minute, supply steady): what is shown is never more
    than the most any reading of the fall window asked, nor less than the least of the rise's
    three readings, but for a move within the queue's noise kept back; nothing queued is none."""
    shown = played(reading(q) for q in queue)
    for k, j in enumerate(shown):
        if not j.queued:
            assert j.runners == 0
            continue
        noise = max(4, 0.05 * j.queued) * 10 / 30 + 1
        window = [w.own for w in shown[max(k - 4, 0) : k + 1]]
        rising = [w.own for w in shown[max(k - 2, 0) : k + 1]]
        assert j.wanted <= max(window) + noise, (k, queue, [w.wanted for w in shown])
        if k >= 2 and shown[k - 1].wanted:
            assert j.wanted >= min(rising) - noise, (k, queue, [w.wanted for w in shown])


def test_runners_on_their_way_are_said_beside_a_rise_not_yet_held() -> None:
    """Seven booting since a scale-up while the latest reading alone asks eight more: the thread
    says both, never a bare "none" that hides the seven."""
    j = Judgement(at=START, queued=35.0, booting=7, needed=7, own=8, window_mins=5.0)
    assert j.runners == 0 and j.pending == 8
    assert (
        j.advice
        == "+7 runners on their way should drain it in 30 min (+8 more if the queue keeps rising)"
    )
    alone = Judgement(at=START, queued=35.0, own=3, window_mins=5.0)
    assert alone.advice == "none yet: +3 runners if the queue keeps rising"


def test_a_short_jump_at_a_fast_cadence_is_no_climb_and_a_steady_ramp_is_one() -> None:
    """The walk's case: readings a second apart, a three-reading jump read "▲ rising +48.1
    jobs/min". The direction and its rate come from the slope over the rise window: the jump
    is said as holding, at a rate near the flat queue's; a ramp of 6 jobs a minute is rising at
    about that rate, whichever three readings it ends on."""
    rng = random.Random(11)
    flat = [reading(24 + rng.randint(-1, 1)) for _ in range(70)]
    jump = [reading(q) for q in (27, 30, 31)]
    shown = played([*flat, *jump], every=SECOND)
    last = shown[-1]
    assert last.heading.startswith("holding"), last.heading
    assert abs(last.change_per_min or 0) < 10, last.change_per_min
    ramp = [reading(10 + k / 10) for k in range(120)]  # +6 jobs/min, read each second
    climbing = played(ramp, every=SECOND)[-1]
    assert climbing.heading.startswith("▲ rising"), climbing.heading
    assert 5 < (climbing.change_per_min or 0) < 7, climbing.change_per_min


def test_a_climb_too_slow_for_three_readings_is_told_by_the_window_and_sizes_the_advice() -> None:
    """The demo's climb, read every 18 s: +3 jobs a minute moves the last three readings less
    than the queue's noise, yet the advice window's readings tell it. It reads as rising, and its
    growth is counted (3 jobs a minute of 10-minute jobs are 10 runners more), not only once
    each reading alone could tell it. A step down at the top is no climb: the growth goes."""
    climb = [reading(10 + 0.9 * k) for k in range(30)]  # 0.9 a reading
    shown = played([*climb, reading(35)], every=timedelta(seconds=18), rise=MINUTE)
    late = shown[20:30]
    assert all(j.direction is Direction.RISING for j in late), [j.heading for j in late]
    # Queued 28-36 of 10-minute jobs in 30 min is 10-12 runners; the growth adds ~10 more.
    assert all(j.runners >= 19 for j in late), [j.runners for j in late]
    assert changes([j.runners for j in late]) <= 2
    turned = shown[-1]
    assert turned.direction is Direction.HOLDING and turned.own <= 12, (turned.heading, turned.own)


def test_a_rise_within_a_tenth_of_the_advice_moves_nothing() -> None:
    """HPA's tolerance: a recommendation within a tenth of the current one changes nothing, so a
    climb's advice moves in steps a person can act on, not a runner a reading."""
    steady = [reading(60) for _ in range(8)]
    nudged = [reading(63) for _ in range(8)]  # 20 runners asked, then 21: within a tenth
    shown = played([*steady, *nudged])
    assert {j.runners for j in shown[4:8]} == {20}
    assert {j.runners for j in shown[8:]} == {20}, [j.runners for j in shown[8:]]
    stepped = played([*steady, *(reading(75) for _ in range(8))])  # 25: past it
    assert stepped[-1].runners == 25


def test_once_the_runners_came_it_asks_again_only_if_every_reading_still_wants_more() -> None:
    """The walk's case: at the maximum of 20 the queue climbed to 45 (+15 asked), a person
    raised it to 30 and the ten registered. Measured against the 30 at once, the readings of the
    rise window ask what they still want beyond them; once the queue is down to a job or two,
    nothing: not "+4 at 1 queued" for the length of the longer window."""
    climbing = [reading(q) for q in (30, 34, 38, 42, 45, 45)]
    assert played(climbing)[-1].runners >= 14
    came = {"registered": 30.0, "busy": 30.0, "desired": 30.0, "maximum": 30.0}
    after = [reading(q, **came) for q in (40, 24, 2, 1, 2, 1, 1, 2)]
    shown = played([*climbing, *after])
    settled = shown[len(climbing) + 3 :]  # a rise window (a minute) after the queue fell
    assert all(j.runners <= 1 for j in settled), [(j.queued, j.runners) for j in shown]
