"""The pilot through the real paths: ARC's listener metrics and runner pods scraped by a real
Prometheus, the scale set behind the Kubernetes stand-in, Slack emulated, Redis. It acts once the
advice has held, by the least asked within its step, as itself, with Undo and Pause pilot on its
reply; its runners are followed; it puts back with the incident; it declines while pods cannot
start; a wobble at the maximum moves it at most once; Undo puts back and pauses it."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.domain.scale.pilot import Paused, Piloted
from tests.support.fakes.arc_exporter import QUEUEING, ArcFleet
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, read_after, run_bot
from tests.support.slack import CHANNEL, USER, Slack, click, plain_times, post_event, shown, slash

SET = ("arc-runners", QUEUEING)
PILOT = {"up_to": 10, "step": 6, "hold_seconds": 3, "cooldown_seconds": 600}
# 20 runners, all busy, at the set's maximum of 20, and 34 jobs assigned: 14 queued.
AT_MAXIMUM = {
    "assigned_jobs": 34,
    "running_jobs": 20,
    "registered_runners": 20,
    "busy_runners": 20,
    "idle_runners": 0,
    "min_runners": 0,
    "max_runners": 20,
    "desired_runners": 20,
}


def settings(
    settings_for: Any,
    fleet: ArcFleet,
    kube: FakeKubeApi,
    tmp_path: Path,
    *,
    verify: int = 8,
    **pilot: int | str,
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
        scaler_backend="arc",
        scaler_kubeconfig=str(kube.kubeconfig(tmp_path, kube.url)),  # type: ignore[attr-defined]
        scaler_targets=json.dumps({QUEUEING: target | {"pilot": PILOT | pilot}}),
        scale_allowed_users=USER,
        scale_verify_seconds=verify,
        scale_revert_settle=0,
    )


def replies(slack: Slack) -> list[Any]:
    roots = slack.emulator.channel_messages(CHANNEL)
    return slack.emulator.thread(CHANNEL, roots[0].ts)[1:] if roots else []


def said(slack: Slack) -> list[str]:
    return [shown(m) for m in replies(slack)]


def maximum(kube: FakeKubeApi) -> int:
    return int(kube.sets[SET]["spec"]["maxRunners"])


def pods_cannot_start(fleet: ArcFleet, kube: FakeKubeApi) -> None:
    """At the maximum of 20, and 4 new runner pods no node has fit for ten minutes."""
    fleet.queueing.set(**AT_MAXIMUM)
    fleet.pods.set(
        fleet.queueing.name, running=20, unschedulable=4, pending_since=time.time() - 600
    )
    kube.add_from_fixture(minRunners=0, maxRunners=20)


async def pilot_state(running: RunningBot) -> tuple[Piloted, Paused | None]:
    store = running.bot.core.piloting.store
    assert store is not None
    return (await store.states([QUEUEING]))[QUEUEING]


async def alert_at_maximum(running: RunningBot, slack: Slack) -> None:
    await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
    thread = await slack.first_thread()
    await eventually(
        lambda: "busy 20/20" in shown(thread()[0]), what="the root with the live reading"
    )


async def test_it_acts_once_after_the_hold_its_runners_are_followed_and_it_puts_back(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    pods20.queueing.set(**AT_MAXIMUM)
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    # A deadline the registering need not race: a loaded machine's poll, scrape and reading
    # can take longer than 8 s (the test of runners that never come keeps it).
    async with run_bot(settings(settings_for, pods20, kube, tmp_path, verify=60)) as running:
        await alert_at_maximum(running, slack)
        act = await eventually(
            lambda: next((r for r in said(slack) if "queuepilot (policy)" in r), None),
            what="the pilot's act",
            timeout=40,
        )
        assert maximum(kube) == 26, "by its step of 6, the maximum raised where ARC is at it"
        assert f"queuepilot (policy) scaled {QUEUEING} by +6" in act
        assert "+6 by its step" in act and "maxRunners 20 → 26" in act
        assert "pilot_undo" in act and "pilot_pause" in act
        # ARC starts them: the reply that acted says they came.
        grown = {"registered_runners": 26, "busy_runners": 26, "running_jobs": 26}
        pods20.queueing.set(**AT_MAXIMUM | grown | {"max_runners": 26, "desired_runners": 26})
        outcome = await eventually(
            lambda: next((r for r in said(slack) if "6 registered by" in r), None),
            what="the act's outcome",
            timeout=30,
        )
        assert "queuepilot (policy) scaled" in outcome, "edited into the act's own reply"

        async def came() -> bool:
            piloted, paused = await pilot_state(running)
            return paused is None and piloted.outcome == "its runners came"

        await eventually(came, what="/queue pilot's last act said to have come")
        assert len([r for r in said(slack) if "queuepilot (policy) scaled" in r]) == 1
        # The incident resolves: the act goes back with it, as a person's does.
        assert (await post_event(running.http, slash("resolve 1"))).status_code == 200
        await eventually(lambda: maximum(kube) == 20, what="the put-back", timeout=30)
    patches = [p for p in kube.written if p[0].endswith(QUEUEING)]
    assert len(patches) == 2, "one act, one put-back"


async def test_a_dry_run_says_in_the_thread_what_it_would_have_done_and_scales_nothing(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """How a team tries the pilot for a few weeks: the same decision, said in the thread with
    when, on the timeline; the scale set is never patched, and `/queue pilot` says it is a dry
    run and what it would have done."""
    pods20.queueing.set(**AT_MAXIMUM)
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    config = settings(settings_for, pods20, kube, tmp_path, mode="dry-run")
    async with run_bot(config) as running:
        await alert_at_maximum(running, slack)
        would = await eventually(
            lambda: next((r for r in said(slack) if "(policy, dry run)" in r), None),
            what="the dry run's act",
            timeout=40,
        )
        assert re.search(
            rf"queuepilot \(policy, dry run\) would have scaled {re.escape(QUEUEING)} by \+6 at "
            r"\d\d:\d\d UTC: \+\d+ wanted for",
            would,
        ), would
        assert "pilot_undo" not in would, "nothing to undo"

        # On the timeline (the postmortem's, the issue's), with what it would have added.
        [would_be, *_] = [e for e in await running.bot.store.events("1") if e.would is not None]
        assert would_be.kind == "pilot_dry_run" and would_be.would.runners == 6
        assert not [a for a in (await running.bot.store.get("1")).actions if a.scale is not None]
        assert maximum(kube) == 20
    assert not [p for p in kube.written if p[0].endswith(QUEUEING)], "the scale set untouched"


async def test_its_word_is_one_thread_line_edited_in_place_on_the_root_and_on_the_record(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    """While new pods cannot start it stands aside: one pilot line in the thread and on the
    root says why. Paused from Slack, the same line is edited to say by whom; turned on again,
    edited again. The pause, the resume and why it stood aside are on the timeline, which the
    alert's issue and the postmortem are written from."""
    pods_cannot_start(pods20, kube)
    async with run_bot(settings(settings_for, pods20, kube, tmp_path)) as running:
        await alert_at_maximum(running, slack)
        thread = await slack.first_thread()

        def line() -> Any:
            lines = [m for m in thread()[1:] if "Pilot" in shown(m) and "🤖" in m.text + shown(m)]
            assert len(lines) <= 1, [shown(m) for m in lines]
            return lines[0] if lines else None

        first = await eventually(line, what="the pilot's line", timeout=40)
        assert "runners cannot start" in shown(first), shown(first)
        await eventually(
            lambda: "runners cannot start" in shown(thread()[0]), what="the root saying it"
        )
        assert (await post_event(running.http, slash("pilot off"))).status_code == 200
        paused = await eventually(
            lambda: (m := line()) is not None and "paused by" in shown(m) and m,
            what="the line edited to say it is paused",
        )
        assert paused.ts == first.ts, "edited in place, not posted again"
        assert (await post_event(running.http, slash("pilot on"))).status_code == 200
        await eventually(
            lambda: (m := line()) is not None and "paused by" not in shown(m),
            what="the line edited again once it is on",
        )
        assert line().ts == first.ts
        kinds = [e.kind for e in await running.bot.store.events("1")]
        assert {"pilot_declined", "pilot_paused", "pilot_resumed"} <= set(kinds), kinds
        assert maximum(kube) == 20


