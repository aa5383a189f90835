"""One judgement, rendered everywhere: a served bot on a scripted ARC scale set, read after each
step as a responder reads it (`tests/support/trajectory.py`). After every step the root, the
latest status, diagnostics, `/queue` and the Scale up… modal's default agree on the advice for
linux.2xlarge; the direction is right by the second reading after a turn; nothing says rising
or +N once the queue fell two readings in a row; every form default is one the target takes.

`pytest tests/system/test_trajectories.py -s -n0` prints what each surface said at each step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes.arc_script import Step
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.slack import Slack
from tests.support.trajectory import trajectory
from tests.support.trajectory_checks import RUNNER_TYPE, SURFACES, no_flapping
from tests.support.trajectory_text import cites_maximum

pytestmark = pytest.mark.slow

MAX = 40  # the scale set's maxRunners at first


def assert_none(problems: list[str]) -> None:
    assert not problems, "\n".join(problems)


async def test_a_surge_at_the_maximum(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The queue climbs while every runner is busy at the maximum: rising, and the advice grows
    with it, the same number everywhere; the form's capped default raises maxRunners."""
    first = Step(queued=6, busy=MAX, registered=MAX, maximum=MAX)
    name = "a surge at the maximum"
    async with trajectory(name, settings_for, slack, kube, tmp_path, first) as t:
        await t.look(first, expect="holding")
        for queued in (10, 14, 19, 24, 30, 36):
            await t.look(Step(queued, MAX, MAX), expect="rising")
        scaled = await t.scale_by_default()
    assert scaled.accepted, scaled
    assert_none(t.problems())


async def test_capacity_arriving_while_jobs_keep_coming(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """maxRunners goes from 40 to 80; runners register 8 a reading and take the queue, which
    falls 2 to 6 a reading while jobs keep arriving (more start than finish): falling, with no
    runners advised."""
    first = Step(queued=20, busy=MAX, registered=MAX, maximum=MAX)
    name = "capacity arriving while jobs keep coming"
    async with trajectory(name, settings_for, slack, kube, tmp_path, first) as t:
        await t.look(first, expect="holding")
        await t.look(Step(24, MAX, MAX), expect="rising")
        await t.look(Step(28, MAX, MAX), expect="rising")
        await t.look(Step(32, MAX, MAX, maximum=80, note="maxRunners 40 → 80"), expect="rising")
        for queued, runners in ((30, 48), (26, 56), (20, 64), (14, 72), (8, 80)):
            await t.look(Step(queued, runners, runners), expect="falling")
    assert_none(t.problems())


async def test_a_noisy_plateau_does_not_flap(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The queue wanders ±2 around 20 at the maximum: no reading advises runners as it rises
    and the next says it clears as it falls (or back)."""
    first = Step(queued=20, busy=MAX, registered=MAX, maximum=MAX)
    async with trajectory("a noisy plateau", settings_for, slack, kube, tmp_path, first) as t:
        for queued in (20, 22, 19, 21, 18, 20, 22, 19, 21):
            await t.look(Step(queued, MAX, MAX))
    assert_none(t.problems() + no_flapping(t.looks))


async def test_a_drain_after_a_scale_up(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The form's default is submitted as it opened; the scale set takes it, the runners
    arrive, the queue falls to nothing and the incident resolves on its drain, with a summary."""
    first = Step(queued=16, busy=MAX, registered=MAX, maximum=MAX)
    name = "a drain after a scale-up"
    async with trajectory(name, settings_for, slack, kube, tmp_path, first) as t:
        await t.look(first, expect="holding")
        scaled = await t.scale_by_default()
        assert scaled.accepted, scaled
        runners = scaled.after["maxRunners"]
        note = f"+{scaled.amount}: maxRunners {scaled.before['maxRunners']} → {runners}"
        await t.look(Step(12, runners, runners, note=note), expect="falling")
        for queued in (7, 3):
            await t.look(Step(queued, runners, runners), expect="falling")
        t.fleet.apply(Step(0, runners - 10, runners, note="drained"))
        summary = await t.resolved_by_drain()
    assert f"{RUNNER_TYPE}: " in summary and "(queue drained)" in summary
    assert_none(t.problems())


async def test_a_maximum_raised_by_hand_leaves_the_advice(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """maxRunners goes from 40 to 120 without the bot (kubectl) while the queue climbs at the
    maximum: by the second reading after it, no surface asks for a higher maximum or names the
    old one as the limit."""
    first = Step(queued=20, busy=MAX, registered=MAX, maximum=MAX)
    name = "a maximum raised by hand"
    async with trajectory(name, settings_for, slack, kube, tmp_path, first) as t:
        await t.look(first, expect="holding")
        await t.look(Step(25, MAX, MAX), expect="rising")
        short = await t.look(Step(30, MAX, MAX), expect="rising")
        raised = Step(34, MAX, MAX, maximum=120, note="maxRunners 40 → 120 by hand")
        await t.look(raised, expect="rising")
        later = [
            await t.look(Step(queued, runners, runners), expect="falling")
            for queued, runners in ((30, 60), (22, 80), (12, 100))
        ]
    assert any(cites_maximum(short.said[s], MAX) for s in SURFACES), (
        "at the maximum, some surface asks for a higher one"
    )
    still = [
        f"step {look.step} {surface}"
        for look in later
        for surface in SURFACES
        if cites_maximum(look.said[surface], MAX)
    ]
    problems = t.problems() + ([f"the old maximum still advised: {still}"] if still else [])
    assert_none(problems)
