"""A put-back followed to the fleet through the real paths: a scale-up from Slack raises ARC's
maxRunners behind the Kubernetes stand-in (its controller reacting as ARC's does), the incident
resolves, the bound goes back; the put-back's own reply is then edited to say whether the
runners came back within it, read from the scale set, or are still above it at the deadline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.actions.test_scale_reverts import arc_settings
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.running import eventually, run_bot
from tests.support.scale import RUNNER, open_incident
from tests.support.slack import Slack, post_event, slash, thread_texts

SET = ("arc-runners", "mt-l-x86iavx512-8-64")
PUT_BACK = f"Put {RUNNER} back (the incident resolved and its queue stayed drained 1 s): "
BACK = f"maxRunners of {RUNNER} back to 20 at <!date^"
SUMMARY = "*Incident 1 resolved*"


def at_maximum(kube: FakeKubeApi) -> None:
    kube.add_from_fixture(minRunners=0, maxRunners=20)["status"]["currentRunners"] = 20


def settled(kube: FakeKubeApi, max_runners: int, reactions: int) -> bool:
    """ARC took the spec on: what it writes to the status now stays. Its reaction to this change
    over, not the last one's phase still standing: a test's status written before the reaction
    ends would be overwritten by the counts ARC kept from before it."""
    runner_set = kube.sets[SET]
    return runner_set["spec"]["maxRunners"] == max_runners and kube.reacted(times=reactions)


async def raised_then_put_back(running: Any, slack: Slack, kube: FakeKubeApi) -> str:
    """+5 on maxRunners, the 5 runners started, the incident resolved: the put-back's reply."""
    root = await open_incident(running, slack)
    await post_event(running.http, slash(f"scale {RUNNER} +5 max"))
    await eventually(lambda: settled(kube, 25, 1), what="maxRunners raised, taken on")
    kube.write(manager="manager", status={"currentRunners": 25})
    await post_event(running.http, slash("resolve 1"))
    await eventually(lambda: settled(kube, 20, 2), what="maxRunners put back, taken on")
    await eventually(
        lambda: [t for t in thread_texts(slack, root.ts) if PUT_BACK in t], what="put back"
    )
    return root.ts


def put_back_replies(slack: Slack, ts: str) -> list[str]:
    """The put-back's own reply (the summary, edited after it, lists it under what was done)."""
    return [t for t in thread_texts(slack, ts) if PUT_BACK in t and SUMMARY not in t]


async def test_runners_back_within_the_bound_are_said_in_the_put_backs_own_reply(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    at_maximum(kube)
    settings = arc_settings(
        settings_for, kube, tmp_path, scale_revert_settle="1s", scale_verify_seconds=60
    )
    async with run_bot(settings) as running:
        ts = await raised_then_put_back(running, slack, kube)
        assert not [t for t in put_back_replies(slack, ts) if BACK in t], "25 runners still"
        kube.write(manager="manager", status={"currentRunners": 20})  # ARC removed 5 idle ones
        [reply] = await eventually(
            lambda: [t for t in put_back_replies(slack, ts) if BACK in t], what="edited"
        )
        assert "maxRunners 25 → 20 (ARC)" in reply, "the put-back as it was, edited"
        assert f"✅ {BACK}" in reply and ": 20 runners by <!date^" in reply
        assert "; ARC removes only runners without a job, so no running job was cut" in reply
        assert len(put_back_replies(slack, ts)) == 1, "said in place, not in a new reply"
        timeline = await running.bot.store.events("1")
        [seen] = [e.text for e in timeline if e.kind == "put_back_seen"]
        assert seen.startswith(f"maxRunners of {RUNNER} back to 20 at ")


async def test_runners_still_above_the_bound_at_the_deadline_are_said_once(
    settings_for: Any, slack: Slack, kube: FakeKubeApi, tmp_path: Path
) -> None:
    at_maximum(kube)
    settings = arc_settings(
        settings_for, kube, tmp_path, scale_revert_settle="1s", scale_verify_seconds=2
    )
    async with run_bot(settings) as running:
        ts = await raised_then_put_back(running, slack, kube)
        [reply] = await eventually(
            lambda: [t for t in put_back_replies(slack, ts) if BACK in t], what="the deadline"
        )
        assert f"⚠️ {BACK}" in reply and ": still 25 runners after " in reply
        assert "no running job was cut" not in reply, "only said once they are back"
        timeline = await running.bot.store.events("1")
        assert len([e for e in timeline if e.kind == "put_back_seen"]) == 1
