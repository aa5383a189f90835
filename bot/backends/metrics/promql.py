"""Every PromQL query the Prometheus backend sends, in one table, and how each answer adds up.

A template is PromQL with three kinds of fill-in, filled in this order: `$fragment`, a shared piece
(`FRAGMENTS`; `$fragment(text)` for one that holds `$arg`) and `$by`, the row's grouping; `{…}`, a
series' selector, which gets PROMETHEUS_SELECTOR (so one cluster's series are read from a
Prometheus holding several clusters'); `$setting`, filled last in one pass, so neither a regex's
`{5}` nor a query's own `$1` is taken for a fill-in.

ARC's listener metrics answer one series per scale set, in `name`. The runner pods' readings read
kube-state-metrics v2, cAdvisor and node-exporter, which kube-prometheus-stack scrapes by default,
so no new permission is needed; each kube-state-metrics series is first taken `max by` the pod, as
two replicas of it serve each series twice. `$runners` keeps the pods `kube_pod_owner` says an
EphemeralRunner owns (over 30 min: a runner pod is deleted once its job ends) and puts the
runner set from the pod's name (`<EphemeralRunnerSet>-runner-<5 chars>`) in the runner-type label,
so no `--metric-labels-allowlist` is needed. Kubernetes cuts a `GenerateName` to 58 characters
before adding its 5: `RUNNER_POD` reads each cut name by its length, and any other name gives no
runner set rather than a phantom one."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from bot.backends.http import BackendError
from bot.domain.alerting.promql_selector import vector
from bot.domain.reading.judgement import BOOT_MINS
from bot.domain.reading.runner_pods import CREATING_MINS, DISK_BUSY, WINDOW_MINS

_KEPT, _ADDED = 58, 5  # Kubernetes cuts a GenerateName to 58 characters, then adds 5
_BASE = "-runner-"
# A runner set of n characters whose `<runner set>-runner-` Kubernetes cut.
_CUT = [
    f"(.{{{n}}}){_BASE[: _KEPT - n]}[a-z0-9]{{{_ADDED}}}"
    for n in range(_KEPT - len(_BASE) + 1, _KEPT)
]
RUNNER_POD = "|".join([f"(.+){_BASE}[a-z0-9]{{{_ADDED}}}", *_CUT])
RUNNER_SET = "".join(f"${n}" for n in range(1, len(_CUT) + 2))  # the one group that matched

# How a runner type's series add up: `value` the last one's; `added` (counts); `worst` (a share or
# an age: the largest); `buckets` (summed by `le`, read as a quantile); the rest are the node and
# killed pod readings `prometheus_pods.runner_pods` reads.
Read = Literal["value", "added", "worst", "buckets", "pods", "nodes", "disks", "per node"]


@dataclass(frozen=True)
class Query:
    promql: str  # the template
    by: str = "name"  # the labels of each series answered (`$by` in the template)
    read: Read = "value"


FRAGMENTS = {
    # A job-level series' scale set `name`, from the same listener target.
    "scale_set": "on (instance) group_left (name) group by (instance, name) (gha_assigned_jobs{})",
    "scale_set_day_before": "on (instance) group_left (name) group by (instance, name) "
    "(gha_assigned_jobs{} offset 1d)",
    # `$arg` (by `namespace` and `pod` only) of the runners' pods, labelled by runner set.
    "runners": "label_replace(($arg) * on (namespace, pod) group_left () max by (namespace, pod) "
    '(max_over_time(kube_pod_owner{owner_kind="EphemeralRunner"}[$counted])), "$label", '
    '"$runner_set", "pod", "$runner_pod")',
    # The waiting reasons of a pod's containers and init containers (ARC's dind mode runs some).
    "waiting": "max by (namespace, pod) (kube_pod_container_status_waiting_reason{$arg} or "
    "kube_pod_init_container_status_waiting_reason{$arg})",
    # How much a counter grew over 30 min, exact where it did not reset: `increase` extrapolates a
    # series younger than the window to its edges (2 restarts read 2.4).
    "grown": "((max_over_time($arg[$counted]) - min_over_time($arg[$counted]) and "
    "resets($arg[$counted]) == 0) or increase($arg[$counted]))",
    "age": "max by (namespace, pod) (time() - kube_pod_created{})",
    # Creating starts once a node is found (waiting for one is the unschedulable reading's).
    "placed": "time() - (max by (namespace, pod) (kube_pod_status_scheduled_time{}) or "
    "max by (namespace, pod) (kube_pod_created{}))",
    "pending": 'max by (namespace, pod) (kube_pod_status_phase{phase="Pending"}) == 1',
    # No node fits it yet: a node may be on its way (a cluster autoscaler's), or none will be.
    "no_node_pods": "max by (namespace, pod) (kube_pod_status_unschedulable{}) == 1",
    # No node fits it for longer than a runner's boot (RUNNER_BOOT_MINUTES).
    "unschedulable_pods": "($no_node_pods) and on (namespace, pod) ($age > $boot_s)",
    "on_node": 'max by (namespace, pod, node) (kube_pod_info{node!=""})',
    # Each node-exporter pod's node: its series carry `namespace` and `pod` but no `node`, so it
    # is joined from `kube_pod_info` (as kube-prometheus-stack's own recording rules do).
    "node_exporter_node": "topk by (namespace, pod) (1, $on_node)",
    # Per node at `DISK_BUSY` or more, the share of the window its busiest disk (as node-exporter's
    # mixin selects disks) was busy; an extrapolated rate can pass 1 s/s a little.
    "busy_disks": "round(clamp_max(max by (node) (rate(node_disk_io_time_seconds_total{device=~"
    '"(/dev/)?(mmcblk.p.+|nvme.+|rbd.+|sd.+|vd.+|xvd.+|dm-.+|md.+|dasd.+)"}[$window]) * on '
    "(namespace, pod) group_left (node) $node_exporter_node), 1), 0.01) >= $disk_busy",
    # The report's: a job series per scale set (`queuepilot_type`: `name` less the suffix) through
    # any target that served its gauges in the window: a listener restarted mid-window is one match.
    "by_type": "on (instance) group_left (queuepilot_type) group by (instance, queuepilot_type) "
    '(label_replace(last_over_time(gha_assigned_jobs{}[$range]), "queuepilot_type", "$1", '
    '"name", $cut))',
    "window_starts": "sum by (queuepilot_type, le) (increase("
    "gha_job_startup_duration_seconds_bucket{}[$range]) * $by_type)",
    "as_name": '"name", "$1", "queuepilot_type", "(.*)"',  # labelled as the reading's series are
}
_PODS, _CREATING = "$label", '"ContainerCreating|PodInitializing"'
# fmt: off
# Field or reading -> its default query. ARC's gauges are `max by (name)`: two Prometheus replicas
# or a listener restarted serve one scale set twice.
QUERIES = {
    "queued": Query("(max by ($by) (gha_assigned_jobs{}) - max by ($by) (gha_running_jobs{}))"),
    "assigned": Query("max by ($by) (gha_assigned_jobs{})"),
    "registered": Query("max by ($by) (gha_registered_runners{})"),
    "busy": Query("max by ($by) (gha_busy_runners{})"),
    "idle": Query("max by ($by) (gha_idle_runners{})"),
    "minimum": Query("max by ($by) (gha_min_runners{})"),
    "maximum": Query("max by ($by) (gha_max_runners{})"),
    "desired": Query("max by ($by) (gha_desired_runners{})"),
    "started_per_min": Query(
        "60 * sum by ($by) (rate(gha_started_jobs_total{}[$window]) * $scale_set)"),
    # Demand: what started, plus what the queue grew by meanwhile.
    "arrival_per_min": Query(
        "60 * sum by ($by) (rate(gha_started_jobs_total{}[$window]) * $scale_set) + on (name) "
        "60 * deriv((max by ($by) (gha_assigned_jobs{}) - max by ($by) (gha_running_jobs{}))"
        "[$window:])"),
    "completed_per_min": Query(
        "60 * sum by ($by) (rate(gha_completed_jobs_total{}[$window]) * $scale_set)"),
    # The startup histogram's buckets (seconds), whose p99 is the longest wait.
    "longest_wait_mins": Query(
        "sum by ($by) (rate(gha_job_startup_duration_seconds_bucket{}[$window]) * $scale_set)",
        "name, le", "buckets"),
    "job_duration_mins": Query(
        "sum by ($by) (rate(gha_job_execution_duration_seconds_sum{}[$window]) * $scale_set) / "
        "sum by ($by) (rate(gha_job_execution_duration_seconds_count{}[$window]) * $scale_set) "
        "/ 60"),
    # The same hour yesterday: what "normal" means for this hour of the day.
    "arrival_baseline_per_min": Query(
        "60 * sum by ($by) (rate(gha_started_jobs_total{}[1h] offset 1d) * $scale_set_day_before)"),
    "duration_baseline_mins": Query(
        "sum by ($by) (rate(gha_job_execution_duration_seconds_sum{}[1h] offset 1d) * "
        "$scale_set_day_before) / sum by ($by) (rate(gha_job_execution_duration_seconds_count{}"
        "[1h] offset 1d) * $scale_set_day_before) / 60"),
    # The runner pods' readings, one series per runner set in PROMETHEUS_RUNNER_TYPE_LABEL.
    "pods_pending": Query("count by ($by) ($runners($pending))", _PODS, "added"),
    "pending_mins": Query(
        "max by ($by) ($runners($age and on (namespace, pod) ($pending))) / 60", _PODS, "worst"),
    "no_node": Query("count by ($by) ($runners($no_node_pods))", _PODS, "added"),
    "unschedulable": Query("count by ($by) ($runners($unschedulable_pods))", _PODS, "added"),
    "unschedulable_mins": Query(
        "max by ($by) ($runners($age and on (namespace, pod) ($unschedulable_pods))) / 60",
        _PODS, "worst"),
    # ErrImagePull as well as the back-off: they alternate while a pull keeps failing.
    "image_pull": Query(
        'count by ($by) ($runners(($waiting(reason=~"ImagePullBackOff|ErrImagePull") == 1) and '
        "on (namespace, pod) ($age > $boot_s)))", _PODS, "added"),
    "config_error": Query(
        'count by ($by) ($runners(($waiting(reason=~"CreateContainerConfigError") == 1) and on '
        "(namespace, pod) ($age > 0)))", _PODS, "added"),
    # PodInitializing is ContainerCreating for a pod with init containers. Pulling a multi-GB image
    # may take a runner's boot, so on its node for the longer of 5 min and RUNNER_BOOT_MINUTES.
    "creating": Query(
        f"count by ($by) ($runners((($waiting(reason=~{_CREATING}) == 1) unless on (namespace, "
        f"pod) ($waiting(reason!~{_CREATING}) == 1)) and on (namespace, pod) ($placed > "
        "$creating_s)))", _PODS, "added"),
    # One series per killed pod (its uid: ARC recreates a failed runner's pod by name).
    "oom_kills": Query(
        "count by ($by) ($runners(max by (namespace, pod, uid) (max_over_time(kube_pod_container_"
        'status_terminated_reason{reason="OOMKilled"}[$counted]) or max_over_time(kube_pod_init_'
        'container_status_terminated_reason{reason="OOMKilled"}[$counted]) or max_over_time('
        'kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}[$counted]) or '
        "max_over_time(kube_pod_init_container_status_last_terminated_reason{reason="
        '"OOMKilled"}[$counted])) == 1))', f"{_PODS}, pod, uid", "pods"),
    # The init containers' restarts too: ARC's dind sidecar is one (restartPolicy Always).
    "restarts": Query(
        "sum by ($by) ($runners(sum by (namespace, pod) (max by (namespace, pod, container) "
        "($grown(kube_pod_container_status_restarts_total{})) or max by (namespace, pod, "
        "container) ($grown(kube_pod_init_container_status_restarts_total{})))))", _PODS, "added"),
    # Rates of CFS periods, summed per type, so runner sets of one type add up exactly; summed
    # over the pod's runner and dind containers: only those with a CPU limit have CFS periods.
    "cpu_throttled_periods": Query(
        "sum by ($by) ($runners(sum by (namespace, pod) (rate(container_cpu_cfs_throttled_periods_"
        'total{container=~"runner|dind"}[$window]))))', _PODS, "added"),
    "cpu_periods": Query(
        "sum by ($by) ($runners(sum by (namespace, pod) (rate(container_cpu_cfs_periods_total{"
        'container=~"runner|dind"}[$window]))))', _PODS, "added"),
    # Each container against its own limit, the fuller of them; one without a limit has none.
    "memory_of_limit": Query(
        "max by ($by) ($runners(max by (namespace, pod) (max by (namespace, pod, container) ("
        'container_memory_working_set_bytes{container=~"runner|dind"}) / on (namespace, pod, '
        "container) max by (namespace, pod, container) (kube_pod_container_resource_limits{"
        'container=~"runner|dind", resource="memory"} or kube_pod_init_container_resource_limits'
        '{container=~"runner|dind", resource="memory"}))))', _PODS, "worst"),
    # Per node, under pressure or not Ready: one condition per node (topk), one line for both.
    "nodes": Query(
        "count by ($by) ($runners($on_node) * on (node) group_left (condition) topk by (node) (1, "
        "max by (node, condition) (kube_node_status_condition{condition=~"
        '"DiskPressure|MemoryPressure|PIDPressure", status="true"} == 1) or label_replace(max by '
        '(node) (kube_node_status_condition{condition="Ready", status!="true"} == 1), "condition",'
        ' "NotReady", "", "")))', f"{_PODS}, node, condition", "nodes"),
    # Per runner set and node whose disk is saturated, the set's pods on it (`busy`: the share).
    "disk_busy": Query(
        'count_values by ($by) ("busy", $runners($on_node * on (node) group_left () '
        "($busy_disks)))", f"{_PODS}, node", "disks"),
    # Per runner set and node its pods ran on within 30 min (killed pods' too, though ARC deleted
    # them), the node's OOM kills.
    "node_oom_kills": Query(
        "max by ($by) ($runners(max by (namespace, pod, node) (max_over_time(kube_pod_info{"
        'node!=""}[$counted]))) * on (node) group_left () max by (node) ($grown('
        "node_vmstat_oom_kill{}) * on (namespace, pod) group_left (node) $node_exporter_node))",
        f"{_PODS}, node", "per node"),
}
_WORKFLOW = "name, job_workflow_name, job_workflow_ref"
# `/queue jobs`: per scale set and workflow, the jobs started in the last hour and the same hour a
# day before, and their mean minutes.
JOBS = {
    "started": Query(
        "sum by ($by) (increase(gha_started_jobs_total{}[1h]) * $scale_set)", _WORKFLOW, "added"),
    "started_day_before": Query(
        "sum by ($by) (increase(gha_started_jobs_total{}[1h] offset 1d) * $scale_set_day_before)",
        _WORKFLOW, "added"),
    "minutes": Query(
        "sum by ($by) (increase(gha_job_execution_duration_seconds_sum{}[1h]) * $scale_set) / "
        "sum by ($by) (increase(gha_job_execution_duration_seconds_count{}[1h]) * $scale_set) / 60",
        _WORKFLOW),
    "minutes_day_before": Query(
        "sum by ($by) (increase(gha_job_execution_duration_seconds_sum{}[1h] offset 1d) * "
        "$scale_set_day_before) / sum by ($by) (increase(gha_job_execution_duration_seconds_count"
        "{}[1h] offset 1d) * $scale_set_day_before) / 60", _WORKFLOW),
}
# The capacity report's numbers over its window (`$range`), asked once at its end. The runner pods'
# are the reading's own queries as subqueries a range query's step apart (`$span`): a step, not a
# minute, keeps a week's report cheap (and under the 11,000 points promxy allows a subquery).
REPORT = {
    # Minutes within which half (90%) of the jobs that got a runner in the window got one.
    "wait_p50_mins": Query(
        "histogram_quantile(0.5, label_replace($window_starts, $as_name)) / 60", read="worst"),
    "wait_p90_mins": Query(
        "histogram_quantile(0.9, label_replace($window_starts, $as_name)) / 60", read="worst"),
    # The mean minutes a job ran, of the jobs that finished in the window.
    "job_mins": Query(
        "label_replace(sum by (queuepilot_type) (increase(gha_job_execution_duration_seconds_sum{}"
        "[$range]) * $by_type) / sum by (queuepilot_type) (increase(gha_job_execution_duration_"
        "seconds_count{}[$range]) * $by_type) / 60, $as_name)", read="worst"),
    # Pods Pending at each step, a step each.
    "pending_pod_mins": Query("sum_over_time(($pods_pending)$span) * $step_mins", read="added"),
    "pending_longest_mins": Query("max_over_time(($pending_mins)$span)", read="worst"),
    # The steps with any pod no node fits.
    "unschedulable_hours": Query(
        "count_over_time((($unschedulable) > 0)$span) * $step_hours", read="added"),
    # Its kills over 30 min: each 30 minutes once.
    "node_oom_kills": Query("sum_over_time(($node_oom_kills)[$range:$counted])", read="added"),
}
# What the queue cost (`PrometheusMetrics.waited`): the window's increase of ARC's startup histogram
# per runner type and workflow label, asked once at the window's end.
_WAITED_BY = "queuepilot_type, job_workflow_ref, job_workflow_name"
WAITED = {
    "buckets": Query(
        "label_replace(sum by ($by) (increase(gha_job_startup_duration_seconds_bucket{}[$range]) "
        "* $by_type), $as_name)", f"{_WAITED_BY}, le"),
    "sums": Query(
        "label_replace(sum by ($by) (increase(gha_job_startup_duration_seconds_sum{}[$range]) * "
        "$by_type), $as_name)", _WAITED_BY),
    "counts": Query(
        "label_replace(sum by ($by) (increase(gha_job_startup_duration_seconds_count{}[$range]) "
        "* $by_type), $as_name)", _WAITED_BY),
}
# fmt: on
# `TypeHistory` field -> the reading's query over the report's window (the wait: the buckets' p99).
SERIES = {"queued": "queued", "wait_mins": "longest_wait_mins", "maximum": "maximum"}
RANGE_WAIT = "histogram_quantile(0.99, $longest_wait_mins) / 60"
# How "Prometheus could not answer for …" names a history.
SAID = {
    "queued": "queued jobs",
    "wait_mins": "the longest wait",
    "maximum": "the maximum",
    "level": "the runners wanted",
    "wait_p50_mins": "queue time p50",
    "wait_p90_mins": "queue time p90",
    "job_mins": "job duration",
    "pending_pod_mins": "runner pods Pending",
    "pending_longest_mins": "the longest a runner pod was Pending",
    "unschedulable_hours": "runner pods unschedulable",
    "node_oom_kills": "OOM kills on the runners' nodes",
}
# Prometheus refuses a range query of more than 11,000 points per series; a week at 5 min is
# 2,016, a month at 22 min about the same.
MAX_POINTS = 2000
# Which series Prometheus has at all: a series nobody scrapes is "not known", not 0.
PROBE = "count by (__name__) ({__name__=~$names})"

_CONSTANTS = {
    "counted": f"{WINDOW_MINS:.0f}m",
    "runner_set": RUNNER_SET,
    "runner_pod": RUNNER_POD,
    "disk_busy": str(DISK_BUSY),
}
_FILL_IN = re.compile(r"\$([a-z_]+)")
# A setting's fill-in, or a series' selector: filled in one pass, so nothing filled is read again.
_TOKEN = re.compile(r"\$([a-z_]+)|([a-zA-Z_:][a-zA-Z0-9_:]*)?\{([^{}]*)\}")


def render(template: str, *, by: str = "", where: str = "", **fill: str) -> str:
    """`template` as asked: its fragments, PROMETHEUS_SELECTOR (`where`) in each series, `fill`."""
    values = _CONSTANTS | fill

    def token(found: re.Match[str]) -> str:
        if found[1]:
            return values[found[1]]
        inside = _FILL_IN.sub(lambda setting: values[setting[1]], found[3])
        return vector(found[2] or "", *([inside] if inside else []), where=where)

    return _TOKEN.sub(token, _expanded(template, by))


def _expanded(text: str, by: str) -> str:
    """`text` with `$by` and its fragments in; `$fragment(arg)`: `arg` for the fragment's `$arg`."""
    done = ""
    while found := _FILL_IN.search(text):
        name, end = found[1], found.end()
        piece = by if name == "by" else FRAGMENTS.get(name, found[0])
        if "$arg" in piece:
            depth = 0
            for close in range(end, len(text)):
                depth += {"(": 1, ")": -1}.get(text[close], 0)
                if depth == 0:
                    break
            piece, end = piece.replace("$arg", text[end + 1 : close]), close + 1
        done += text[: found.start()] + (piece if piece == found[0] else _expanded(piece, by))
        text = text[end:]
    return done + text