@pytest.mark.slow
async def test_while_pods_cannot_start_it_declines_and_a_person_s_raise_is_said_not_to_come(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    pods_cannot_start(pods20, kube)
    async with run_bot(settings(settings_for, pods20, kube, tmp_path)) as running:
        await alert_at_maximum(running, slack)

        async def declined() -> str:
            piloted, _ = await pilot_state(running)
            return piloted.why if "pods" in piloted.why else ""

        why = await eventually(declined, what="the pilot declining", timeout=40)
        assert why.startswith("runners cannot start: 4 "), why
        assert (
            await post_event(running.http, slash(f"scale {QUEUEING} +5 max"))
        ).status_code == 200
        outcome = await eventually(
            lambda: next((r for r in said(slack) if "+5 asked at" in r), None),
            what="the person's raise said not to come",
            timeout=40,
        )
        assert "0 registered after" in outcome and "Pending" in outcome
        assert not any("queuepilot (policy)" in r for r in said(slack)), "it never acted"
        assert maximum(kube) == 25


@pytest.mark.slow
async def test_a_wobble_at_the_maximum_moves_it_at_most_once(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    wobble = [24, 27, 21, 25, 22, 26, 23, 27, 21, 24, 26, 22, 25, 23, 27, 21, 24, 22, 26, 24]
    pods20.queueing.set(**AT_MAXIMUM | {"assigned_jobs": 24})
    config = settings(settings_for, pods20, kube, tmp_path, cooldown_seconds=0)
    async with run_bot(config) as running:
        await alert_at_maximum(running, slack)
        for assigned in wobble * 2:
            top = maximum(kube)  # ARC registers what the maximum lets it
            running_jobs = min(assigned, top)
            pods20.queueing.set(
                **AT_MAXIMUM
                | {
                    "assigned_jobs": assigned,
                    "running_jobs": running_jobs,
                    "registered_runners": top,
                    "busy_runners": running_jobs,
                    "idle_runners": top - running_jobs,
                    "max_runners": top,
                    "desired_runners": top,
                }
            )
            moment = datetime.now(UTC)
            await eventually(lambda m=moment: read_after(running, m), what="a reading")
        acts = [r for r in said(slack) if "queuepilot (policy) scaled" in r]
        assert len(acts) <= 1, acts


@pytest.mark.slow
async def test_undo_puts_the_act_back_at_once_and_pauses_the_pilot(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    pods20.queueing.set(**AT_MAXIMUM)
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    async with run_bot(settings(settings_for, pods20, kube, tmp_path)) as running:
        await alert_at_maximum(running, slack)
        act = await eventually(
            lambda: next((m for m in replies(slack) if "queuepilot (policy)" in shown(m)), None),
            what="the pilot's act",
            timeout=40,
        )
        assert maximum(kube) == 26
        assert (await click(running, act, "pilot_undo")).status_code == 200
        await eventually(lambda: maximum(kube) == 20, what="put back at once", timeout=20)
        undone = await eventually(
            lambda: next((r for r in said(slack) if "Undid the pilot's +6" in r), None),
            what="the undo said in the thread",
        )
        assert "paused for it until someone resumes it" in undone
        seen = [*slack.emulator.channel_messages(CHANNEL), *replies(slack)]
        assert [t for m in seen for t in plain_times(m)] == [], "times in the reader's zone"
        _, paused = await pilot_state(running)
        assert paused is not None and "undone" in paused.why
        # Paused: the advice still asks, and nothing more is added.
        for _ in range(6):  # readings that still ask, past the hold
            moment = datetime.now(UTC)
            await eventually(lambda m=moment: read_after(running, m), what="a reading")
        assert maximum(kube) == 20
        assert len([r for r in said(slack) if "queuepilot (policy) scaled" in r]) == 1


@pytest.mark.slow
async def test_an_act_whose_runners_do_not_come_pauses_the_pilot_and_says_why(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    pods20.queueing.set(**AT_MAXIMUM)
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    config = settings(settings_for, pods20, kube, tmp_path, cooldown_seconds=0)
    async with run_bot(config) as running:
        await alert_at_maximum(running, slack)
        await eventually(lambda: maximum(kube) == 26, what="the pilot's act", timeout=40)
        # ARC makes the pods, and no node takes them.
        pods20.pods.set(
            pods20.queueing.name,
            running=20,
            unschedulable=6,
            pending_since=time.time() - 600,
        )
        pods20.queueing.set(**AT_MAXIMUM | {"max_runners": 26, "desired_runners": 26})
        outcome = await eventually(
            lambda: next((r for r in said(slack) if "+6 asked at" in r), None),
            what="the act said not to come",
            timeout=40,
        )
        assert "0 registered after" in outcome and "queuepilot (policy) scaled" in outcome

        async def paused() -> str:
            _, pause = await pilot_state(running)
            return pause.why if pause is not None else ""

        why = await eventually(paused, what="the pilot paused")
        assert why.startswith("its +6 at ") and why.endswith("did not come up")
        assert maximum(kube) == 26, "no second act"


@pytest.mark.slow
async def test_an_undone_act_is_no_longer_followed_so_a_resumed_pilot_stays_on(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    pods20.queueing.set(**AT_MAXIMUM)
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    async with run_bot(settings(settings_for, pods20, kube, tmp_path, verify=4)) as running:
        await alert_at_maximum(running, slack)
        act = await eventually(
            lambda: next((m for m in replies(slack) if "queuepilot (policy)" in shown(m)), None),
            what="the pilot's act",
            timeout=40,
        )
        acted = datetime.now(UTC)
        assert (await click(running, act, "pilot_undo")).status_code == 200
        await eventually(lambda: maximum(kube) == 20, what="put back at once", timeout=20)
        # A person looked at it and turns the pilot back on before the act's deadline.
        assert (await post_event(running.http, slash(f"pilot on {QUEUEING}"))).status_code == 200

        async def resumed() -> bool:
            return (await pilot_state(running))[1] is None

        await eventually(resumed, what="the pilot resumed")

        async def looked_past_the_deadline() -> bool:
            piloted, _ = await pilot_state(running)
            return piloted.at is not None and (piloted.at - acted).total_seconds() > 4 + 2

        await eventually(looked_past_the_deadline, what="the pilot's looks past the deadline")
        _, paused = await pilot_state(running)
        assert paused is None, f"paused again by an act that was undone: {paused}"
        assert not any("did not come" in r or "0 registered after" in r for r in said(slack))
