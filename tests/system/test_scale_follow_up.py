"""A scale-up from Slack followed to its effect through the real paths: ARC's listener metrics and
runner pods scraped by a real Prometheus, the scale set behind the Kubernetes stand-in, Slack
emulated, Redis. The runners register: the scale-up's own reply is edited to say they came, and
the summary says so with the minutes from the alert to added capacity. The new pods stay
Pending, unschedulable: after the deadline the thread says they did not come, and why."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.fakes.arc_exporter import AT_MAXIMUM, QUEUEING, ArcFleet
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, USER, Slack, post_event, shown, slash

SET = ("arc-runners", QUEUEING)


def settings(
    settings_for: Any, fleet: ArcFleet, kube: FakeKubeApi, tmp_path: Path, verify: int = 8
) -> Any:
    return settings_for(
        metrics_backend="prometheus",
        prometheus_url=fleet.prometheus.url,
        prometheus_rate_window="30s",
        metrics_interval_seconds=1,
        status_interval_seconds=600,
        status_tick_seconds=0.5,
        scaler_backend="arc",
        scaler_kubeconfig=str(kube.kubeconfig(tmp_path, kube.url)),  # type: ignore[attr-defined]
        scaler_targets=json.dumps(
            {QUEUEING: {"target": f"arc-runners/{QUEUEING}", "cap": 20, "ceiling": 150}}
        ),
        scale_allowed_users=USER,
        scale_verify_seconds=verify,
    )


def replies(slack: Slack) -> list[str]:
    """The first thread's replies as shown."""
    roots = slack.emulator.channel_messages(CHANNEL)
    return [shown(m) for m in slack.emulator.thread(CHANNEL, roots[0].ts)[1:]] if roots else []


async def scaled_by_five(running: Any, slack: Slack, kube: FakeKubeApi) -> None:
    """The alert, a reading of the set at its maximum, then `/queue scale <type> +5 max`."""
    await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
    thread = await slack.first_thread()
    await eventually(
        lambda: "busy 20/20" in shown(thread()[0]),
        what="the root with the live reading",
        timeout=30,
    )
    assert (await post_event(running.http, slash(f"scale {QUEUEING} +5 max"))).status_code == 200
    await eventually(lambda: kube.sets[SET]["spec"]["maxRunners"] == 25, what="ARC raised")


async def test_runners_that_register_are_said_in_the_scale_ups_own_reply(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    pods20.queueing.set(**AT_MAXIMUM)
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    # A deadline the registering need not race: a loaded machine's poll, scrape and reading
    # can take longer than the other test's 8 s.
    async with run_bot(settings(settings_for, pods20, kube, tmp_path, verify=60)) as running:
        await scaled_by_five(running, slack, kube)
        await eventually(
            lambda: any("Scaled" in r and "maxRunners 20 → 25" in r for r in replies(slack)),
            what="the scale-up's reply",
        )
        grown = {"registered_runners": 25, "busy_runners": 25, "running_jobs": 25}
        pods20.queueing.set(**AT_MAXIMUM | grown | {"max_runners": 25, "desired_runners": 25})
        said = await eventually(
            lambda: next((r for r in replies(slack) if "5 registered by" in r), None),
            what="the outcome",
            timeout=30,
        )
        assert f"+5 on {QUEUEING} at <!date^" in said and "all busy" in said
        assert "Scaled" in said and "maxRunners 20 → 25" in said, "edited in its own reply"
        assert len([r for r in replies(slack) if "registered" in r]) == 1, "said once"
        # Resolved, the summary tells the scale-up, what came of it, and when capacity came.
        assert (await post_event(running.http, slash("resolve 1"))).status_code == 200
        summary = await eventually(
            lambda: next((r for r in replies(slack) if "resolved" in r and "Duration" in r), None),
            what="the summary",
            timeout=30,
        )
        assert f"added +5 on {QUEUEING} at <!date^" in summary
        assert "they came up by <!date^" in summary
        assert "⏱️ Capacity added " in summary and " after the alert" in summary


@pytest.mark.slow
async def test_pods_pending_unschedulable_are_said_when_the_deadline_passes(
    settings_for: Any, slack: Slack, pods20: ArcFleet, kube: FakeKubeApi, tmp_path: Path
) -> None:
    pods20.queueing.set(**AT_MAXIMUM)
    kube.add_from_fixture(minRunners=0, maxRunners=20)
    async with run_bot(settings(settings_for, pods20, kube, tmp_path)) as running:
        await scaled_by_five(running, slack, kube)
        pods20.pods.set(
            pods20.queueing.name,
            running=20,
            unschedulable=5,
            pending_since=time.time() - 600,
        )
        pods20.queueing.set(**AT_MAXIMUM | {"max_runners": 25, "desired_runners": 25})
        said = await eventually(
            lambda: next((r for r in replies(slack) if "+5 asked at" in r), None),
            what="the outcome after the deadline",
            timeout=40,
        )
        assert "0 registered after" in said
        assert "5 runner pods Pending" in said and "no node fits (unschedulable)" in said