def defaults(
    window: str = "10m", label: str = "name", boot_mins: float = BOOT_MINS, where: str = ""
) -> dict[str, str]:
    """Field or reading -> its default query, as asked: PROMETHEUS_RATE_WINDOW (`window`), the
    runner type's label, RUNNER_BOOT_MINUTES and PROMETHEUS_SELECTOR (`where`) in."""
    boot_s, creating_s = f"{boot_mins * 60:.0f}", f"{max(CREATING_MINS, boot_mins) * 60:.0f}"
    fill = {"window": window, "label": label, "boot_s": boot_s, "creating_s": creating_s}
    return {name: render(q.promql, by=q.by, where=where, **fill) for name, q in QUERIES.items()}


def range_queries(queries: Mapping[str, str], *, wait_buckets: bool = False) -> dict[str, str]:
    """`TypeHistory` field -> PromQL; `wait_buckets`: the wait's query answers ARC's buckets."""
    chosen = {field: queries[name] for field, name in SERIES.items() if name in queries}
    if wait_buckets and "wait_mins" in chosen:
        chosen["wait_mins"] = render(RANGE_WAIT, **queries)
    level = queries.get("desired") or queries.get("registered")
    if level:
        chosen["level"] = level
    return chosen


def step_s(start: datetime, end: datetime) -> int:
    """Whole minutes, at least one, under `MAX_POINTS` a series."""
    seconds = max((end - start).total_seconds(), 60.0)
    return 60 * max(1, math.ceil(seconds / MAX_POINTS / 60))


