"""The runner pods' default queries against a real `prometheus` scraping kube-state-metrics',
cAdvisor's and node-exporter's series (`sandbox.runner_pods`) beside ARC's listeners: each reading
per runner type, named as the listener's series are; and a source nobody scrapes read as not
known, not as none."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.backends.metrics.prometheus_pods import runner_pods
from bot.backends.metrics.promql import RUNNER_POD
from bot.config import Settings
from bot.domain.reading.causes import pod_causes
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.domain.reading.runner_pods import (
    CADVISOR,
    DISK,
    DISK_BUSY,
    KSM,
    NODE_EXPORTER,
    NodeTrouble,
    RunnerPods,
    Trouble,
)
from sandbox.runner_pods import PodScenario, RunnerPodsExporter, generated
from sandbox.serve import serve_in_thread
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcFleet
from tests.support.running import eventually
from tests.support.servers import Prometheus

OTHER = "other-team-bbbbb"
# A scale set of the chart's longest name (45 characters): its runner set, with ARC 0.14's
# `-<5 chars>`, is 51, and Kubernetes cuts its runner pods' `<runner set>-runner-` to 58.
LONG = "ubuntu-2404-arm64-16-cores-64gb-nvidia-a10g-x"


@pytest.fixture(scope="module")
def pods_fleet() -> Iterator[ArcFleet]:
    fleet = ArcFleet(pods=("ksm", "cadvisor", "node"))
    fleet.pods.set(
        fleet.queueing.name,
        running=3,
        unschedulable=2,
        image_pull=1,
        creating=1,
        oom_killed=2,
        # Kept served, so a scrape catches them: ARC deletes a killed pod within seconds.
        oom_seen_s=None,
        throttled=0.5,
        memory_of_limit=0.95,
        node_condition="DiskPressure",
        disk_busy=0.96,
        pending_since=time.time() - 600,
    )
    # Its node's disk idle, though a loop device on it is busy all the time.
    fleet.pods.set(fleet.healthy.name, running=2, disk_busy=0.2)
    # Another team's scale set in the same cluster: no listener of this fleet serves it.
    fleet.pods.scenarios[OTHER] = PodScenario(running=1, unschedulable=1)
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
        return snap if ready and len(pods.pods.nodes) == 2 else None

    snap = await eventually(throttled, what="two scrapes of the counters", timeout=30)
    pods, healthy = snap.runner_types[QUEUEING].pods, snap.runner_types[HEALTHY].pods
    assert pods is not None and healthy is not None
    assert (pods.pods_pending, pods.unschedulable, pods.image_pull) == (4, 2, 1)
    assert (pods.config_error, pods.creating, pods.oom_kills, pods.restarts) == (0, 1, 2, 0)
    assert pods.pending_mins == pytest.approx(10, abs=0.5)
    # Each kill by its pod's name (the job's runner_name) and uid.
    runner = f"{pods_fleet.queueing.name}-runner-"
    assert len(pods.oom_pods) == 2
    assert all(name.startswith(runner) and uid for name, uid in pods.oom_pods)
    assert pods.cpu_throttled == pytest.approx(0.5, abs=0.05)
    assert pods.memory_of_limit == pytest.approx(0.95)
    # The queueing set's node (second in name order) holds every pod placed: 3 running, 1
    # pulling its image, 1 creating, 2 killed; the unschedulable ones are on no node.
    node = "ip-10-0-1-17.ec2.internal"
    busy, pressure = pods.nodes
    # Busy 96% of the time, read as busy (`DISK_BUSY`, 90%, or more: a node under it is not
    # named). node-exporter serves no timestamps, and a rate over a 3 s window of scrapes a
    # loaded machine delays reads a few points low (0.91 seen); an idle one would read far below.
    assert DISK_BUSY <= busy.busy <= 1.0
    assert (busy.node, busy.condition, busy.pods) == (node, DISK, 7)
    assert pressure == NodeTrouble(node=node, condition="DiskPressure", pods=7)
    assert pods.unknown == ""
    assert (healthy.pods_pending, healthy.oom_kills, healthy.nodes) == (0, 0, ())
    assert healthy.pending_mins is None and healthy.cpu_throttled == pytest.approx(0)
    assert set(snap.runner_types) == {QUEUEING, HEALTHY}  # no type from pods alone


def test_a_source_not_scraped_is_not_known_and_a_series_with_none_is_zero() -> None:
    answers = {
        "unschedulable": [({"name": "linux-2xlarge-x7q2k"}, 4.0)],
        "oom_kills": [],
        "cpu_throttled_periods": [],
        "cpu_periods": [],
    }
    probed = {
        "unschedulable": "",
        "oom_kills": "",
        "cpu_throttled_periods": CADVISOR,
        "cpu_periods": CADVISOR,
    }
    found, none = runner_pods(answers, probed, lambda labels: labels["name"][:-6])
    unknown = f"CPU throttling not known ({CADVISOR} is not scraped)"
    assert found == {"linux-2xlarge": RunnerPods(unschedulable=4, oom_kills=0, unknown=unknown)}
    assert none == RunnerPods(unschedulable=0, oom_kills=0, unknown=unknown)
    _, missing = runner_pods({"oom_kills": []}, {"oom_kills": KSM}, str)
    assert missing.oom_kills is None
    assert missing.unknown == f"OOM kills not known ({KSM} is not scraped)"


@pytest.fixture(scope="module")
def two_ksm() -> Iterator[Prometheus]:
    """kube-state-metrics as two replicas (HA, or its own rolling update), each a target: every
    series twice, differing only in `instance`; cAdvisor once. One set stuck 10 min; one whose
    pods wait 2 min for the node a cluster autoscaler is adding; one in ARC's dind mode; one
    whose pods waited 4 min for a node, then 2 min creating; one of the longest scale set."""
    now = time.time()
    pods = RunnerPodsExporter(
        ["stuck-x7q2k", "scaling-d4zt9", "dind-b2c4d", "late-h5j6k", f"{LONG}-k9wxz"]
    )
    pods.set(
        "stuck-x7q2k", running=1, unschedulable=3, image_pull=2, creating=1,
        pending_since=now - 600,
    )  # fmt: skip
    pods.set("scaling-d4zt9", unschedulable=4, image_pull=1, pending_since=now - 120)
    # The runner throttled 10% of periods, its docker builds' dind 50% and at 95% of its memory.
    pods.set(
        "dind-b2c4d", dind=True, running=2, image_pull=2, creating=1, throttled=0.1,
        dind_throttled=0.5, dind_memory_of_limit=0.95, pending_since=now - 600,
        scheduled_after=60,
    )  # fmt: skip
    pods.set("late-h5j6k", creating=2, pending_since=now - 360, scheduled_after=240)
    pods.set(f"{LONG}-k9wxz", running=1, unschedulable=1, pending_since=now - 600)
    with scraping(pods.app_of(("ksm",)), pods.app_of(("ksm",)), pods.app_of(("cadvisor",))) as prom:
        yield prom


async def read_pods(prometheus: Prometheus) -> dict[str, RunnerPods]:
    """The readings once both replicas and cAdvisor's two scrapes are in."""
    metrics = PrometheusMetrics(Settings(prometheus_url=prometheus.url))
    try:

        async def scraped() -> dict[str, RunnerPods] | None:
            found, _, refused = await metrics.runner_pods(now=datetime.now(UTC))
            assert refused == {}
            stuck, dind = found.get("stuck"), found.get("dind")
            ready = stuck and stuck.pods_pending and dind and dind.cpu_throttled
            return found if ready else None

        return await eventually(scraped, what="both replicas and cAdvisor scraped", timeout=30)
    finally:
        await metrics.aclose()


