"""The runner pods of ARC scale sets and their nodes as a cluster's Prometheus scrapes them:
kube-state-metrics v2 (`docs/metrics/workload/pod-metrics.md`, `docs/metrics/cluster/
node-metrics.md`) and the kubelet's cAdvisor, with their documented names and labels, driven by a
scenario's knobs (pods Pending for no node, image pulls failing, OOM kills, throttling, a node
under pressure or its disk saturated). One `/metrics` serves the sources; each can be left out
(`scraped`), as on a cluster that does not scrape it, and `app_of` serves one alone (two
kube-state-metrics replicas, each a target, beside one cAdvisor).

node-exporter's series (`collector/diskstats_linux.go`, and `collector/vmstat_linux.go`'s
`node_vmstat_oom_kill`, in its default `--collector.vmstat.fields`) carry the labels
kube-prometheus-stack's ServiceMonitor gives its targets: the node-exporter pod's `namespace` and
`pod` (its `instance` is the pod's address, which the scraping Prometheus sets), so its node is
that pod's in kube-state-metrics' `kube_pod_info`.

ARC names a runner pod after its EphemeralRunner, `<EphemeralRunnerSet>-runner-<5 chars>`, and the
EphemeralRunner owns it (`controllers/actions.github.com/resourcebuilder.go`); Kubernetes cuts a
`GenerateName` to 58 characters before its 5 (apimachinery's `names.SimpleNameGenerator`). In dind
mode (ARC's chart, `containerMode.type: dind`, Kubernetes 1.29 and later) the pod has the init
containers `init-dind-externals` (the runner's image) and `dind` (restartPolicy Always, a sidecar)
before its `runner` container; the kubelet says PodInitializing of every container waiting while
init containers have not all started.

A runner container killed for memory ends its pod, and ARC deletes the pod (or its EphemeralRunner,
when a job was assigned) at once (`deleteEphemeralRunnerOrPod` in `controllers/actions.github.com/
ephemeralrunner_controller.go`): kube-state-metrics serves the killed pod's series only until then,
`oom_seen_s`, while the kernel's count of OOM kills on its node (`node_vmstat_oom_kill`) keeps it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

NAMESPACE = "arc-runners"
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
CONDITIONS = ("Ready", "DiskPressure", "MemoryPressure", "PIDPressure")
MEMORY_LIMIT = 8 * 2**30
PERIODS_PER_S = 10  # the CFS period is 100 ms
MONITORING = "monitoring"  # kube-prometheus-stack's namespace
NODE_EXPORTER_POD = "kube-prometheus-stack-prometheus-node-exporter-"
NODE_OOM_KILLS_BEFORE = 4  # each node's kernel OOM kills since it booted, before any scenario
# How long a killed runner pod's series are served: ARC deletes the pod within a reconcile of
# the kubelet reporting its runner container terminated, a second or two, while a
# kube-state-metrics scrape comes every 30 s or so.
OOM_SEEN_S = 2.0
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MAX_GENERATED_NAME = 58  # apimachinery: 63, less the 5 random characters
RUNNER_IMAGE = "ghcr.io/actions/actions-runner:latest"
Add = Callable[[str, dict[str, str], float], None]  # a sample of a family


@dataclass
class PodScenario:
    """One scale set's pods: what runs, what cannot start, what was killed, how hard it works."""

    running: int = 0
    unschedulable: int = 0  # Pending: no node fits
    image_pull: int = 0  # Pending: ImagePullBackOff
    creating: int = 0  # Pending: ContainerCreating (since `pending_since`)
    oom_killed: int = 0  # Failed within the window: the runner container OOMKilled
    killed_at: float = field(default_factory=time.time)  # when: `set(oom_killed=…)`'s time
    # How long the killed pods' series are served after that; None: as long as the scenario has
    # them (a test that must catch them, as a scrape sometimes does).
    oom_seen_s: float | None = OOM_SEEN_S
    # Those pods' names, where a scenario gives them (the jobs that ran on them name them).
    oom_names: tuple[str, ...] = ()
    throttled: float = 0.0  # share of CFS periods throttled, of each running runner
    memory_of_limit: float = 0.3  # working set over the memory limit, of each running runner
    node_condition: str = ""  # DiskPressure, MemoryPressure, PIDPressure or NotReady: its node's
    disk_busy: float = 0.0  # share of the time its node's disk is busy (node-exporter)
    pending_since: float = field(default_factory=time.time)  # the Pending pods' creation
    # Each pod's runner container restarts (the chart's restartPolicy Never has none; a template
    # may set another) and its dind sidecar's (restartPolicy Always), as their counters say now.
    restarts: int = 0
    dind_restarts: int = 0
    scheduled_after: float = 0.0  # seconds the Pending pods on a node waited for it
    # dind mode: the runner image's pull fails in `init-dind-externals`, and the `dind` sidecar
    # has CPU and memory limits of its own, throttled and filled so.
    dind: bool = False
    dind_throttled: float = 0.0
    dind_memory_of_limit: float = 0.3


