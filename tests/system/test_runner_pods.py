"""Why runners do not come up, end to end: a real Prometheus scrapes ARC's listeners and the
runner pods' series in kube-state-metrics' and cAdvisor's shapes (`sandbox.runner_pods`); the
served bot's diagnostics, read back from Slack, name the pods that cannot be scheduled and the
jobs OOMKilled, never advise raising the maximum while pods cannot be scheduled, and say once
what a source not scraped would tell."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes.arc_exporter import ArcFleet
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack, click

LIVE_S = 60


@pytest.fixture
def pods_fleet() -> Iterator[ArcFleet]:
    """The queueing scale set at its maximum, with 12 new pods that no node fits and 3 jobs
    OOMKilled; kube-state-metrics scraped, cAdvisor not."""
    fleet = ArcFleet(pods=("ksm",))
    fleet.pods.set(
        fleet.queueing.name,
        running=4,
        unschedulable=12,
        oom_killed=3,
        # Kept served, so a scrape catches them: ARC deletes a killed pod within seconds.
        oom_seen_s=None,
        pending_since=time.time() - 600,
    )
    fleet.pods.set(fleet.healthy.name, running=2)
    try:
        yield fleet
    finally:
        fleet.stop()


def text_of(message: Any) -> str:
    return (message.text + json.dumps(message.blocks, ensure_ascii=False)).replace("*", "")


async def test_diagnostics_name_unschedulable_pods_and_oom_kills_and_never_raise_the_maximum(
    settings_for: Any, slack: Slack, pods_fleet: ArcFleet
) -> None:
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=pods_fleet.prometheus.url,
        prometheus_rate_window="30s",
        metrics_interval_seconds=1,
        status_interval_seconds=1,
    )
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        root = await eventually(
            lambda: slack.emulator.channel_messages(CHANNEL), what="the root", timeout=30
        )
        root_ts = root[0].ts

        def thread() -> list[Any]:
            return slack.emulator.thread(CHANNEL, root_ts)

        # The reading that judged the pods: the root's advice is none while pods cannot start.
        await eventually(
            lambda: "none until pods start" in text_of(thread()[0]),
            what="the root's advice held while pods cannot start",
            timeout=LIVE_S,
        )
        assert (await click(running, thread()[0], "incident_diagnose")).status_code == 200
        report = await eventually(
            lambda: next((text_of(m) for m in thread()[1:] if "Diagnostics" in m.text), None),
            what="the diagnostics",
            timeout=30,
        )
        assert "Likely cause: Runner pods cannot be scheduled" in report, report
        assert "12 runner pods Pending" in report and "no node fits (unschedulable)" in report
        assert "raising maxRunners will not help" in report
        assert "OOMKilled 3 times in 30 min" in report, report
        assert "the kubelet's cAdvisor is not scraped" in report, "the missing source, once"
        assert report.count("cAdvisor is not scraped") == 1
        for surface in (report, text_of(thread()[0])):
            assert "raise the maximum" not in surface, surface
