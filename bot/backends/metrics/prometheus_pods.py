"""Runner pods and their nodes from Prometheus: kube-state-metrics v2 and the kubelet's cAdvisor,
which kube-prometheus-stack scrapes by default, so no new permission is needed.

ARC (gha-runner-scale-set) names a runner pod after its EphemeralRunner, whose name is
`<EphemeralRunnerSet>-runner-<5 chars>` (`GenerateName` in `controllers/actions.github.com/
resourcebuilder.go`), and the EphemeralRunner owns the pod. The default queries keep pods
`kube_pod_owner{owner_kind="EphemeralRunner"}` names (in the last window, as runner pods are
deleted once their job ends) and take the runner set from the pod's name into the runner-type
label, so the scale set is found as for ARC's listener metrics (its suffix stripped) without
`--metric-labels-allowlist` carrying ARC's `actions.github.com/scale-set-name` label.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from bot.domain.runner_pods import (
    CREATING_MINS,
    NEEDS,
    WINDOW_MINS,
    NodeTrouble,
    RunnerPods,
    unknown_said,
)

Vector = list[tuple[dict[str, str], float]]
RUNNER_POD = "(.+)-runner-[a-z0-9]+"
CONTAINER = "runner"  # the runner container in ARC's pod template
_BAD_NODE = (
    'max by (node, condition) (kube_node_status_condition{condition=~"DiskPressure|'
    'MemoryPressure|PIDPressure", status="true"} == 1) or label_replace(max by (node) '
    '(kube_node_status_condition{condition="Ready", status!="true"} == 1), "condition", '
    '"NotReady", "", "")'
)


def pod_queries(label: str = "name", window: str = "10m") -> dict[str, str]:
    """Reading of `RunnerPods` -> PromQL answering one series per runner set in `label` (`nodes`:
    one per runner set, node and condition, its value the set's pods on that node)."""
    counted = f"{WINDOW_MINS:.0f}m"

    def runners(expr: str) -> str:
        owned = (
            "max by (namespace, pod) (max_over_time("
            f'kube_pod_owner{{owner_kind="EphemeralRunner"}}[{counted}]))'
        )
        joined = f"({expr}) * on (namespace, pod) group_left () {owned}"
        return f'label_replace({joined}, "{label}", "$1", "pod", "{RUNNER_POD}")'

    def waiting(reasons: str) -> str:
        series = f'kube_pod_container_status_waiting_reason{{reason=~"{reasons}"}} == 1'
        return f"count by ({label}) ({runners(series)})"

    pending = 'kube_pod_status_phase{phase="Pending"} == 1'
    aged = f"(time() - kube_pod_created) * on (namespace, pod) group_left () ({pending})"
    # Waiting as ContainerCreating, created longer ago than a pod takes to start.
    creating = (
        '(kube_pod_container_status_waiting_reason{reason="ContainerCreating"} == 1) * on '
        f"(namespace, pod) group_left () (time() - kube_pod_created > {CREATING_MINS * 60:.0f})"
    )
    oom = 'reason="OOMKilled"'
    killed = (
        f"max by (namespace, pod) (max_over_time(kube_pod_container_status_terminated_reason"
        f"{{{oom}}}[{counted}]) or max_over_time(kube_pod_container_status_last_terminated_"
        f"reason{{{oom}}}[{counted}])) == 1"
    )
    restarts = (
        f"max by (namespace, pod) (increase(kube_pod_container_status_restarts_total[{counted}]))"
    )
    runner = f'container="{CONTAINER}"'
    periods = "container_cpu_cfs_{}periods_total{{" + runner + "}}"
    throttled, total = (
        f"sum by ({label}) ({runners(f'rate({periods.format(part)}[{window}])')})"
        for part in ("throttled_", "")
    )
    memory = (
        f"max by (namespace, pod) (container_memory_working_set_bytes{{{runner}}}) / "
        f"max by (namespace, pod) (kube_pod_container_resource_limits{{{runner}, "
        'resource="memory"})'
    )
    on_node = 'kube_pod_info{node!=""}'
    return {
        "pods_pending": f"sum by ({label}) ({runners(pending)})",
        "pending_mins": f"max by ({label}) ({runners(aged)}) / 60",
        "unschedulable": f"sum by ({label}) ({runners('kube_pod_status_unschedulable == 1')})",
        "image_pull": waiting("ImagePullBackOff|ErrImagePull"),
        "config_error": waiting("CreateContainerConfigError"),
        "creating": f"count by ({label}) ({runners(creating)})",
        "oom_kills": f"count by ({label}) ({runners(killed)})",
        "restarts": f"sum by ({label}) ({runners(restarts)})",
        "cpu_throttled": f"{throttled} / {total}",
        "memory_of_limit": f"max by ({label}) ({runners(memory)})",
        # One condition per node (topk): a node both under pressure and not Ready is one line.
        "nodes": f"count by ({label}, node, condition) ({runners(on_node)} * on (node) "
        f"group_left (condition) topk by (node) (1, {_BAD_NODE}))",
    }


def probe_query(metrics: list[str]) -> str:
    """Which of `metrics` Prometheus has at all: a series nobody scrapes is "not known", not 0."""
    names = "|".join(re.escape(m) for m in sorted(set(metrics)))
    return f'count by (__name__) ({{__name__=~"{names}"}})'


def runner_pods(
    answers: Mapping[str, Vector],
    probed: Mapping[str, bool],
    runner_type: Callable[[Mapping[str, str]], str],
) -> tuple[dict[str, RunnerPods], RunnerPods]:
    """Per runner type with series, its pods' readings from `answers` (reading -> series), and
    those of a type with none; `probed`: reading -> whether its source is scraped (a reading
    not probed, a replaced query, is trusted: its empty answer is none)."""
    values: dict[str, dict[str, float]] = {}
    nodes: dict[str, list[NodeTrouble]] = {}
    for reading, series in answers.items():
        for labels, value in series:
            name = runner_type(labels)
            if not name:
                continue
            if reading == "nodes":
                node, condition = labels.get("node", ""), labels.get("condition", "")
                if node and condition:
                    trouble = NodeTrouble(node=node, condition=condition, pods=value)
                    nodes.setdefault(name, []).append(trouble)
            else:
                values.setdefault(name, {})[reading] = value
    missing = {r: NEEDS[r][1] for r, scraped in probed.items() if not scraped}
    unknown = unknown_said(missing)
    known = [r for r in answers if r not in missing and r != "nodes"]
    found = {}
    for name in sorted({"", *values, *nodes}):
        read = {r: values.get(name, {}).get(r, 0.0) for r in known}
        read["pending_mins"] = values.get(name, {}).get("pending_mins")  # no pod: no age
        listed = tuple(sorted(nodes.get(name, ()), key=lambda n: (-n.pods, n.node)))
        found[name] = RunnerPods(**read, nodes=listed, unknown=unknown)
    return found, found.pop("")
