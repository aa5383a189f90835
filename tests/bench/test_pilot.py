"""`bench.pilot` on a shortened replay of the demo's burst: what its figures mean. The pilot acts
only once the incident is open and the advice held through its hold, within its step, up_to and
cooldown; the person acts once the first status is in; capacity comes after a runner's boot."""

from __future__ import annotations

import itertools

import pytest

from bench.pilot import (
    NOBODY,
    PERSON,
    PILOT_RUN,
    POLICY,
    VERIFY_S,
    measure,
    replay,
    report,
)
from bot.domain.scaling import Policy
from sandbox.fleet import DEMO_BURSTS, DEMO_TYPES
from sandbox.stack import SCALE_CAP, STATUS_INTERVAL_S

BURST = DEMO_BURSTS[0]
BOOT_MINS = next(spec.boot_minutes for spec in DEMO_TYPES if spec.name == BURST.runner_type)
MINUTES = 30  # past the person's act and its runners' boot


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
    [[_, person, pilot]] = found["demo"].values()
    for run in (person, pilot):
        line = next(line for line in printed.splitlines() if line.strip().startswith(run.who))
        assert f"{run.since_fired(run.came_min):.1f}" in line
    assert "the pilot's capacity came" in printed
