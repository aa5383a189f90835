"""The runner pods' stand-in serves what kube-state-metrics and cAdvisor serve: each family with
the label names kube-state-metrics' `docs/metrics/workload/pod-metrics.md` and
`docs/metrics/cluster/node-metrics.md` list, and pod names as Kubernetes makes them from ARC's
`GenerateName`s, so the default queries are tested against the shape a real cluster shows."""

from __future__ import annotations

import re
import time

from sandbox.runner_pods import NAMESPACE, RunnerPodsExporter

POD = {"namespace", "pod", "uid"}
CONTAINER = POD | {"container"}
LIMITS = CONTAINER | {"node", "resource", "unit"}
DOCUMENTED = {
    "kube_pod_owner": POD | {"owner_kind", "owner_name", "owner_is_controller"},
    "kube_pod_info": POD
    | {"node", "created_by_kind", "created_by_name", "host_ip", "pod_ip", "priority_class"}
    | {"host_network"},
    "kube_pod_created": POD,
    "kube_pod_status_scheduled_time": POD,
    "kube_pod_status_phase": POD | {"phase"},
    "kube_pod_status_unschedulable": POD,
    "kube_pod_container_status_waiting_reason": CONTAINER | {"reason"},
    "kube_pod_init_container_status_waiting_reason": CONTAINER | {"reason"},
    "kube_pod_container_status_terminated_reason": CONTAINER | {"reason"},
    "kube_pod_init_container_status_terminated_reason": CONTAINER | {"reason"},
    "kube_pod_container_status_restarts_total": CONTAINER,
    "kube_pod_init_container_status_restarts_total": CONTAINER,
    "kube_pod_container_resource_limits": LIMITS,
    "kube_pod_init_container_resource_limits": LIMITS,
    "kube_pod_init_container_info": CONTAINER
    | {"image", "image_id", "image_spec", "container_id", "restart_policy"},
    "kube_node_status_condition": {"node", "condition", "status"},
    # cAdvisor's, as the kubelet serves them (less `id`)
    "container_cpu_cfs_periods_total": {"container", "namespace", "pod", "name", "image"},
    "container_cpu_cfs_throttled_periods_total": {"container", "namespace", "pod", "name", "image"},
    "container_memory_working_set_bytes": {"container", "namespace", "pod", "name", "image"},
}
LONG = "ubuntu-2404-arm64-16-cores-64gb-nvidia-a10g-x"  # 45: the chart's longest scale set
SAMPLE = re.compile(r"^(\w+)\{(.*)\} \S+( \d+)?$")  # a value, and cAdvisor's timestamp


def samples(exporter: RunnerPodsExporter) -> list[tuple[str, dict[str, str]]]:
    found = []
    for line in exporter.exposition().splitlines():
        if line and not line.startswith("#"):
            matched = SAMPLE.match(line)
            assert matched, line
            pairs = re.findall(r'(\w+)="([^"]*)"', matched[2])
            found.append((matched[1], dict(pairs)))
    return found


def dind_fleet() -> RunnerPodsExporter:
    pods = RunnerPodsExporter(["dind-b2c4d", f"{LONG}-k9wxz"])
    pods.set(
        "dind-b2c4d", dind=True, running=1, image_pull=1, creating=1, oom_killed=1,
        oom_seen_s=None, unschedulable=1, pending_since=time.time() - 600, scheduled_after=60,
    )  # fmt: skip
    pods.set(f"{LONG}-k9wxz", running=1)
    return pods


def test_every_family_has_the_documented_labels() -> None:
    found = samples(dind_fleet())
    assert {family for family, _ in found} == set(DOCUMENTED)
    for family, labels in found:
        assert set(labels) == DOCUMENTED[family], family


def test_a_dind_pod_shows_its_init_containers_as_kube_state_metrics_does() -> None:
    found = samples(dind_fleet())
    waiting = {
        (family.startswith("kube_pod_init_"), labels["container"], labels["reason"])
        for family, labels in found
        if family.endswith("_waiting_reason") and labels["pod"].startswith("dind-")
    }
    # A bad runner image fails in init-dind-externals (Init:ImagePullBackOff); the rest wait.
    assert (True, "init-dind-externals", "ImagePullBackOff") in waiting
    assert (False, "runner", "PodInitializing") in waiting
    assert not any(reason == "ContainerCreating" for _, _, reason in waiting)
    sidecar = [
        labels["restart_policy"]
        for family, labels in found
        if family == "kube_pod_init_container_info" and labels["container"] == "dind"
    ]
    assert sidecar and set(sidecar) == {"Always"}
    throttled = {labels["container"] for family, labels in found if "cfs" in family}
    assert throttled == {"runner", "dind"}


def test_only_pods_on_a_node_have_a_scheduled_time() -> None:
    found = samples(dind_fleet())
    on_node = {  # the runner pods: node-exporter's own pods are placed too
        labels["pod"]
        for family, labels in found
        if family == "kube_pod_info" and labels["node"] and labels["namespace"] == NAMESPACE
    }
    scheduled = {
        labels["pod"] for family, labels in found if family == "kube_pod_status_scheduled_time"
    }
    unschedulable = {
        labels["pod"] for family, labels in found if family == "kube_pod_status_unschedulable"
    }
    assert scheduled == on_node and unschedulable and not unschedulable & scheduled


def test_a_long_runner_set_gives_names_cut_as_kubernetes_cuts_them() -> None:
    pods = {labels["pod"] for family, labels in samples(dind_fleet()) if family == "kube_pod_owner"}
    assert all(len(pod) <= 63 for pod in pods)
    long = [pod for pod in pods if pod.startswith(LONG)]
    # `<runner set>-runner-` is 59 characters: cut to 58, then 5 characters.
    assert long and all(re.fullmatch(rf"{LONG}-k9wxz-runner[a-z0-9]{{5}}", pod) for pod in long)