async def test_two_kube_state_metrics_replicas_count_each_pod_once(two_ksm: Prometheus) -> None:
    found = await read_pods(two_ksm)
    stuck, scaling = found["stuck"], found["scaling"]
    assert (stuck.pods_pending, stuck.unschedulable, stuck.image_pull, stuck.creating) == (
        6, 3, 2, 1
    )  # fmt: skip
    assert stuck.unschedulable_mins == pytest.approx(10, abs=0.5)
    assert stuck.pending_mins == pytest.approx(10, abs=0.5)
    # Waiting for a node or an image under the boot time is a scale-up, not a pod stuck.
    assert (scaling.pods_pending, scaling.unschedulable, scaling.image_pull) == (5, 0, 0)
    assert scaling.cannot_start == 0
    # No node fits them yet, however young: a higher maximum would add pods that wait with them.
    assert (scaling.no_node, stuck.no_node) == (4, 3)


async def test_dind_runner_pods_read_their_init_containers_and_the_dind_container(
    two_ksm: Prometheus,
) -> None:
    """ARC's dind mode: a bad runner image fails in `init-dind-externals` (Init:ImagePullBackOff),
    a pod stuck creating says PodInitializing, and docker builds run in `dind`."""
    dind = (await read_pods(two_ksm))["dind"]
    assert (dind.pods_pending, dind.image_pull, dind.creating) == (3, 2, 1)
    assert dind.cannot_start == 3
    # Both containers' periods: (10% + 50%) of equal periods, over two pods.
    assert dind.cpu_throttled == pytest.approx(0.3, abs=0.02)
    assert dind.memory_of_limit == pytest.approx(0.95)