def probe_query(metrics: list[str], where: str = "") -> str:
    """Which of `metrics` Prometheus has at all."""
    names = "|".join(re.escape(m) for m in sorted(set(metrics)))
    return render(PROBE, where=where, names=json.dumps(names))


def combined(read: Read, was: float | None, value: float) -> float:
    """A runner type's number from two of its series (runner sets, scale sets), as `read` says."""
    if was is None or read == "value":
        return value
    return was + value if read in ("added", "pods") else max(was, value)


# -- Prometheus's answers ----------------------------------------------------------------------

Vector = list[tuple[dict[str, str], float]]


def result_of(body: Mapping[str, Any], kinds: tuple[str, ...], said: str) -> tuple[str, list[Any]]:
    """The answer's `resultType` (one of `kinds`) and `result`; else what Prometheus said."""
    if body.get("status") != "success":
        error = body.get("error") or body.get("errorType") or "an error"
        raise BackendError(f"Prometheus answered {str(error)[:200]}", retryable=False)
    data = body.get("data")
    if not isinstance(data, dict):
        raise BackendError("Prometheus answered without data", retryable=True)
    result_type, result = data.get("resultType"), data.get("result")
    if result_type not in kinds or not isinstance(result, list):
        message = f"Prometheus answered a {str(result_type)[:20]}, not {said}"
        raise BackendError(message, retryable=False)
    return result_type, result


