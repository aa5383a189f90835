"""Runner pods and their nodes from Prometheus: kube-state-metrics v2 and cAdvisor, which
kube-prometheus-stack scrapes by default, so no new permission is needed.

ARC names a runner pod `<EphemeralRunnerSet>-runner-<5 chars>` (its EphemeralRunner's
`GenerateName`), owned by the EphemeralRunner. The queries keep the pods `kube_pod_owner` says an
EphemeralRunner owns (over the window: a runner pod is deleted once its job ends) and put the
runner set from the pod's name in the runner-type label, so no `--metric-labels-allowlist` is
needed. Kubernetes cuts a `GenerateName` to 58 characters before adding its 5, so a long runner
set loses part of `-runner-`: `RUNNER_POD` reads each cut name by its length, and any other name
gives no runner set rather than a phantom one."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from bot.backends.http import number_of
from bot.domain.judgement import BOOT_MINS
from bot.domain.promql_selector import vector
from bot.domain.runner_pods import (
    CREATING_MINS,
    DISK,
    DISK_BUSY,
    NODE_READINGS,
    OOM_PODS_KEPT,
    WINDOW_MINS,
    NodeTrouble,
    RunnerPods,
    kept_nodes,
    unknown_said,
)

Vector = list[tuple[dict[str, str], float]]
_KEPT, _ADDED = 58, 5  # Kubernetes cuts a GenerateName to 58 characters, then adds 5
_BASE = "-runner-"
# A runner set of n characters whose `<runner set>-runner-` Kubernetes cut.
_CUT = [
    f"(.{{{n}}}){_BASE[: _KEPT - n]}[a-z0-9]{{{_ADDED}}}"
    for n in range(_KEPT - len(_BASE) + 1, _KEPT)
]
RUNNER_POD = "|".join([f"(.+){_BASE}[a-z0-9]{{{_ADDED}}}", *_CUT])
RUNNER_SET = "".join(f"${n}" for n in range(1, len(_CUT) + 2))  # the one group that matched
# Readings that are a share or an age: several runner sets of one type give their worst.
WORST = {"pending_mins", "unschedulable_mins", "memory_of_limit"}
# The runner container and, in ARC's dind mode, the `dind` one its docker builds run in (a
# container, or an init container with restartPolicy Always from Kubernetes 1.29).
CONTAINERS = "runner|dind"
# The block devices that are disks, as kube-prometheus's node-exporter mixin selects them
# (`diskDeviceSelector`): no loop or ram devices, whose busy time says nothing of the disks'.
DISKS = 'device=~"(/dev/)?(mmcblk.p.+|nvme.+|rbd.+|sd.+|vd.+|xvd.+|dm-.+|md.+|dasd.+)"'


def grown(series: str, window: str) -> str:
    """How much the counter grew over `window`, exact where it did not reset: `increase`
    extrapolates a series younger than the window to its edges (2 restarts read 2.4)."""
    ranged = f"{series}[{window}]"
    return (
        f"((max_over_time({ranged}) - min_over_time({ranged}) and resets({ranged}) == 0) "
        f"or increase({ranged}))"
    )


def node_exporter_node(where: str = "") -> str:
    """Each node-exporter pod's node: its series carry `namespace` and `pod` but no `node`, so
    it is joined from `kube_pod_info` (as kube-prometheus-stack's own recording rules do)."""
    info = vector("kube_pod_info", 'node!=""', where=where)
    return f"topk by (namespace, pod) (1, max by (namespace, pod, node) ({info}))"


def busy_disks(window: str, where: str = "") -> str:
    """Per node at `DISK_BUSY` or more, the share of `window` its busiest disk was busy."""
    io_time = vector("node_disk_io_time_seconds_total", DISKS, where=where)
    busy = (
        f"rate({io_time}[{window}]) * on (namespace, pod) group_left (node) "
        f"{node_exporter_node(where)}"
    )
    # A counter's rate extrapolated over the window can pass 1 s/s by a little.
    return f"round(clamp_max(max by (node) ({busy}), 1), 0.01) >= {DISK_BUSY}"


def bad_nodes(where: str = "") -> str:
    """Per node and condition, the nodes under pressure or not Ready."""
    name, pressures = "kube_node_status_condition", "DiskPressure|MemoryPressure|PIDPressure"
    pressure = vector(name, f'condition=~"{pressures}"', 'status="true"', where=where)
    not_ready = vector(name, 'condition="Ready"', 'status!="true"', where=where)
    return (
        f"max by (node, condition) ({pressure} == 1) or label_replace(max by (node) "
        f'({not_ready} == 1), "condition", "NotReady", "", "")'
    )


def pod_queries(
    label: str = "name", window: str = "10m", boot_mins: float = BOOT_MINS, where: str = ""
) -> dict[str, str]:
    """Reading of `RunnerPods` -> PromQL answering one series per runner set in `label`.
    `boot_mins`: how long a new pod may wait for its node or its image before it counts as
    unable to start. Every kube-state-metrics series is first taken `max by` the pod: two
    replicas of kube-state-metrics serve each series twice, which would double every count."""
    counted = f"{WINDOW_MINS:.0f}m"

    def series(name: str, *matchers: str) -> str:
        return vector(name, *matchers, where=where)

    def runners(expr: str) -> str:
        """`expr` (by `namespace` and `pod` only) of the runners' pods, labelled by runner set."""
        owner = series("kube_pod_owner", 'owner_kind="EphemeralRunner"')
        owned = f"max by (namespace, pod) (max_over_time({owner}[{counted}]))"
        joined = f"({expr}) * on (namespace, pod) group_left () {owned}"
        return f'label_replace({joined}, "{label}", "{RUNNER_SET}", "pod", "{RUNNER_POD}")'

    def once(expr: str) -> str:
        return f"max by (namespace, pod) ({expr})"

    def both(name: str, *matchers: str) -> str:
        """A container series and its init containers' (ARC's dind mode runs some there)."""
        init = name.replace("kube_pod_container_", "kube_pod_init_container_")
        return f"{series(name, *matchers)} or {series(init, *matchers)}"

    age = once(f"time() - {series('kube_pod_created')}")
    # Creating starts once a node is found (waiting for one is the unschedulable reading's).
    placed = (
        f"time() - ({once(series('kube_pod_status_scheduled_time'))} or "
        f"{once(series('kube_pod_created'))})"
    )

    def older(expr: str, mins: float, since: str = age) -> str:
        return f"({expr}) and on (namespace, pod) ({since} > {mins * 60:.0f})"

    def aged(pods: str) -> str:
        return f"{age} and on (namespace, pod) ({pods})"

    def waiting(reasons: str, mins: float, since: str = age, only: bool = False) -> str:
        """Pods waiting for `reasons`, each once; `only`: and for no other."""
        reason = "kube_pod_container_status_waiting_reason"
        found = once(both(reason, f'reason=~"{reasons}"')) + " == 1"
        if only:
            other = both(reason, f'reason!~"{reasons}"')
            found = f"({found}) unless on (namespace, pod) ({once(other)} == 1)"
        return f"count by ({label}) ({runners(older(found, mins, since))})"

    pending = once(series("kube_pod_status_phase", 'phase="Pending"')) + " == 1"
    unschedulable = older(once(series("kube_pod_status_unschedulable")) + " == 1", boot_mins)
    oom = 'reason="OOMKilled"'
    ended = " or ".join(
        f"max_over_time({series(f'kube_pod_{kind}container_status_{reason}', oom)}[{counted}])"
        for reason in ("terminated_reason", "last_terminated_reason")
        for kind in ("", "init_")
    )
    killed = f"max by (namespace, pod, uid) ({ended}) == 1"
    # The init containers' restarts too: ARC's dind sidecar is one (restartPolicy Always).
    restarted = [
        f"max by (namespace, pod, container) ({grown(series(name), counted)})"
        for name in (
            "kube_pod_container_status_restarts_total",
            "kube_pod_init_container_status_restarts_total",
        )
    ]
    restarts = f"sum by (namespace, pod) ({' or '.join(restarted)})"

    containers = f'container=~"{CONTAINERS}"'

    def periods(part: str) -> str:
        """Summed over the pod's containers: only those with a CPU limit have CFS periods."""
        counter = series(f"container_cpu_cfs_{part}periods_total", containers)
        return f"sum by (namespace, pod) (rate({counter}[{window}]))"

    throttled, total = (
        f"sum by ({label}) ({runners(periods(part))})" for part in ("throttled_", "")
    )
    # Each container against its own limit, the fuller of them; one without a limit has none.
    by_container = "max by (namespace, pod, container)"
    limits = both("kube_pod_container_resource_limits", containers, 'resource="memory"')
    working_set = series("container_memory_working_set_bytes", containers)
    memory = (
        f"max by (namespace, pod) ({by_container} ({working_set}) / on (namespace, pod, "
        f"container) {by_container} ({limits}))"
    )
    info = series("kube_pod_info", 'node!=""')
    on_node = f"max by (namespace, pod, node) ({info})"
    # The nodes the runner pods ran on within the window, killed pods' too, though ARC deleted them.
    ran_on = f"max by (namespace, pod, node) (max_over_time({info}[{counted}]))"
    node_kills = (
        f"max by (node) ({grown(series('node_vmstat_oom_kill'), counted)} * on (namespace, pod) "
        f"group_left (node) {node_exporter_node(where)})"
    )
    return {
        "pods_pending": f"count by ({label}) ({runners(pending)})",
        "pending_mins": f"max by ({label}) ({runners(aged(pending))}) / 60",
        "unschedulable": f"count by ({label}) ({runners(unschedulable)})",
        "unschedulable_mins": f"max by ({label}) ({runners(aged(unschedulable))}) / 60",
        # ErrImagePull as well as the back-off: they alternate while a pull keeps failing.
        "image_pull": waiting("ImagePullBackOff|ErrImagePull", boot_mins),
        "config_error": waiting("CreateContainerConfigError", 0),
        # PodInitializing is ContainerCreating for a pod with init containers. Pulling a
        # multi-GB image on a new node may take a runner's boot: a slow start, not a stuck one.
        "creating": waiting(
            "ContainerCreating|PodInitializing", max(CREATING_MINS, boot_mins), placed, True
        ),
        # One series per killed pod (its uid: ARC recreates a failed runner's pod by name).
        "oom_kills": f"count by ({label}, pod, uid) ({runners(killed)})",
        "restarts": f"sum by ({label}) ({runners(restarts)})",
        # Rates of CFS periods, summed per type, so runner sets of one type add up exactly.
        "cpu_throttled_periods": throttled,
        "cpu_periods": total,
        "memory_of_limit": f"max by ({label}) ({runners(memory)})",
        # One condition per node (topk): a node both under pressure and not Ready is one line.
        "nodes": f"count by ({label}, node, condition) ({runners(on_node)} * on (node) "
        f"group_left (condition) topk by (node) (1, {bad_nodes(where)}))",
        # Per runner set and node whose disk is saturated, the set's pods on it (`busy`: the share).
        "disk_busy": f'count_values by ({label}, node) ("busy", '
        f"{runners(f'{on_node} * on (node) group_left () ({busy_disks(window, where)})')})",
        # Per runner set and node its pods ran on, the node's OOM kills (`runner_pods` adds each
        # node's once per type).
        "node_oom_kills": f"max by ({label}, node) ({runners(ran_on)} * on (node) "
        f"group_left () {node_kills})",
    }


def probe_query(metrics: list[str], where: str = "") -> str:
    """Which of `metrics` Prometheus has at all: a series nobody scrapes is "not known", not 0."""
    names = "|".join(re.escape(m) for m in sorted(set(metrics)))
    return f"count by (__name__) ({vector('', f'__name__=~{json.dumps(names)}', where=where)})"


def runner_pods(
    answers: Mapping[str, Vector],
    probed: Mapping[str, str],
    runner_type: Callable[[Mapping[str, str]], str],
) -> tuple[dict[str, RunnerPods], RunnerPods]:
    """Per runner type with series, its pods' readings, and those of a type with none. `probed`:
    reading -> the source of a series it needs that is not scraped ("" when all are); a reading
    not probed (a replaced query) is trusted: its empty answer is none."""
    values: dict[str, dict[str, float]] = {}
    killed: dict[str, set[tuple[str, str]]] = {}
    nodes: dict[str, dict[tuple[str, str], float]] = {}
    busy: dict[str, float] = {}  # node -> its disks' busy share
    node_kills: dict[str, dict[str, float]] = {}  # type -> node -> its OOM kills
    for reading, series in answers.items():
        for labels, value in series:
            name = runner_type(labels)
            if not name:
                continue
            # Several runner sets of one type (a template rolling, two namespaces): counts add
            # up, the rest take the worst.
            if reading in NODE_READINGS:
                node, condition = labels.get("node", ""), labels.get("condition", "")
                if reading == "disk_busy":
                    condition = DISK
                    said = number_of(labels.get("busy")) or 0.0  # `count_values`' label
                    busy[node] = max(busy.get(node, 0.0), said)
                if node and condition:
                    on = nodes.setdefault(name, {})
                    on[node, condition] = on.get((node, condition), 0.0) + value
                continue
            if reading == "node_oom_kills":  # each node once, whichever sets ran there
                node_kills.setdefault(name, {})[labels.get("node", "")] = value
                continue
            if reading == "oom_kills" and labels.get("pod"):
                killed.setdefault(name, set()).add((labels["pod"], labels.get("uid", "")))
            read = values.setdefault(name, {})
            if reading in WORST:
                read[reading] = max(read.get(reading, value), value)
            else:
                read[reading] = read.get(reading, 0.0) + value
    missing = {r: source for r, source in probed.items() if source}
    unknown = unknown_said(missing)
    known = [r for r in answers if r not in missing and r not in NODE_READINGS]
    found = {}
    for name in sorted({"", *values, *nodes, *node_kills}):
        read = {r: values.get(name, {}).get(r, 0.0) for r in known}
        if "node_oom_kills" in read:
            read["node_oom_kills"] = sum(node_kills.get(name, {}).values())
        for aged in ("pending_mins", "unschedulable_mins"):
            read[aged] = values.get(name, {}).get(aged)  # no pod: no age
        listed, more = kept_nodes(
            [
                NodeTrouble(node=n, condition=c, pods=p, busy=busy.get(n) if c == DISK else None)
                for (n, c), p in nodes.get(name, {}).items()
            ]
        )
        pods = tuple(sorted(killed.get(name, ())))[:OOM_PODS_KEPT]
        found[name] = RunnerPods(
            **read, oom_pods=pods, nodes=listed, more_nodes=more, unknown=unknown
        )
    return found, found.pop("")
