"""`bench.pilot` on the demo's burst and a plain surge: what its figures mean. The pilot acts on
the early warning or the incident once its readings wanted more runners through its hold, again
a period on while they still do, within its step and up_to; the person acts once the first status
is in (the demo) or a minute after the alert (the surge); capacity comes after a runner's boot;
the queue drains in the order of the runners added, not of the first to come."""

from __future__ import annotations

import itertools
import re

import pytest

from bench.pilot import (
    DEMO,
    NOBODY,
    PERSON,
    PILOT_RUN,
    POLICY,
    SLOWER,
    SURGE,
    VERIFY_S,
    Run,
    measure,
    replay,
    report,
)
from bot.domain.scale.scaling import Policy
from sandbox.fleet import DEMO_TYPES
from sandbox.stack import SCALE_CAP, STATUS_INTERVAL_S

BURST = DEMO.burst
BOOT_MINS = next(spec.boot_minutes for spec in DEMO_TYPES if spec.name == BURST.runner_type)
MINUTES = 30  # past the person's act and its runners' boot
SLOWER_RUN = Run(PILOT_RUN, SLOWER, POLICY).label


@pytest.mark.parametrize("policy", [POLICY, Policy(up_to=12, step=4, hold_s=180, cooldown_s=240)])
def test_the_pilot_acts_after_its_hold_within_its_policy_and_its_runners_come_after_a_boot(
    policy: Policy,
) -> None:
    """It acts on the early warning or the incident, once its readings wanted more for its
    hold, a period apart at least, each act within its step and all within up_to."""
    run = replay(DEMO, PILOT_RUN, minutes=MINUTES, policy=policy)
    assert run.fired_min is not None and run.warned_min is not None and run.acts
    assert run.warned_min < run.fired_min, "the early warning comes before the alert"
    starts = [minute for minute, _ in run.acts]
    assert min(starts) >= run.warned_min + policy.hold_s / 60  # never before its hold
    assert all(0 < runners <= policy.step for _, runners in run.acts)
    assert run.added <= policy.up_to
    assert all(b - a >= policy.period_s / 60 for a, b in itertools.pairwise(starts))
    assert run.came_min is not None
    assert starts[0] + BOOT_MINS <= run.came_min <= starts[0] + VERIFY_S / 60


def test_the_person_acts_once_the_first_status_is_in_by_what_the_form_offers() -> None:
    run = replay(DEMO, PERSON, minutes=MINUTES)
    assert run.fired_min is not None
    [(minute, runners)] = run.acts
    assert minute >= run.fired_min + STATUS_INTERVAL_S / 60
    assert 0 < runners <= SCALE_CAP
    assert run.came_min is not None and run.came_min >= minute + BOOT_MINS
    nobody = replay(DEMO, NOBODY, minutes=MINUTES)
    assert not nobody.acts and nobody.came_min is None
    assert nobody.fired_min == run.fired_min  # one alert, whoever scales after it


def test_it_prints_the_minutes_to_capacity_for_the_person_and_the_pilot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = measure(seeds=range(2), minutes=MINUTES)
    report(found)
    printed = capsys.readouterr().out
    for story in (DEMO, SURGE):
        _, person, *pilots = found[story]["seed 7"]
        section = printed[printed.index(f"{story.name}: ") :]
        for run in (person, *pilots):
            pattern = rf"\s+{re.escape(run.label)}\s+[+-]"  # its row: the acts follow the label
            line = next(line for line in section.splitlines() if re.match(pattern, line))
            assert f"{run.since_fired(run.came_min):.1f}" in line
        for pilot in pilots:
            assert f"{pilot.label}: its capacity came" in printed
    assert re.search(r"pilot: median drain 0\.\d\dx the person's", printed)


def test_each_policys_seeds_are_replayed_with_that_policy() -> None:
    spread = measure(seeds=range(2), minutes=MINUTES, stories=(DEMO,))[DEMO]["spread"]
    assert set(spread) == {NOBODY, PERSON, PILOT_RUN, SLOWER_RUN}
    for run in (*spread[PILOT_RUN], *spread[SLOWER_RUN]):
        starts = [minute for minute, _ in run.acts]
        assert run.policy is not None
        assert all(b - a >= run.policy.period_s / 60 for a, b in itertools.pairwise(starts))
    # The demo's pilot follows the climb: more than one act, all of up_to at most.
    assert all(len(run.acts) > 1 and run.added <= POLICY.up_to for run in spread[PILOT_RUN])


def test_the_pilot_drains_the_demo_s_burst_in_at_most_four_fifths_of_the_person_s_time() -> None:
    """The pilot acts on the early warning and again while the queue climbs, sized from what
    its readings wanted less the runners there are: its capacity comes before the person's
    first status, the queue peaks lower, and it drains in at most 0.8 of the person's time;
    a cautious pilot (3-minute hold and period) is between the two."""
    person, pilot, slower = (
        replay(DEMO, PERSON),
        replay(DEMO, PILOT_RUN),
        replay(DEMO, PILOT_RUN, policy=SLOWER),
    )
    (person_came, person_drained), (pilot_came, pilot_drained), (slower_came, _) = (
        came_and_drained(run) for run in (person, pilot, slower)
    )
    assert pilot_came < slower_came < person_came
    assert pilot.peak < slower.peak < person.peak
    fired = person.fired_min
    assert fired is not None
    assert pilot_drained - fired <= 0.8 * (person_drained - fired)


def test_on_a_plain_surge_the_pilot_drains_in_at_most_four_fifths_of_the_person_s_time() -> None:
    """A job a second against 20 runners: a person who submits the form's default (+cap) a
    minute after the alert against the pilot acting on the early warning, 20 an act, once two
    readings in a row wanted more; with the demo's longer hold it still drains no later."""
    person, pilot, held = (
        replay(SURGE, PERSON, minutes=MINUTES),
        replay(SURGE, PILOT_RUN, minutes=MINUTES),
        replay(SURGE, PILOT_RUN, minutes=MINUTES, policy=SURGE.others[0]),
    )
    (person_came, person_drained), (pilot_came, pilot_drained), (_, held_drained) = (
        came_and_drained(run) for run in (person, pilot, held)
    )
    assert pilot_came < person_came and pilot.peak < person.peak
    fired = person.fired_min
    assert fired is not None
    assert pilot_drained - fired <= 0.8 * (person_drained - fired)
    assert held_drained <= person_drained
    assert all(0 < runners <= SURGE.policy.step for _, runners in pilot.acts)


def came_and_drained(run: Run) -> tuple[float, float]:
    assert run.came_min is not None and run.drained_min is not None
    return run.came_min, run.drained_min


def test_the_demos_root_climbs_to_the_peak_in_at_most_three_amounts() -> None:
    """The demo's incident replayed at the demo's own cadence: the advice sees the climb from
    the alert on (its growth from the advice window's readings), so it rises in a few steps
    within HPA's tolerance, not a runner a reading, and never back down."""
    advised = replay(DEMO, NOBODY).advised_to_peak
    assert advised and advised == sorted(advised), advised
    assert len(set(advised)) <= 3, advised
    # The queue alone at its peak (37 jobs of ~5.7 min in 30 min) asks 8: the growth is counted.
    assert max(advised) >= 18, advised