async def test_creating_is_timed_from_when_the_pod_got_its_node(two_ksm: Prometheus) -> None:
    late = (await read_pods(two_ksm))["late"]
    # Created 6 min ago, but 4 of them waiting for a node: 2 min creating is not stuck.
    assert (late.pods_pending, late.creating, late.cannot_start) == (2, 0, 0)


async def test_the_longest_scale_set_name_is_read_and_no_other_type_appears(
    two_ksm: Prometheus,
) -> None:
    found = await read_pods(two_ksm)
    assert (found[LONG].pods_pending, found[LONG].unschedulable) == (1, 1)
    # cAdvisor's series carry a `name` of their own: it never becomes a runner type.
    assert set(found) == {"stuck", "scaling", "dind", "late", LONG}


@pytest.mark.parametrize("length", range(1, 58))
def test_every_runner_pod_name_arc_makes_gives_its_runner_set(length: int) -> None:
    runner_set = ("a1-" * 20)[: length - 1] + "z"
    pod = generated(f"{runner_set}-runner-", runner_set)
    assert len(pod) <= 63
    found = re.fullmatch(RUNNER_POD, pod)
    assert found is not None and "".join(g or "" for g in found.groups()) == runner_set


@pytest.mark.parametrize(
    "pod",
    [
        "arc-gha-rs-controller-7d9f8b6c5-x7q2k",  # a Deployment's pod
        "linux-2xlarge-x7q2k-runner-b2c4d-workflow",  # the kubernetes mode's job pod
        "linux-2xlarge-x7q2k-listener",
        "runner-b2c4d",
    ],
)
def test_a_pod_name_arc_does_not_make_gives_no_runner_set(pod: str) -> None:
    assert re.fullmatch(RUNNER_POD, pod) is None


def test_runner_sets_of_one_type_add_up_their_throttling_exactly() -> None:
    def two(a: float, b: float) -> list[tuple[dict[str, str], float]]:
        return [({"name": "a-x7q2k"}, a), ({"name": "a-d4zt9"}, b)]

    # A set throttled all of its 1 period per second beside one throttled in none of its 9.
    answers = {"cpu_throttled_periods": two(1, 0), "cpu_periods": two(1, 9)}
    found, none = runner_pods(answers, {}, lambda labels: labels["name"][:-6])
    assert found["a"].cpu_throttled == pytest.approx(0.1)
    assert none.cpu_throttled == 0


def test_runner_sets_of_one_type_add_up() -> None:
    def two(a: float, b: float) -> list[tuple[dict[str, str], float]]:
        return [({"name": "a-x7q2k"}, a), ({"name": "a-d4zt9"}, b)]

    answers = {
        "unschedulable": two(2, 3),
        "unschedulable_mins": two(9, 6),
        "memory_of_limit": two(0.5, 0.95),
        "nodes": [
            ({"name": "a-x7q2k", "node": "n1", "condition": "DiskPressure"}, 2.0),
            ({"name": "a-d4zt9", "node": "n1", "condition": "DiskPressure"}, 3.0),
        ],
    }
    found, _ = runner_pods(answers, {}, lambda labels: labels["name"][:-6])
    pods = found["a"]
    assert (pods.unschedulable, pods.unschedulable_mins, pods.memory_of_limit) == (5, 9, 0.95)
    assert pods.nodes == (NodeTrouble(node="n1", condition="DiskPressure", pods=5),)


