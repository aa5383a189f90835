"""The pilot while a surge goes on, through the real paths (ARC's listener gauges scraped by a
real Prometheus, the scale set behind the Kubernetes stand-in, Slack emulated, Redis): while the
queue climbs it acts again a period after each act, each time adding what its readings still
want beyond the runners already coming (never asking twice for one need), within its step and
its up_to; while the queue falls it does not act, and `/queue pilot` says why.

Both run with a drain target of a fraction of a second. A reading then desires the runners
running plus one per job queued, and at most one more for the growth over the target (a queue
climbing or falling some hundred jobs a minute at most, times 0.06 s): the capacity the readings
ask is the jobs fed, give or take one. With the default 30 min, a queue climbing a job a reading
(60 a minute) desires some 1,800 runners more than it has: every act is the step, and one that
asked twice for one need could not show.

Both also run with SCALE_COOLDOWN_SECONDS=0: the type's fleet-wide lock, which the pilot's own
acts take too, is kept that long after any scale-up (default 60 s), and until it lapses the pilot
is refused ("was just scaled") whatever its `period_seconds` says (`queuepilot check` warns of a
period shorter than the lock)."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.domain.reading.fleet import of_type
from bot.domain.reading.judgement import Direction
from bot.domain.scale.pilot import Piloted, pilot_acts
from tests.support.fakes.arc_exporter import ArcFleet
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.running import RunningBot, eventually, read_after, run_bot
from tests.support.slack import Slack
from tests.system.test_pilot import (
    AT_MAXIMUM,
    QUEUEING,
    SET,
    alert_at_maximum,
    maximum,
    pilot_state,
    said,
    settings,
)

STEP, PERIOD_S, HOLD = 6, 4, timedelta(seconds=3)
# 0.06 s to drain in: a reading desires the jobs assigned, and at most one more (the docstring).
DRAIN_TARGET_MINS = 0.001
GROWTH_OVER_TARGET = 1
# Why the pilot does not act where the capacity there is meets what its readings want.
MET = ("its readings want no more than", "cover the least its readings want")


def quick(settings_for: Callable[..., Any]) -> Callable[..., Any]:
    """`settings_for` with the drain target and the lock of the docstring."""

    def make(**values: Any) -> Any:
        return settings_for(
            **values, drain_target_minutes=DRAIN_TARGET_MINS, scale_cooldown_seconds=0
        )

    return make


def gauges(assigned: float, top: int) -> dict[str, float]:
    """ARC with `assigned` jobs, its runners what the maximum `top` lets it register, all busy."""
    running = min(assigned, top)
    return AT_MAXIMUM | {
        "assigned_jobs": assigned,
        "running_jobs": running,
        "registered_runners": top,
        "busy_runners": running,
        "idle_runners": top - running,
        "max_runners": top,
        "desired_runners": top,
    }


def patched(kube: FakeKubeApi) -> list[tuple[float, int]]:
    """The scale set's maxRunners patches, as (when the API server applied it, the value)."""
    return [
        (at, int(body["spec"]["maxRunners"]))
        for at, (path, body) in zip(kube.written_at, kube.written, strict=True)
        if path.endswith(QUEUEING)
    ]


async def a_reading(running: RunningBot) -> None:
    moment = datetime.now(UTC)
    await eventually(lambda: read_after(running, moment), what="a reading", timeout=40)


async def direction(running: RunningBot) -> Direction | None:
    """The latest reading's direction of the queueing type's queue."""
    reading = await running.bot.readings.stored()
    fleet = reading.fleet if reading is not None else None
    metrics = of_type(fleet.runner_types, QUEUEING) if fleet is not None else None
    return metrics.judged.direction if metrics is not None and metrics.judged else None


@asynccontextmanager
async def falling(fleet: ArcFleet, queued: float, per_s: float) -> AsyncIterator[None]:
    """The queue falls from `queued` by `per_s` of itself a second, whole jobs, until the block
    ends, set every 100 ms: in time, not by reading, so the readings see a steady fall however
    far apart they come. By a share, not by jobs: each reading's fall stays beyond the queue's
    noise (a twentieth of it, four jobs at least) for over a minute."""
    began = time.monotonic()

    async def fall() -> None:
        while True:
            left = queued * math.exp(-per_s * (time.monotonic() - began))
            fleet.queueing.set(**gauges(20 + round(left), 20))
            await asyncio.sleep(0.1)

    task = asyncio.create_task(fall())
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


def acts(slack: Slack) -> list[str]:
    return [r for r in said(slack) if "queuepilot (policy) scaled" in r]


