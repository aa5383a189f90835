"""`bench.pilot` on a shortened replay of the demo's burst: what its figures mean. The pilot acts
only once the incident is open and the advice held through its hold, within its step, up_to and
cooldown; the person acts once the first status is in; capacity comes after a runner's boot; the
queue drains in the order of the runners added, not of the first to come."""

from __future__ import annotations

import itertools
import re

import pytest

from bench.pilot import (
    FASTER,
    NOBODY,
    PERSON,
    PILOT_RUN,
    POLICY,
    VERIFY_S,
    Run,
    measure,
    replay,
    report,
)
from bot.domain.scale.scaling import Policy
from sandbox.fleet import DEMO_BURSTS, DEMO_TYPES
from sandbox.stack import SCALE_CAP, STATUS_INTERVAL_S

BURST = DEMO_BURSTS[0]
BOOT_MINS = next(spec.boot_minutes for spec in DEMO_TYPES if spec.name == BURST.runner_type)
MINUTES = 30  # past the person's act and its runners' boot
FASTER_RUN = Run(PILOT_RUN, FASTER).label


@pytest.mark.parametrize("policy", [POLICY, Policy(up_to=12, step=4, hold_s=180, cooldown_s=240)])
def test_the_pilot_acts_after_its_hold_within_its_policy_and_its_runners_come_after_a_boot(
    policy: Policy,
) -> None:
    run = replay(BURST, PILOT_RUN, minutes=MINUTES, policy=policy)
    assert run.fired_min is not None and run.acts
    starts = [minute for minute, _ in run.acts]
    assert min(starts) >= run.fired_min + policy.hold_s / 60  # never before the incident opens
    assert all(0 < runners <= policy.step for _, runners in run.acts)
    assert run.added <= policy.up_to
    assert all(b - a >= policy.cooldown_s / 60 for a, b in itertools.pairwise(starts))
    assert run.came_min is not None
    assert starts[0] + BOOT_MINS <= run.came_min <= starts[0] + VERIFY_S / 60


def test_the_person_acts_once_the_first_status_is_in_by_what_the_form_offers() -> None:
    run = replay(BURST, PERSON, minutes=MINUTES)
    assert run.fired_min is not None
    [(minute, runners)] = run.acts
    assert minute >= run.fired_min + STATUS_INTERVAL_S / 60
    assert 0 < runners <= SCALE_CAP
    assert run.came_min is not None and run.came_min >= minute + BOOT_MINS
    nobody = replay(BURST, NOBODY, minutes=MINUTES)
    assert not nobody.acts and nobody.came_min is None
    assert nobody.fired_min == run.fired_min  # one alert, whoever scales after it


def test_it_prints_the_minutes_to_capacity_for_the_person_and_the_pilot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = measure(seeds=range(2), minutes=MINUTES)
    report(found)
    printed = capsys.readouterr().out
    [[_, person, *pilots]] = found["demo"].values()
    for run in (person, *pilots):
        pattern = rf"\s+{re.escape(run.label)}\s+[+-]"  # its row: the acts follow the label
        line = next(line for line in printed.splitlines() if re.match(pattern, line))
        assert f"{run.since_fired(run.came_min):.1f}" in line
    for pilot in pilots:
        assert f"{pilot.label}: its capacity came" in printed


def test_each_policys_seeds_are_replayed_with_that_policy() -> None:
    spread = measure(seeds=range(2), minutes=MINUTES)["spread"]
    assert set(spread) == {NOBODY, PERSON, PILOT_RUN, FASTER_RUN}
    for run in (*spread[PILOT_RUN], *spread[FASTER_RUN]):
        starts = [minute for minute, _ in run.acts]
        assert run.policy is not None
        assert all(b - a >= run.policy.cooldown_s / 60 for a, b in itertools.pairwise(starts))
    # Within the demo's cooldown the pilot acts once; the faster one follows the surge.
    assert all(len(run.acts) == 1 for run in spread[PILOT_RUN])
    assert all(len(run.acts) > 1 for run in spread[FASTER_RUN])


def test_capacity_added_sooner_holds_the_peak_lower_and_acting_on_drains_first() -> None:
    """The rule resolves once no job waited over 2 minutes: served oldest first, the backlog
    must be gone, which takes runners. The advice sees the climb at the alert, so the pilot's
    first act comes minutes before the person's first status and the queue peaks lower; the
    faster policy, acting on as the surge goes on, drains first. (The demo's, held by a cooldown
    as long as the incident, acts once: when it drains depends on what its one act took.)"""
    person, pilot, faster = (
        replay(BURST, PERSON),
        replay(BURST, PILOT_RUN),
        replay(BURST, PILOT_RUN, policy=FASTER),
    )
    (person_came, person_drained), (pilot_came, _), (faster_came, faster_drained) = (
        came_and_drained(run) for run in (person, pilot, faster)
    )
    assert faster_came < pilot_came < person_came
    assert max(pilot.peak, faster.peak) < person.peak
    assert faster_drained < person_drained


def came_and_drained(run: Run) -> tuple[float, float]:
    assert run.came_min is not None and run.drained_min is not None
    return run.came_min, run.drained_min


def test_the_demos_root_climbs_to_the_peak_in_at_most_three_amounts() -> None:
    """The demo's incident replayed at the demo's own cadence: the advice sees the climb from
    the alert on (its growth from the advice window's readings), so it rises in a few steps
    within HPA's tolerance, not a runner a reading, and never back down."""
    advised = replay(BURST, NOBODY).advised_to_peak
    assert advised and advised == sorted(advised), advised
    assert len(set(advised)) <= 3, advised
    # The queue alone at its peak (37 jobs of ~5.7 min in 30 min) asks 8: the growth is counted.
    assert max(advised) >= 18, advised