class RunnerPodsExporter:
    def __init__(self, runner_sets: list[str], *, scraped: tuple[str, ...] = ("ksm", "cadvisor")):
        """`scraped`: of "ksm", "cadvisor" and "node" (node-exporter)."""
        self.scenarios = {name: PodScenario() for name in runner_sets}
        self.scraped = scraped
        self.started = time.time()
        self.lock = threading.Lock()

    def set(self, runner_set: str, **knobs: object) -> None:
        with self.lock:
            scenario = self.scenarios[runner_set]
            for name, value in knobs.items():
                setattr(scenario, name, value)
            if "oom_killed" in knobs:
                scenario.killed_at = time.time()

    def exposition(self, sources: tuple[str, ...] = ("ksm", "cadvisor", "node")) -> str:
        """`sources`: those of the scraped ones this target serves."""
        families: dict[str, list[str]] = {}

        def add(family: str, labels: dict[str, str], value: float) -> None:
            pairs = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            # The kubelet serves cAdvisor's samples with the time they were read, so a rate
            # over them is exact however late a loaded scrape reads them.
            stamp = f" {round(now * 1000)}" if family.startswith("container_") else ""
            families.setdefault(family, []).append(f"{family}{{{pairs}}} {value:.17g}{stamp}")

        now = time.time()
        with self.lock:
            for index, (runner_set, s) in enumerate(sorted(self.scenarios.items())):
                node = f"ip-10-0-{index}-17.ec2.internal"
                self._node(add, node, s.node_condition)
                self._node_exporter(add, node, s, now)
                kinds = (
                    [("Running", "")] * s.running
                    + [("Pending", "unschedulable")] * s.unschedulable
                    + [("Pending", "ImagePullBackOff")] * s.image_pull
                    + [("Pending", "ContainerCreating")] * s.creating
                    + [("Failed", "OOMKilled")] * s.oom_killed
                )
                named = iter(s.oom_names)
                gone = s.oom_seen_s is not None and now > s.killed_at + s.oom_seen_s
                for n, (phase, why) in enumerate(kinds):
                    if why == "OOMKilled" and gone:
                        continue  # ARC deleted it
                    pod = generated(f"{runner_set}-runner-", f"{runner_set}/{n}")
                    pod = next(named, pod) if why == "OOMKilled" else pod
                    on = "" if phase == "Pending" and why == "unschedulable" else node
                    self._pod(add, (pod, f"{runner_set}/{n}"), phase, why, on, s, now)
        if "ksm" not in self.scraped or "ksm" not in sources:
            families = {f: lines for f, lines in families.items() if not f.startswith("kube_")}
        if "cadvisor" not in self.scraped or "cadvisor" not in sources:
            families = {f: v for f, v in families.items() if not f.startswith("container_")}
        if "node" not in self.scraped or "node" not in sources:
            families = {f: v for f, v in families.items() if not f.startswith("node_")}
        lines = []
        for family, samples in families.items():
            kind = "counter" if family.endswith("_total") else "gauge"
            kind = "untyped" if family.startswith("node_vmstat_") else kind  # as node-exporter
            lines += [f"# TYPE {family} {kind}", *samples]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _node(add: Add, node: str, condition: str) -> None:
        for kind in CONDITIONS:
            bad = kind == condition or (kind == "Ready" and condition == "NotReady")
            holds = not bad if kind == "Ready" else bad
            for status in ("true", "false", "unknown"):
                value = 1 if status == ("true" if holds else "false") else 0
                labels = {"node": node, "condition": kind, "status": status}
                add("kube_node_status_condition", labels, value)

    def _node_exporter(self, add: Add, node: str, s: PodScenario, now: float) -> None:
        """The node's kernel OOM kills, the scenario's since `set` counted; its disk, busy
        `disk_busy` of the time, and a loop device always busy, which no reading of the disks
        may count."""
        pod = generated(NODE_EXPORTER_POD, node)
        # The node-exporter pod as kube-state-metrics lists it (a DaemonSet's, on this node).
        ids = {"namespace": MONITORING, "pod": pod, "uid": _uid(pod)}
        info = {"node": node, "created_by_kind": "DaemonSet", "host_network": "true",
                "created_by_name": NODE_EXPORTER_POD[:-1], "host_ip": "", "pod_ip": "",
                "priority_class": "system-node-critical"}  # fmt: skip
        add("kube_pod_info", {**ids, **info}, 1)
        target = {"namespace": MONITORING, "pod": pod, "container": "node-exporter",
                  "endpoint": "http-metrics", "service": NODE_EXPORTER_POD[:-1]}  # fmt: skip
        add("node_vmstat_oom_kill", target, NODE_OOM_KILLS_BEFORE + s.oom_killed)
        up = now - self.started
        # Unrounded seconds, so any two scrapes give the scenario's share.
        for device, share in (("nvme0n1", s.disk_busy), ("loop0", 1.0)):
            add("node_disk_io_time_seconds_total", {**target, "device": device}, up * share)

    def _pod(
        self,
        add: Add,
        named: tuple[str, str],
        phase: str,
        why: str,
        node: str,
        s: PodScenario,
        now: float,
    ) -> None:
        """`named`: the pod's name and what makes its uid, which tells apart two pods of one name
        (ARC recreates a failed runner's pod under its name)."""
        pod, seed = named
        uid = _uid(seed)
        ids = {"namespace": NAMESPACE, "pod": pod, "uid": uid}
        owner = {"owner_kind": "EphemeralRunner", "owner_name": pod, "owner_is_controller": "true"}
        add("kube_pod_owner", {**ids, **owner}, 1)
        info = {
            "node": node,
            "created_by_kind": "EphemeralRunner",
            "created_by_name": pod,
            "host_ip": "",
            "pod_ip": "",
            "priority_class": "",
            "host_network": "false",
        }
        add("kube_pod_info", {**ids, **info}, 1)
        created = s.pending_since if phase == "Pending" else self.started
        add("kube_pod_created", ids, round(created))
        if node:
            scheduled = created + (s.scheduled_after if phase == "Pending" else 0)
            add("kube_pod_status_scheduled_time", ids, round(scheduled))
        for each in PHASES:
            add("kube_pod_status_phase", {**ids, "phase": each}, int(each == phase))
        if why == "unschedulable":
            add("kube_pod_status_unschedulable", ids, 1)
        for container, waiting in self._waiting(why, s.dind).items():
            family = "kube_pod_container_status_waiting_reason"
            if container != "runner":
                family = "kube_pod_init_container_status_waiting_reason"
            add(family, {**ids, "container": container, "reason": waiting}, 1)
        runner = {**ids, "container": "runner"}
        if why == "OOMKilled":
            add("kube_pod_container_status_terminated_reason", {**runner, "reason": why}, 1)
        add("kube_pod_container_status_restarts_total", runner, s.restarts)
        limit = {"node": node, "resource": "memory", "unit": "byte"}
        add("kube_pod_container_resource_limits", {**runner, **limit}, MEMORY_LIMIT)
        if s.dind:
            for init, policy in (("init-dind-externals", ""), ("dind", "Always")):
                image = RUNNER_IMAGE if init == "init-dind-externals" else "docker:dind"
                labels = {**ids, "container": init, "image": image, "image_spec": image,
                          "image_id": "", "container_id": "", "restart_policy": policy}  # fmt: skip
                add("kube_pod_init_container_info", labels, 1)
            dind = {**ids, "container": "dind", **limit}
            add("kube_pod_init_container_resource_limits", dind, MEMORY_LIMIT)
            for init, restarted in (("init-dind-externals", 0), ("dind", s.dind_restarts)):
                labels = {**ids, "container": init}
                add("kube_pod_init_container_status_restarts_total", labels, restarted)
            if phase == "Running":  # the externals copied, the sidecar runs on
                done = {**ids, "container": "init-dind-externals", "reason": "Completed"}
                add("kube_pod_init_container_status_terminated_reason", done, 1)
        if phase != "Running":
            return
        self._cadvisor(add, pod, uid, "runner", s.throttled, s.memory_of_limit, now)
        if s.dind:
            self._cadvisor(add, pod, uid, "dind", s.dind_throttled, s.dind_memory_of_limit, now)

    @staticmethod
    def _waiting(why: str, dind: bool) -> dict[str, str]:
        """Container -> the reason it waits. With init containers, the kubelet says
        PodInitializing of each that waits for the sandbox or an earlier one; a bad runner image
        fails first in `init-dind-externals`, which runs it."""
        if why not in ("ImagePullBackOff", "ContainerCreating"):
            return {}
        if not dind:
            return {"runner": why}
        waiting = dict.fromkeys(("init-dind-externals", "dind", "runner"), "PodInitializing")
        if why == "ImagePullBackOff":
            waiting["init-dind-externals"] = why
        return waiting

    def _cadvisor(
        self, add: Add, pod: str, uid: str, container: str, throttled: float, memory: float,
        now: float,
    ) -> None:  # fmt: skip
        # cAdvisor's labels as the kubelet serves them, less `id` and `image`'s detail.
        image = RUNNER_IMAGE if container == "runner" else "docker:dind"
        labels = {"container": container, "namespace": NAMESPACE, "pod": pod,
                  "name": hashlib.sha256(f"{uid}/{container}".encode()).hexdigest()[:12],
                  "image": image}  # fmt: skip
        periods = (now - self.started) * PERIODS_PER_S
        # Unrounded, so any two scrapes give the scenario's share exactly (the kubelet's are
        # whole periods, which over a test's seconds would move the share by a period or two).
        add("container_cpu_cfs_periods_total", labels, periods)
        add("container_cpu_cfs_throttled_periods_total", labels, periods * throttled)
        add("container_memory_working_set_bytes", labels, MEMORY_LIMIT * memory)

    @property
    def app(self) -> Starlette:
        return self.app_of(("ksm", "cadvisor", "node"))

    def app_of(self, sources: tuple[str, ...]) -> Starlette:
        """A target serving only `sources`' series."""

        async def metrics(request: Request) -> PlainTextResponse:
            return PlainTextResponse(
                self.exposition(sources), media_type="text/plain; version=0.0.4; charset=utf-8"
            )

        return Starlette(routes=[Route("/metrics", metrics)])


def generated(base: str, seed: str) -> str:
    """A name from a `GenerateName` as Kubernetes makes it: cut to 58, then 5 characters."""
    digest = hashlib.sha256(seed.encode()).digest()
    return base[:MAX_GENERATED_NAME] + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _uid(pod: str) -> str:
    return hashlib.sha256(pod.encode()).hexdigest()[:32]
