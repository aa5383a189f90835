"""The runner pods of ARC scale sets and their nodes as a cluster's Prometheus scrapes them:
kube-state-metrics v2 (`docs/metrics/workload/pod-metrics.md`, `docs/metrics/cluster/
node-metrics.md`) and the kubelet's cAdvisor, with their documented names and labels, driven by a
scenario's knobs (pods Pending for no node, image pulls failing, OOM kills, throttling, a node
under pressure). One `/metrics` serves both sources; each can be left out (`scraped`), as on a
cluster that does not scrape it.

ARC names a runner pod after its EphemeralRunner, `<EphemeralRunnerSet>-runner-<5 chars>`, and the
EphemeralRunner owns it (`controllers/actions.github.com/resourcebuilder.go`).
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
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
Add = Callable[[str, dict[str, str], float], None]  # a sample of a family


@dataclass
class PodScenario:
    """One scale set's pods: what runs, what cannot start, what was killed, how hard it works."""

    running: int = 0
    unschedulable: int = 0  # Pending: no node fits
    image_pull: int = 0  # Pending: ImagePullBackOff
    creating: int = 0  # Pending: ContainerCreating (since `pending_since`)
    oom_killed: int = 0  # Failed within the window: the runner container OOMKilled
    # Those pods' names, where a scenario gives them (the jobs that ran on them name them).
    oom_names: tuple[str, ...] = ()
    throttled: float = 0.0  # share of CFS periods throttled, of each running runner
    memory_of_limit: float = 0.3  # working set over the memory limit, of each running runner
    node_condition: str = ""  # DiskPressure, MemoryPressure, PIDPressure or NotReady: its node's
    pending_since: float = field(default_factory=time.time)


class RunnerPodsExporter:
    def __init__(self, runner_sets: list[str], *, scraped: tuple[str, ...] = ("ksm", "cadvisor")):
        self.scenarios = {name: PodScenario() for name in runner_sets}
        self.scraped = scraped
        self.started = time.time()
        self.lock = threading.Lock()

    def set(self, runner_set: str, **knobs: object) -> None:
        with self.lock:
            scenario = self.scenarios[runner_set]
            for name, value in knobs.items():
                setattr(scenario, name, value)

    def exposition(self) -> str:
        families: dict[str, list[str]] = {}

        def add(family: str, labels: dict[str, str], value: float) -> None:
            pairs = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            families.setdefault(family, []).append(f"{family}{{{pairs}}} {value:.17g}")

        now = time.time()
        with self.lock:
            for index, (runner_set, s) in enumerate(sorted(self.scenarios.items())):
                node = f"ip-10-0-{index}-17.ec2.internal"
                self._node(add, node, s.node_condition)
                kinds = (
                    [("Running", "")] * s.running
                    + [("Pending", "unschedulable")] * s.unschedulable
                    + [("Pending", "ImagePullBackOff")] * s.image_pull
                    + [("Pending", "ContainerCreating")] * s.creating
                    + [("Failed", "OOMKilled")] * s.oom_killed
                )
                named = iter(s.oom_names)
                for n, (phase, why) in enumerate(kinds):
                    pod = f"{runner_set}-runner-{_suffix(f'{runner_set}/{n}')}"
                    pod = next(named, pod) if why == "OOMKilled" else pod
                    on = "" if phase == "Pending" and why == "unschedulable" else node
                    self._pod(add, (pod, f"{runner_set}/{n}"), phase, why, on, s, now)
        if "ksm" not in self.scraped:
            families = {f: lines for f, lines in families.items() if not f.startswith("kube_")}
        if "cadvisor" not in self.scraped:
            families = {f: v for f, v in families.items() if not f.startswith("container_")}
        lines = []
        for family, samples in families.items():
            kind = "counter" if family.endswith("_total") else "gauge"
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
        uid = hashlib.sha256(seed.encode()).hexdigest()[:32]
        ids = {"namespace": NAMESPACE, "pod": pod, "uid": uid}
        runner = {**ids, "container": "runner"}
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
        for each in PHASES:
            add("kube_pod_status_phase", {**ids, "phase": each}, int(each == phase))
        if why == "unschedulable":
            add("kube_pod_status_unschedulable", ids, 1)
        if why in ("ImagePullBackOff", "ContainerCreating"):
            add("kube_pod_container_status_waiting_reason", {**runner, "reason": why}, 1)
        if why == "OOMKilled":
            add("kube_pod_container_status_terminated_reason", {**runner, "reason": why}, 1)
        add("kube_pod_container_status_restarts_total", runner, 0)
        limit = {**runner, "node": node, "resource": "memory", "unit": "byte"}
        add("kube_pod_container_resource_limits", limit, MEMORY_LIMIT)
        if phase != "Running":
            return
        # cAdvisor's labels as the kubelet serves them, less `id` and `image`'s detail.
        cadvisor = {"container": "runner", "namespace": NAMESPACE, "pod": pod,
                    "name": uid[:12], "image": "ghcr.io/actions/actions-runner:latest"}  # fmt: skip
        periods = (now - self.started) * PERIODS_PER_S
        # Unrounded, so any two scrapes give the scenario's share exactly (the kubelet's are
        # whole periods, which over a test's seconds would move the share by a period or two).
        add("container_cpu_cfs_periods_total", cadvisor, periods)
        add("container_cpu_cfs_throttled_periods_total", cadvisor, periods * s.throttled)
        working = MEMORY_LIMIT * s.memory_of_limit
        add("container_memory_working_set_bytes", cadvisor, working)

    @property
    def app(self) -> Starlette:
        async def metrics(request: Request) -> PlainTextResponse:
            return PlainTextResponse(
                self.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8"
            )

        return Starlette(routes=[Route("/metrics", metrics)])


def _suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])
