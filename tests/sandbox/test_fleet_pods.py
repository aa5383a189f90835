"""The simulated fleet's runner pods: a node group that fits fewer runners than the scale set
asks for leaves the new pods Pending, and the fleet answers the pods' queries as a Prometheus
scraping kube-state-metrics and cAdvisor would, so the bot's `prometheus` backend reads which
pods no node fits and diagnostics say raising maxRunners will not help."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.backends.metrics.promql import defaults
from bot.config import Settings
from bot.domain.reading.causes import pod_causes
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.domain.reading.runner_pods import Trouble
from sandbox.fleet import DEMO_TEAM_BURSTS, DEMO_TYPES, Burst, Fleet, RunnerTypeSpec
from sandbox.fleet_api import FleetApi, FleetApiConfig
from sandbox.stack import SCALE_SETS

GPU = "linux.g5.4xlarge.nvidia.gpu"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def to_minute(self, minute: float) -> None:
        self.now = minute * 60


def test_past_its_node_group_a_pod_stays_pending_and_never_registers() -> None:
    clock = Clock()
    spec = RunnerTypeSpec(
        "t", arrival_per_min=0, job_minutes=5, boot_minutes=1, minimum=0, maximum=6,
        node_capacity=3,
    )  # fmt: skip
    fleet = Fleet([spec], [Burst("t", 0, 1, 20)], speed=1, clock=clock)  # ~20 jobs
    clock.to_minute(4)
    read = fleet.reading()["t"]
    # Six asked for, three fit: three runners take jobs, three pods wait for a node.
    assert (read.desired, read.registered, read.busy, read.idle) == (6, 3, 3, 0)
    assert read.booting == 3 and len(read.unschedulable_ages_mins) == 3
    assert min(read.unschedulable_ages_mins) > spec.boot_minutes, "past a boot, still Pending"
    assert sorted(read.pending_ages_mins) == sorted(read.unschedulable_ages_mins)
    # Once the queue is gone the pods that never started go first; the runners as jobs end.
    clock.to_minute(60)
    drained = fleet.reading()["t"]
    assert (drained.queued, drained.registered, drained.booting) == (0, 0, 0)
    assert drained.pending_ages_mins == ()


def test_without_a_node_limit_every_runner_asked_for_boots() -> None:
    clock = Clock()
    spec = RunnerTypeSpec("t", arrival_per_min=0, job_minutes=5, boot_minutes=1, minimum=0,
                          maximum=6)  # fmt: skip
    fleet = Fleet([spec], [Burst("t", 0, 1, 20)], speed=1, clock=clock)
    clock.to_minute(0.5)
    booting = fleet.reading()["t"]
    assert booting.booting > 0 and booting.unschedulable_ages_mins == ()
    clock.to_minute(4)
    assert fleet.reading()["t"].registered == 6


@pytest.fixture
async def read_by_bot() -> AsyncIterator[tuple[Clock, FleetApi, PrometheusMetrics]]:
    """The demo's fleet with the GPU team's surge, read by the bot's `prometheus` backend."""
    clock = Clock()
    api = FleetApi(Fleet(DEMO_TYPES, DEMO_TEAM_BURSTS, speed=1, clock=clock), FleetApiConfig())
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleet") as http:
        config = Settings(
            prometheus_url="http://fleet",
            prometheus_rate_window=api.config.rate_window,
            runner_boot_minutes=api.config.boot_minutes,
            runner_scale_sets=SCALE_SETS,
            scaler_targets={spec.name: {} for spec in DEMO_TYPES},
        )
        yield clock, api, PrometheusMetrics(config, http)


async def test_the_bot_reads_the_gpu_pods_no_node_fits_and_is_told_not_to_raise_the_maximum(
    read_by_bot: tuple[Clock, FleetApi, PrometheusMetrics],
) -> None:
    clock, api, metrics = read_by_bot
    surge = DEMO_TEAM_BURSTS[0]
    clock.to_minute(surge.starts_min + 12)  # when the team's rule has fired
    snapshot = await metrics.read(now=datetime.now(UTC))
    assert snapshot.note == "", "every query answered, the pods' too"
    gpu = snapshot.runner_types[GPU]
    truth = api.served()[GPU]
    pods = gpu.pods
    assert pods is not None and pods.unknown == "", "kube-state-metrics and cAdvisor scraped"
    # The scale set asks for its maximum; the node group holds what registered.
    assert gpu.desired == gpu.maximum > gpu.registered == truth.registered
    assert pods.pods_pending == gpu.desired - gpu.registered
    assert pods.unschedulable == len(truth.unschedulable_ages_mins) > 0
    assert pods.unschedulable_mins == max(truth.unschedulable_ages_mins)
    assert pods.withholding == pods.unschedulable
    [cause] = pod_causes(M(pods=pods))
    assert cause.trouble is Trouble.UNSCHEDULABLE
    assert "no node fits" in cause.evidence and "raising maxRunners will not help" in cause.advice
    # The other types' pods all started: nothing Pending, nothing wrong.
    for name, other in snapshot.runner_types.items():
        if name != GPU:
            assert other.pods is not None and other.pods.pods_pending == 0, name
            assert pod_causes(M(pods=other.pods)) == (), name


async def test_a_young_unplaced_pod_is_not_yet_unschedulable_for_the_bot(
    read_by_bot: tuple[Clock, FleetApi, PrometheusMetrics],
) -> None:
    """The pods' query counts a pod as unschedulable once it waited longer than a new node
    takes to come up; the fleet answers as that query does."""
    clock, api, metrics = read_by_bot
    burst = DEMO_TEAM_BURSTS[0].starts_min
    clock.to_minute(burst)
    # The first minute past the burst in which a pod waits for a node, before it counts.
    minute = burst
    while not api.served()[GPU].unschedulable_ages_mins and minute < burst + 10:
        minute += 0.5
        clock.to_minute(minute)
    assert api.served()[GPU].unschedulable_ages_mins, "the surge leaves a pod no node fits"
    read = (await metrics.read(now=datetime.now(UTC))).runner_types[GPU].pods
    assert read is not None and read.pods_pending and read.unschedulable == 0
    assert pod_causes(M(pods=read)) == ()


async def test_every_pods_reading_is_answered_and_any_other_query_refused(
    read_by_bot: tuple[Clock, FleetApi, PrometheusMetrics],
) -> None:
    _, api, metrics = read_by_bot
    _, _, refused = await metrics.runner_pods(now=datetime.now(UTC))
    assert refused == {}
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleet") as http:
        # A reading the fleet never shows (an OOM kill) is answered with no series.
        queries = defaults(window=api.config.rate_window, boot_mins=api.config.boot_minutes)
        none = await http.get("/api/v1/query", params={"query": queries["oom_kills"]})
        assert none.json() == {"status": "success", "data": {"resultType": "vector", "result": []}}
        # The same reading at another window is no query the bot sends: refused as Prometheus
        # refuses what it cannot run, so a drift fails loudly.
        other = defaults(window="5m", boot_mins=api.config.boot_minutes)["cpu_periods"]
        refusal = await http.get("/api/v1/query", params={"query": other})
    assert refusal.status_code == 400 and refusal.json()["errorType"] == "bad_data"
