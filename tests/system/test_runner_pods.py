"""Why runners do not come up, end to end: a real Prometheus scrapes ARC's listeners and the
runner pods' series in kube-state-metrics' and cAdvisor's shapes (`sandbox.runner_pods`); the
served bot's diagnostics, read back from Slack, name the pods that cannot be scheduled and the
jobs OOMKilled, never advise raising the maximum while pods cannot be scheduled, and say once
what a source not scraped would tell."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes.arc_exporter import ArcFleet
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import Slack, diagnosed, shown

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
        thread = await slack.first_thread()
        # The reading that judged the pods: the root's advice is none while pods cannot start.
        await eventually(
            lambda: "none until pods start" in shown(thread()[0]),
            what="the root's advice held while pods cannot start",
            timeout=LIVE_S,
        )
        report = await diagnosed(running, slack, thread()[0].ts)
        assert "Likely cause: Runner pods cannot be scheduled" in report, report
        assert "12 runner pods Pending" in report and "no node fits (unschedulable)" in report
        assert "raising maxRunners will not help" in report
        assert "OOMKilled 3 times in 30 min" in report, report
        assert "the kubelet's cAdvisor is not scraped" in report, "the missing source, once"
        assert report.count("cAdvisor is not scraped") == 1
        for surface in (report, shown(thread()[0])):
            assert "raise the maximum" not in surface, surface