@pytest.mark.slow
async def test_while_the_queue_climbs_it_acts_again_a_period_on_each_act_beyond_the_runners_already_coming(  # noqa: E501
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    up_to, start, top = 30, 28, 36
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    # 20 runners, all busy, at the maximum of 20, and 28 jobs assigned: the readings desire 28.
    assigned = start
    pods20.queueing.set(**gauges(assigned, 20))
    policy = {"hold_seconds": HOLD.seconds, "period_seconds": PERIOD_S, "cooldown_seconds": 600}
    config = settings(
        quick(settings_for), pods20, kube, tmp_path, verify=60, step=STEP, up_to=up_to, **policy
    )
    fed: list[tuple[datetime, int]] = [(datetime.now(UTC), assigned)]  # (set from, assigned)
    async with run_bot(config) as running:
        await alert_at_maximum(running, slack)
        # A job more every reading up to 36, then 36 on: the first act takes 6 of the 8 or more
        # wanted, the next ones what is wanted beyond the capacity there is, their own acts'
        # included, and once that meets the 36 nothing more, though 30 were allowed.

        async def settled() -> str:
            """Why it no longer acts once its capacity meets its readings' wants."""
            piloted, _ = await pilot_state(running)
            return piloted.why if any(w in piloted.why for w in MET) else ""

        why = ""
        for _ in range(60):
            assigned = min(assigned + 1, top)
            fed.append((datetime.now(UTC), assigned))
            pods20.queueing.set(**gauges(assigned, maximum(kube)))
            await a_reading(running)
            if assigned == top and (why := await settled()):
                break
        # Readings over two periods more: nothing more is asked of it.
        for _ in range(PERIOD_S * 2):
            pods20.queueing.set(**gauges(assigned, maximum(kube)))
            await a_reading(running)
        await eventually(lambda: len(acts(slack)) == len(patched(kube)), what="each act said")
        incident = await running.bot.store.get("1")
    assert incident is not None
    made = [e.scale for e in pilot_acts(incident, QUEUEING) if e.scale is not None]
    report = f"acts {[(m.at, m.added, m.after) for m in made]}; fed {fed}; said {acts(slack)}"
    assert len(made) >= 2, report
    patches = patched(kube)
    assert len(acts(slack)) == len(made) == len(patches), report
    assert [after for _, after in patches] == [m.after for m in made], report
    # Each act within its step (the first wanted 8); all of them within its up_to.
    assert all(1 <= m.added <= STEP for m in made), report
    assert made[0].added == STEP, report
    assert sum(m.added for m in made) == maximum(kube) - 20 <= up_to, report
    # Again a period after each act, not sooner, though more was wanted at once: as recorded,
    # and as the API server applied them.
    times = [m.at for m in made if m.at is not None]
    assert len(times) == len(made), report
    assert all((b - a).total_seconds() >= PERIOD_S for a, b in itertools.pairwise(times)), report
    seen = [at for at, _ in patches]
    assert all(b - a >= PERIOD_S for a, b in itertools.pairwise(seen)), patches
    # Never twice for one need. The readings desired at most the jobs fed before them, and one
    # for the growth (the docstring): at most 37. The acts add at most that less the 20 there
    # were; each by the time it was made, what had been fed by then. One that asked again for
    # what an earlier one brought would pass it: 26, 32, 38, 44 ...
    most = max(jobs for _, jobs in fed) + GROWTH_OVER_TARGET
    assert sum(m.added for m in made) <= most - 20, report
    for act in made:
        assert act.at is not None and act.after is not None
        by_then = max(jobs for at, jobs in fed if at < act.at) + GROWTH_OVER_TARGET
        assert act.after <= by_then, (act, by_then, report)
    # The readings met, it says so; two periods on, it had asked nothing more.
    assert any(words in why for words in MET), why


@pytest.mark.slow
async def test_while_the_queue_falls_it_does_not_act(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    pods20.queueing.set(**gauges(20 + 1000, 20))
    policy = {"hold_seconds": HOLD.seconds, "period_seconds": PERIOD_S, "cooldown_seconds": 600}
    config = settings(
        quick(settings_for), pods20, kube, tmp_path, verify=60, step=STEP, up_to=30, **policy
    )
    # 1,000 jobs queued behind 20 busy runners at the maximum of 20, falling 4% a second: some
    # 40 jobs a second at first, 12 after 30 s. Each reading desires the jobs there are (the
    # drain target of a fraction of a second: the docstring): hundreds more than the 20 runners,
    # all through the hold, so only the fall keeps the pilot from acting.
    async with run_bot(config) as running, falling(pods20, 1000, 0.04):

        async def seen_falling() -> bool:
            return await direction(running) is Direction.FALLING

        await eventually(seen_falling, what="the readings seeing the fall", timeout=40)
        await alert_at_maximum(running, slack)

        async def declines() -> str:
            """Why it declines the fall once it does, or its act where it acts instead."""
            piloted, _ = await pilot_state(running)
            return next(iter(acts(slack)), piloted.why if "falling" in piloted.why else "")

        why = await eventually(declines, what="the pilot declining the fall", timeout=40)
        began = time.monotonic()
        # Readings past a hold and a period more, each wanting hundreds more runners; what the
        # pilot made of each.
        looks: list[Piloted] = []
        while len(looks) < 6 or time.monotonic() - began < HOLD.seconds + PERIOD_S:
            await a_reading(running)
            assert acts(slack) == [], acts(slack)
            assert await direction(running) is Direction.FALLING, "a steady fall, read as one"
            piloted, paused = await pilot_state(running)
            assert paused is None, paused
            looks.append(piloted)
    assert why == "the queue is falling", why
    # Where its readings had wanted more through the whole hold (twice the runners there were,
    # at the least), the fall alone held it back. (A look of a loaded machine may find the
    # reading too old to show in the incident, and start the hold again.)
    held = [p for p in looks if p.hold is not None and p.hold.at - p.hold.since >= HOLD]
    assert held, looks
    assert all(p.why == "the queue is falling" for p in held), looks
    assert all(p.hold is not None and p.hold.least > 40 for p in held), looks
    assert not any("queuepilot (policy)" in r for r in said(slack)), said(slack)
    assert maximum(kube) == 20
    assert [p for p in kube.written if p[0].endswith(SET[1])] == []