def parse_vector(body: Mapping[str, Any]) -> Vector:
    """An instant query's answer as (labels, value) pairs; NaN and infinities are "not known"."""
    result_type, result = result_of(body, ("scalar", "vector"), "an instant vector")
    if result_type == "scalar":
        point = sample_of(result)
        return [] if point is None else [({}, point[1])]
    items = [item for item in result if isinstance(item, dict)]
    series = [(labels_of(item), sample_of(item.get("value"))) for item in items]
    return [(labels, point[1]) for labels, point in series if point is not None]


def parse_matrix(body: Mapping[str, Any]) -> list[tuple[dict[str, str], dict[float, float]]]:
    """A range query's answer as (labels, {unix time: value}), only finite values."""
    _, result = result_of(body, ("matrix",), "a range vector")
    series = []
    for item in result:
        if isinstance(item, dict):
            values = item.get("values")
            points = [sample_of(v) for v in values] if isinstance(values, list) else []
            series.append((labels_of(item), dict(p for p in points if p is not None)))
    return series


def labels_of(item: Mapping[str, Any]) -> dict[str, str]:
    metric = item.get("metric")
    return {str(k): str(v) for k, v in metric.items()} if isinstance(metric, dict) else {}


def sample_of(sample: Any) -> tuple[float, float] | None:
    """`[<unix time>, "<value>"]` -> (time, value), when both are finite numbers."""
    if not isinstance(sample, list) or len(sample) != 2:
        return None
    try:
        at, value = float(sample[0]), float(sample[1])
    except (TypeError, ValueError):
        return None
    return (at, value) if math.isfinite(at) and math.isfinite(value) else None
