"""The runner pods' default queries against a real `prometheus` scraping kube-state-metrics' and
cAdvisor's series (`sandbox.runner_pods`) beside ARC's listeners: each reading per runner type,
named as the listener's series are; and a source nobody scrapes read as not known, not as none."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.backends.metrics.prometheus_pods import runner_pods
from bot.config import Settings
from bot.domain.fleet import FleetSnapshot
from bot.domain.runner_pods import CADVISOR, KSM, NodeTrouble, RunnerPods
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcFleet
from tests.support.running import eventually


@pytest.fixture(scope="module")
def pods_fleet() -> Iterator[ArcFleet]:
    fleet = ArcFleet(pods=("ksm", "cadvisor"))
    fleet.pods.set(
        fleet.queueing.name,
        running=3,
        unschedulable=2,
        image_pull=1,
        creating=1,
        oom_killed=2,
        throttled=0.5,
        memory_of_limit=0.95,
        node_condition="DiskPressure",
        pending_since=time.time() - 600,
    )
    fleet.pods.set(fleet.healthy.name, running=2)
    try:
        yield fleet
    finally:
        fleet.stop()


async def read(url: str) -> FleetSnapshot:
    metrics = PrometheusMetrics(Settings(prometheus_url=url, prometheus_rate_window="3s"))
    try:
        return await metrics.read(now=datetime.now(UTC))
    finally:
        await metrics.aclose()


async def test_every_reading_of_the_runner_pods_per_runner_type(pods_fleet: ArcFleet) -> None:
    async def throttled() -> FleetSnapshot | None:
        snap = await read(pods_fleet.prometheus.url)
        pods = snap.runner_types.get(QUEUEING, None)
        ready = pods is not None and pods.pods is not None and pods.pods.cpu_throttled
        return snap if ready else None

    snap = await eventually(throttled, what="two scrapes of the throttling counters", timeout=30)
    pods, healthy = snap.runner_types[QUEUEING].pods, snap.runner_types[HEALTHY].pods
    assert pods is not None and healthy is not None
    assert (pods.pods_pending, pods.unschedulable, pods.image_pull) == (4, 2, 1)
    assert (pods.config_error, pods.creating, pods.oom_kills, pods.restarts) == (0, 1, 2, 0)
    assert pods.pending_mins == pytest.approx(10, abs=0.5)
    assert pods.cpu_throttled == pytest.approx(0.5, abs=0.05)
    assert pods.memory_of_limit == pytest.approx(0.95)
    # The queueing set's node (second in name order) holds every pod placed: 3 running, 1
    # pulling its image, 1 creating, 2 killed; the unschedulable ones are on no node.
    node = "ip-10-0-1-17.ec2.internal"
    assert pods.nodes == (NodeTrouble(node=node, condition="DiskPressure", pods=7),)
    assert pods.unknown == ""
    assert (healthy.pods_pending, healthy.oom_kills, healthy.nodes) == (0, 0, ())
    assert healthy.pending_mins is None and healthy.cpu_throttled == pytest.approx(0)


def test_a_source_not_scraped_is_not_known_and_a_series_with_none_is_zero() -> None:
    answers = {
        "unschedulable": [({"name": "linux-2xlarge-x7q2k"}, 4.0)],
        "oom_kills": [],
        "cpu_throttled": [],
    }
    probed = {"unschedulable": True, "oom_kills": True, "cpu_throttled": False}
    found, none = runner_pods(answers, probed, lambda labels: labels["name"][:-6])
    unknown = f"CPU throttling not known ({CADVISOR} is not scraped)"
    assert found == {"linux-2xlarge": RunnerPods(unschedulable=4, oom_kills=0, unknown=unknown)}
    assert none == RunnerPods(unschedulable=0, oom_kills=0, unknown=unknown)
    _, missing = runner_pods({"oom_kills": []}, {"oom_kills": False}, str)
    assert missing.oom_kills is None
    assert missing.unknown == f"OOM kills not known ({KSM} is not scraped)"
