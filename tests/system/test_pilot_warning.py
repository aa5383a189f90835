"""The pilot before the alert: a queue building at its scale set's maximum raises an early warning,
and no alert has fired. Through ARC's listener metrics in a real Prometheus, the scale set behind
the Kubernetes stand-in, Slack emulated and Redis, the pilot acts on the warning once its advice
has held, says so on the warning's message with Undo and Pause pilot, follows the runners, and
Undo puts the act back at once and pauses it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes.arc_exporter import QUEUEING, ArcFleet
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.running import RunningBot, eventually, read_after, run_bot
from tests.support.slack import CHANNEL, USER, Slack, click, plain_times, shown

SET = ("arc-runners", QUEUEING)
PILOT = {"up_to": 10, "step": 6, "hold_seconds": 3, "cooldown_seconds": 600}
# 20 runners, all busy, at the set's maximum of 20.
AT_MAXIMUM = {
    "running_jobs": 20,
    "registered_runners": 20,
    "busy_runners": 20,
    "idle_runners": 0,
    "min_runners": 0,
    "max_runners": 20,
    "desired_runners": 20,
}


def settings(
    settings_for: Any, fleet: ArcFleet, kube: FakeKubeApi, tmp_path: Path, **pilot: Any
) -> Any:
    target = {"target": f"arc-runners/{QUEUEING}", "cap": 20, "ceiling": 150}
    return settings_for(
        metrics_backend="prometheus",
        prometheus_url=fleet.prometheus.url,
        prometheus_rate_window="30s",
        metrics_interval_seconds=1,
        status_interval_seconds=600,
        status_tick_seconds=0.5,
        advice_rise_window=3,
        early_warning_queued=40,
        scaler_backend="arc",
        scaler_kubeconfig=str(kube.kubeconfig(tmp_path, kube.url)),  # type: ignore[attr-defined]
        scaler_targets=json.dumps({QUEUEING: target | {"pilot": PILOT | pilot}}),
        scale_allowed_users=USER,
        scale_verify_seconds=20,
    )


def maximum(kube: FakeKubeApi) -> int:
    return int(kube.sets[SET]["spec"]["maxRunners"])


def warning(slack: Slack) -> Any:
    return next(
        (m for m in slack.emulator.channel_messages(CHANNEL) if "Early warning" in m.text), None
    )


def warning_says(slack: Slack, words: str) -> str:
    """The warning's message once it says `words`; a wait that ends says what it said instead."""
    message = warning(slack)
    said = shown(message) if message is not None else "(no warning)"
    assert words in said, said
    return said


@asynccontextmanager
async def building(fleet: ArcFleet, kube: FakeKubeApi) -> AsyncIterator[None]:
    """A job more assigned every half second, the set's runners at what its maximum lets ARC
    register (all busy), until the block ends."""
    assigned = 22.0
    going = True

    async def build() -> None:
        nonlocal assigned
        while going:
            await asyncio.sleep(0.5)
            assigned += 1
            top = maximum(kube)
            fleet.queueing.set(
                **AT_MAXIMUM
                | {
                    "assigned_jobs": assigned,
                    "max_runners": top,
                    "desired_runners": top,
                    "registered_runners": top,
                    "busy_runners": top,
                    "running_jobs": top,
                }
            )

    fleet.queueing.set(**AT_MAXIMUM | {"assigned_jobs": assigned})
    task = asyncio.create_task(build())
    try:
        yield
    finally:
        going = False
        await task


async def pilot_paused(running: RunningBot) -> str:
    store = running.bot.core.piloting.store
    assert store is not None
    _, paused = (await store.states([QUEUEING]))[QUEUEING]
    return paused.why if paused is not None else ""


@pytest.mark.slow
async def test_it_acts_on_an_early_warning_before_any_alert_and_undo_puts_it_back(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    async with (
        run_bot(settings(settings_for, pods20, kube, tmp_path)) as running,
        building(pods20, kube),
    ):
        acted = await eventually(
            lambda: warning_says(slack, "queuepilot (policy) scaled"),
            what="the pilot's act on the early warning",
            timeout=60,
        )
        assert f"queuepilot (policy) scaled {QUEUEING} by +6" in acted, acted
        assert "maxRunners 20 → 26" in acted and maximum(kube) == 26
        message = warning(slack)
        assert "pilot_undo" in json.dumps(message.blocks) and "pilot_pause" in json.dumps(
            message.blocks
        )
        assert not any("Jobs queueing" in m.text for m in slack.emulator.channel_messages(CHANNEL))
        # ARC registers the 26 the new maximum lets it: the warning's message says they came.
        came = await eventually(
            lambda: warning_says(slack, "6 registered by"),
            what="the act's runners said to have come",
            timeout=30,
        )
        assert "✅ +6 on" in came
        assert plain_times(warning(slack)) == [], "every time on it in the reader's zone"

        assert (await click(running, warning(slack), "pilot_undo")).status_code == 200
        await eventually(lambda: maximum(kube) == 20, what="put back at once", timeout=20)
        undone = await eventually(
            lambda: warning_says(slack, "Undone by"), what="the undo said on the warning"
        )
        assert "pilot_undo" not in json.dumps(warning(slack).blocks), "nothing left to undo"
        assert "undone" in undone.lower()
        assert "undone" in await eventually(lambda: pilot_paused(running), what="paused")
        # Paused: the advice still asks through more than a hold, and nothing more is added.
        for _ in range(6):  # readings that still ask, past the hold
            moment = datetime.now(UTC)
            await eventually(lambda m=moment: read_after(running, m), what="a reading")
        assert maximum(kube) == 20
    patches = [p for p in kube.written if p[0].endswith(QUEUEING)]
    assert len(patches) == 2, "one act, one undo"


async def test_a_dry_run_on_an_early_warning_says_on_it_what_it_would_have_done_and_scales_nothing(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """Before any alert, a dry run's act is said on the warning's message (no thread yet) and
    kept there, counted as if made: readings past the hold that still ask add no second one
    within its period, and the scale set is never written."""
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    config = settings(settings_for, pods20, kube, tmp_path, mode="dry-run")
    async with run_bot(config) as running, building(pods20, kube):
        said = await eventually(
            lambda: warning_says(slack, "Dry run: the pilot would have scaled"),
            what="the dry run's act said on the early warning",
            timeout=60,
        )
        assert f"would have scaled {QUEUEING} by +6 at" in said, said
        assert "pilot_undo" not in json.dumps(warning(slack).blocks), "nothing to undo"
        for _ in range(6):  # readings that still ask, past the hold
            moment = datetime.now(UTC)
            await eventually(lambda m=moment: read_after(running, m), what="a reading")
        line = warning_says(slack, "Dry run").split("Dry run: ")[1].split('"')[0]
        assert line.count("+") == 1, f"one act, counted as made: {line}"
        assert not any("Jobs queueing" in m.text for m in slack.emulator.channel_messages(CHANNEL))
    assert maximum(kube) == 20 and not [p for p in kube.written if p[0].endswith(QUEUEING)]