async def test_cadvisor_without_kube_state_metrics_leaves_its_readings_not_known() -> None:
    """Every default query keeps the pods kube-state-metrics names as runner pods (and memory
    needs its limits): cAdvisor alone tells nothing, which is not "no throttling"."""
    fleet = ArcFleet(pods=("cadvisor",))
    fleet.pods.set(fleet.queueing.name, running=2, throttled=0.5)
    try:

        async def scraped() -> FleetSnapshot | None:
            # The listeners and cAdvisor are scraped apart: read once both are in.
            async with httpx.AsyncClient(timeout=5) as client:
                answer = await client.get(
                    f"{fleet.prometheus.url}/api/v1/query",
                    params={"query": "count(container_cpu_cfs_periods_total)"},
                )
            if not answer.json()["data"]["result"]:
                return None
            snap = await read(fleet.prometheus.url)
            return snap if QUEUEING in snap.runner_types else None

        snap = await eventually(scraped, what="the listeners and cAdvisor scraped", timeout=30)
    finally:
        fleet.stop()
    pods = snap.runner_types[QUEUEING].pods
    assert pods is not None
    assert pods.cpu_throttled is None and pods.memory_of_limit is None
    every = "pods Pending, image pulls, OOM kills, node conditions, CPU throttling, memory"
    assert pods.unknown == (
        f"{every} against its limit not known ({KSM} is not scraped); disk I/O saturation, OOM "
        f"kills on the nodes not known ({NODE_EXPORTER} is not scraped)"
    )


@contextmanager
def scraping(*apps: Starlette) -> Iterator[Prometheus]:
    """A real Prometheus scraping each of `apps` as a target of its own."""
    servers = [serve_in_thread(app) for app in apps]
    prometheus = Prometheus(targets=[server.url.split("//", 1)[1] for server in servers])
    try:
        prometheus.start()
        yield prometheus
    finally:
        prometheus.stop()
        for server in servers:
            server.stop()


@pytest.fixture
def changing() -> Iterator[tuple[RunnerPodsExporter, Prometheus]]:
    pods = RunnerPodsExporter(["cached-x7q2k"], scraped=("ksm", "node"))
    pods.set("cached-x7q2k", running=1)
    with scraping(pods.app) as prometheus:
        yield pods, prometheus


async def test_the_sources_found_are_not_probed_again_for_minutes_but_check_probes_fresh(
    changing: tuple[RunnerPodsExporter, Prometheus],
) -> None:
    """The probe scans every series of each name: a source found is taken as scraped for
    minutes, a source missing is asked again each reading (so one scraped later is seen at
    once), and `fresh` (what `queuepilot check` asks) probes everything."""
    pods, prometheus = changing
    no_cadvisor = f"CPU throttling, memory against its limit not known ({CADVISOR} is not scraped)"
    no_disks = (
        f"disk I/O saturation, OOM kills on the nodes not known ({NODE_EXPORTER} is not scraped)"
    )
    cached = PrometheusMetrics(Settings(prometheus_url=prometheus.url))
    other = PrometheusMetrics(Settings(prometheus_url=prometheus.url))

    async def unknown(metrics: PrometheusMetrics, *, fresh: bool = False) -> str:
        _, unseen, _ = await metrics.runner_pods(now=datetime.now(UTC), fresh=fresh)
        assert unseen is not None
        return unseen.unknown

    async def said(metrics: PrometheusMetrics, wanted: str) -> bool:
        return await unknown(metrics, fresh=True) == wanted

    try:
        await eventually(lambda: said(cached, no_cadvisor), what="scraped but cAdvisor", timeout=30)
        # node-exporter goes (a node-exporter uninstalled), cAdvisor comes.
        pods.scraped = ("ksm", "cadvisor")
        await eventually(lambda: said(other, no_disks), what="the change scraped", timeout=30)
        # Within minutes of finding it, node-exporter is still taken as scraped; cAdvisor, not
        # found before, was asked again and is seen.
        assert await unknown(cached) == ""
        assert await unknown(cached, fresh=True) == no_disks
        assert await unknown(cached) == no_disks  # the fresh probe is kept
    finally:
        await cached.aclose()
        await other.aclose()


def test_a_node_counts_its_oom_kills_once_per_runner_type_however_many_sets_ran_there() -> None:
    answers = {
        "node_oom_kills": [
            ({"name": "a-x7q2k", "node": "n1"}, 7.0),
            ({"name": "a-d4zt9", "node": "n1"}, 7.0),
            ({"name": "a-d4zt9", "node": "n2"}, 2.0),
            ({"name": "b-b2c4d", "node": "n1"}, 7.0),  # another type on n1: counts for both
        ],
    }
    found, none = runner_pods(answers, {}, lambda labels: labels["name"][:-6])
    assert (found["a"].node_oom_kills, found["b"].node_oom_kills) == (9, 7)
    assert none.node_oom_kills == 0


