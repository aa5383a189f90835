"""One judgement, rendered everywhere: a served bot on a scripted ARC scale set, read after each
step as a responder reads it (`tests/support/trajectory.py`). After every step the root, the
latest status, diagnostics, `/queue` and the Scale up… modal's default agree on the advice for
linux.2xlarge; the direction is right by the third reading after a turn; nothing says rising
or +N once the queue fell two readings in a row, nor anything but "none" with nothing queued;
every form default is one the target takes. The advice is sized as in production (+5 to +40
along a surge), so agreeing on it is not agreeing on +1; a scale-up capped below it leaves the
rest, not the whole, to the next form.

`pytest tests/system/test_trajectories.py -s -n0` prints what each surface said at each step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes.arc_script import Step
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.slack import Slack
from tests.support.trajectory import trajectory
from tests.support.trajectory_checks import CAP, RUNNER_TYPE, no_flapping
from tests.support.trajectory_text import Advice, advice_of, cites_maximum

pytestmark = pytest.mark.slow

MAX = 40  # the scale set's maxRunners at first


def assert_none(problems: list[str]) -> None:
    assert not problems, "\n".join(problems)


def sized(advised: list[Advice]) -> list[str]:
    """Advice in production's sizes that moves with the queue: +5 to +40 runners, at least four
    different numbers, not a +1 that any rule would agree on."""
    numbers = [a for a in advised if isinstance(a, int) and 5 <= a <= 40]
    if len(numbers) == len(advised) and len(set(numbers)) >= 4:
        return []
    return [f"the advice along the surge is not +5 to +40 and moving: {advised}"]


async def test_a_surge_at_the_maximum(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """The queue climbs, faster and faster, while every runner is busy at the maximum: rising,
    and the advice grows with it from +5 to some +37, the same number everywhere; the form's
    capped default raises maxRunners."""
    first = Step(queued=26, busy=MAX, registered=MAX, maximum=MAX)
    name = "a surge at the maximum"
    async with trajectory(name, settings_for, slack, kube, tmp_path, first) as t:
        await t.look(first)  # too few readings yet to tell a direction
        for queued in (30, 34, 38, 43, 48, 54):
            await t.look(Step(queued, MAX, MAX), expect="rising")
        scaled = await t.scale_by_default()
    assert scaled.accepted, scaled
    assert_none(t.problems() + sized([look.advice("root") for look in t.looks]))


async def test_capacity_arriving_while_jobs_keep_coming(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """maxRunners goes from 40 to 80 without the bot (kubectl) while the queue climbs at the
    maximum: by the third reading after it, no surface asks for a higher maximum or names the
    old one as the limit. Runners register 8 a reading and take the queue, which falls 2 to 8 a
    reading while jobs keep arriving (more start than finish): falling, with no runners advised;
    then nothing queues while 80 runners keep taking jobs as they come, the surge still in the
    rates' window: no surface advises runners or a higher maximum. (A drain needs the most
    drained checks allowed, so the incident stays open to be read at 0: a check comes with
    every status, a second apart here.)"""
    first = Step(queued=20, busy=MAX, registered=MAX, maximum=MAX)
    name = "capacity arriving while jobs keep coming"
    async with trajectory(name, settings_for, slack, kube, tmp_path, first, drain_checks=100) as t:
        await t.look(first)  # too few readings yet to tell a direction
        await t.look(Step(24, MAX, MAX), expect="rising")
        short = await t.look(Step(28, MAX, MAX), expect="rising")
        raised = Step(32, MAX, MAX, maximum=80, note="maxRunners 40 → 80 by hand")
        await t.look(raised, expect="rising")
        later = [
            await t.look(Step(queued, runners, runners), expect="falling")
            for queued, runners in ((30, 48), (26, 56), (20, 64))
        ]
        for queued, runners in ((14, 72), (8, 80)):
            await t.look(Step(queued, runners, runners), expect="falling")
        empty = await t.look(Step(0, 80, 80, note="nothing queued, jobs still coming"))
    arrivals, _ = empty.rates
    assert arrivals, f"at 0, no arrivals in the rates' window: {empty.rates}"
    assert any(cites_maximum(short.said[s], MAX) for s in short.surfaces()), (
        "at the maximum, some surface asks for a higher one"
    )
    still = [
        f"step {look.step} {surface}"
        for look in later
        for surface in look.surfaces()
        if cites_maximum(look.said[surface], MAX)
    ]
    problems = t.problems() + ([f"the old maximum still advised: {still}"] if still else [])
    assert_none(problems)


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
    """The queue holds at 160 behind a full fleet: +27, more than one request adds, so every
    surface advises the cap and says more would be needed. The form's default is the most one
    may (+20, "+7 more after this one"); once confirmed, the root counts the 20 booting and
    advises the rest, and after the next reading the form offers the rest, never the whole
    again, which the scale set takes too. The runners arrive, the queue falls to nothing and the
    incident resolves on its drain, with a summary."""
    first = Step(queued=160, busy=MAX, registered=MAX, maximum=MAX)
    name = "a drain after a scale-up"
    async with trajectory(name, settings_for, slack, kube, tmp_path, first) as t:
        look = await t.look(first)  # too few readings for a direction
        assert look.advice("root") == CAP, look.said["root"]
        assert f"+{CAP} runners (the cap); more would be needed" in look.said["root"]
        capped = await t.scale_by_default()
        assert capped.accepted and capped.amount == CAP, capped
        more_after = re.search(r"\+(\d+) more after this one", capped.said)
        assert more_after, capped.said
        whole = CAP + int(more_after.group(1))
        root = await t.root_saying(f"{CAP} booting")
        assert advice_of(root, RUNNER_TYPE) == whole - CAP, root
        raised = capped.after["maxRunners"]
        booting = Step(160, MAX, MAX, note=f"+{CAP}: maxRunners {MAX} → {raised}, booting")
        rest = await t.look(booting, expect="holding")
        assert f"{CAP} booting" in rest.said["root"], rest.said["root"]
        assert rest.advice("root") == rest.form == whole - CAP, (rest.form, rest.said["root"])
        more = await t.scale_by_default()
        assert more.accepted and more.amount == whole - CAP, more
        runners = more.after["maxRunners"]
        note = f"+{more.amount}: maxRunners {raised} → {runners}; {CAP} registered"
        await t.look(Step(135, raised, raised, note=note), expect="falling")
        for queued in (100, 70, 35):
            await t.look(Step(queued, runners, runners), expect="falling")
        t.fleet.apply(Step(0, runners - 10, runners, note="drained"))
        summary = await t.resolved_by_drain()
    assert f"{RUNNER_TYPE}: " in summary and "(queue drained)" in summary
    assert_none(t.problems())