@pytest.fixture
def counters() -> Iterator[tuple[RunnerPodsExporter, Prometheus]]:
    """Runner sets whose counters move while a real Prometheus scrapes them: a set whose jobs
    get OOMKilled, a set in ARC's dind mode whose sidecar restarts, a set whose pods pull a
    large image on a new node for 7 min; kube-state-metrics and node-exporter scraped."""
    pods = RunnerPodsExporter(
        ["killed-x7q2k", "dind-d4zt9", "pulling-b2c4d"], scraped=("ksm", "node")
    )
    pods.set("killed-x7q2k", running=2)
    pods.set("dind-d4zt9", running=2, dind=True)
    pods.set("pulling-b2c4d", creating=1, pending_since=time.time() - 420)
    with scraping(pods.app) as prometheus:
        yield pods, prometheus


async def scraped_once(prometheus: Prometheus, *series: str) -> None:
    """Wait until Prometheus holds a sample of each of `series`: a counter's change is seen
    only against an earlier sample."""

    async def held() -> bool:
        async with httpx.AsyncClient(timeout=5) as client:
            for name in series:
                answer = await client.get(
                    f"{prometheus.url}/api/v1/query", params={"query": f"count({name})"}
                )
                if not answer.json()["data"]["result"]:
                    return False
        return True

    await eventually(held, what=f"{', '.join(series)} scraped", timeout=30)


async def pods_read(prometheus: Prometheus, **settings: Any) -> dict[str, RunnerPods]:
    metrics = PrometheusMetrics(Settings(prometheus_url=prometheus.url, **settings))
    try:
        found, _, refused = await metrics.runner_pods(now=datetime.now(UTC))
    finally:
        await metrics.aclose()
    assert refused == {}
    return found


async def test_oom_kills_arc_deleted_before_a_scrape_are_counted_on_their_nodes(
    counters: tuple[RunnerPodsExporter, Prometheus],
) -> None:
    """ARC deletes a killed runner's pod within seconds, so kube-state-metrics rarely shows the
    kill; node-exporter's count of the kernel's OOM kills on the pods' nodes keeps it."""
    pods, prometheus = counters
    await scraped_once(prometheus, "node_vmstat_oom_kill", "kube_pod_owner")
    pods.set("killed-x7q2k", oom_killed=7, oom_seen_s=0)

    async def counted() -> dict[str, RunnerPods] | None:
        found = await pods_read(prometheus)
        return found if "killed" in found and found["killed"].node_oom_kills else None

    found = await eventually(counted, what="the kills scraped", timeout=30)
    killed = found["killed"]
    # Exactly the kills, not the node's count since boot nor a young series' extrapolation.
    assert (killed.oom_kills, killed.node_oom_kills) == (0, 7)
    assert found["dind"].node_oom_kills == 0  # its own node: no kill there
    (cause,) = [c for c in pod_causes(M(pods=killed)) if c.trouble is Trouble.OOM_KILLED]
    assert cause.evidence.startswith("7 OOM kills in 30 min on the nodes these runners ran on")


async def test_restarts_add_up_every_container_of_a_pod_the_dind_sidecar_too(
    counters: tuple[RunnerPodsExporter, Prometheus],
) -> None:
    pods, prometheus = counters
    await scraped_once(prometheus, "kube_pod_init_container_status_restarts_total")
    # Each of its 2 pods: the runner container restarted once (a template's restartPolicy) and
    # the dind sidecar twice.
    pods.set("dind-d4zt9", restarts=1, dind_restarts=2)

    async def restarted() -> dict[str, RunnerPods] | None:
        found = await pods_read(prometheus)
        return found if "dind" in found and found["dind"].restarts else None

    found = await eventually(restarted, what="the restarts scraped", timeout=30)
    assert found["dind"].restarts == 6
    assert found["killed"].restarts == 0


async def test_a_pod_pulling_its_image_within_a_runner_boot_is_not_stuck_creating(
    counters: tuple[RunnerPodsExporter, Prometheus],
) -> None:
    """The kubelet says ContainerCreating while it pulls: a multi-GB image on a new node takes
    minutes, so the stuck-creating threshold is a runner's boot time where that is longer."""
    _, prometheus = counters
    await scraped_once(prometheus, "kube_pod_container_status_waiting_reason")

    async def creating(boot: float) -> float | None:
        found = await pods_read(prometheus, runner_boot_minutes=boot)
        return found["pulling"].creating if "pulling" in found else None

    assert await eventually(lambda: creating(5), what="a pod creating 7 min", timeout=30) == 1
    assert await creating(10) == 0
    pulling = (await pods_read(prometheus))["pulling"]
    (cause,) = pod_causes(M(pods=pulling))
    assert cause.advice.startswith("describe one of those pods: most often a large runner image")
