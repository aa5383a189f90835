"""A week of two ARC listeners' metrics, written as OpenMetrics for Prometheus's backfill
(`Prometheus.backfill`): the history a capacity report reads, known to the minute.

Families, labels and buckets are ARC's (see `arc_exporter`); each listener is its own scrape
target (`instance`), the job histogram carrying the job's labels only, as ARC serves them. The
queueing type's listener is recreated halfway through the week: a new runner-set suffix and a new
pod address, as after an ARC upgrade.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sandbox.runner_pods import generated
from tests.support.fakes.arc_exporter import BUCKETS, HEALTHY, JOB, QUEUEING

STEP_S = 300
HOUR, DAY = 3600, 86400
MAXIMUM = 20
QUEUED_WHILE_BURSTING = 15
# Days (from the week's start) and hours of that day: queueing at the maximum, and at the
# maximum without a queue.
BURSTS = ((1, 9, 15), (3, 9, 15), (5, 9, 15))  # 18 h over the thresholds
BUSY = ((2, 10, 14), (4, 10, 14))  # 8 h more at the maximum
RECREATED_DAY = 4
# Queue time: 2 jobs every 5 min wait 5 s; while bursting, 4 jobs every 5 min wait 40 min.
QUICK_S, SLOW_S = 5.0, 2400.0
JOB_S = 1800.0  # every job runs 30 min
# While bursting, the queueing set's new runner pods wait Pending (kube-state-metrics' series),
# created as the burst starts; in the first burst no node fits them (unschedulable).
PENDING_PODS = 4
UNSCHEDULABLE_BURSTS = BURSTS[:1]
# While bursting, a job on the queueing set's node is OOMKilled every hour: the node's kernel
# counts it (node-exporter's `node_vmstat_oom_kill`), as ARC deletes the pod at once.
NODE = "ip-10-0-1-17.ec2.internal"
NODE_EXPORTER = "kube-prometheus-stack-prometheus-node-exporter-q7x2k"


@dataclass(frozen=True)
class Listener:
    name: str
    instance: str


def _within(at: int, start: int, spans: tuple[tuple[int, int, int], ...]) -> bool:
    return any(
        start + day * DAY + h0 * HOUR <= at < start + day * DAY + h1 * HOUR for day, h0, h1 in spans
    )


def week(start: int, end: int) -> str:
    """The OpenMetrics text from `start` to `end` (unix seconds, multiples of `STEP_S`)."""
    gauges: dict[str, list[str]] = {}
    histogram: list[str] = []
    execution: list[str] = []
    counts: dict[tuple[str, float], int] = {}  # (instance, wait) -> jobs so far
    for at in range(start - HOUR, end + 1, STEP_S):
        recreated = at >= start + RECREATED_DAY * DAY
        queueing = (
            Listener(f"{QUEUEING}-b9c2d", "10.0.0.7:8080")
            if recreated
            else Listener(f"{QUEUEING}-x7q2k", "10.0.0.1:8080")
        )
        healthy = Listener(f"{HEALTHY}-p4x7z", "10.0.0.2:8080")
        bursting, busy = _within(at, start, BURSTS), _within(at, start, BUSY)
        if bursting:
            values = (MAXIMUM + QUEUED_WHILE_BURSTING, MAXIMUM, MAXIMUM)
        elif busy:
            values = (MAXIMUM, MAXIMUM, MAXIMUM)
        else:
            values = (8, 8, 10)
        for listener, (assigned, running, desired) in (
            (queueing, values),
            (healthy, (3, 3, 5)),
        ):
            labels = (
                f'enterprise="",instance="{listener.instance}",job="arc",'
                f'name="{listener.name}",namespace="arc-runners",organization="pytorch",'
                f'repository=""'
            )
            for family, value in (
                ("assigned_jobs", assigned),
                ("running_jobs", running),
                ("desired_runners", desired),
                ("registered_runners", desired),
                ("max_runners", MAXIMUM),
            ):
                gauges.setdefault(family, []).append(f"gha_{family}{{{labels}}} {value} {at}")
        for instance, jobs in (
            (queueing.instance, [(SLOW_S, 4)] if bursting else [(QUICK_S, 2)]),
            ("10.0.0.2:8080", [(QUICK_S, 1)]),
        ):
            for wait, n in jobs:
                counts[(instance, wait)] = counts.get((instance, wait), 0) + n
            histogram += _buckets(instance, counts, at)
            # Every job that started has finished (a 30-min job, a 5-min step: near enough).
            started = sum(n for (where, _), n in counts.items() if where == instance)
            execution += _executions(instance, started, at)
        if bursting:
            _pending_pods(
                gauges, queueing.name, at, start, _within(at, start, UNSCHEDULABLE_BURSTS)
            )
        _node_kills(gauges, queueing.name, at, start)
    lines = []
    for family, samples in gauges.items():
        name = family if family.startswith(("kube_", "node_")) else f"gha_{family}"
        lines += [f"# TYPE {name} gauge", *samples]
    lines += ["# TYPE gha_job_startup_duration_seconds histogram", *histogram]
    lines += ["# TYPE gha_job_execution_duration_seconds histogram", *execution, "# EOF"]
    return "\n".join(lines) + "\n"


def _pending_pods(
    gauges: dict[str, list[str]], runner_set: str, at: int, start: int, unschedulable: bool
) -> None:
    """The runner set's `PENDING_PODS` Pending pods at `at`, as kube-state-metrics serves them
    (`sandbox.runner_pods`), created as their burst started."""
    began = max(
        start + day * DAY + h0 * HOUR
        for day, h0, _ in BURSTS
        if start + day * DAY + h0 * HOUR <= at
    )
    for n in range(PENDING_PODS):
        name = generated(f"{runner_set}-runner-", f"{began}/{n}")  # as ARC names them
        pod = f'namespace="arc-runners",pod="{name}"'
        ids = f'{pod},uid="{runner_set}-{began}-{n}"'
        owner = f'{ids},owner_is_controller="true",owner_kind="EphemeralRunner",owner_name="x"'
        samples = [
            ("kube_pod_owner", owner, 1),
            ("kube_pod_created", ids, began),
            ("kube_pod_status_phase", f'{ids},phase="Pending"', 1),
        ]
        if unschedulable:
            samples.append(("kube_pod_status_unschedulable", ids, 1))
        for family, labels, value in samples:
            gauges.setdefault(family, []).append(f"{family}{{{labels}}} {value} {at}")


def node_kills(start: int, at: int) -> int:
    """The queueing set's node's OOM kills by `at`: one an hour while bursting, from the start."""
    bursting = sum(
        max(0, min(at, start + day * DAY + h1 * HOUR) - (start + day * DAY + h0 * HOUR))
        for day, h0, h1 in BURSTS
    )
    return bursting // HOUR


def _node_kills(gauges: dict[str, list[str]], runner_set: str, at: int, start: int) -> None:
    """A runner pod of the set running on `NODE` all week, node-exporter's pod there, and the
    node's kernel OOM kill counter (kube-prometheus-stack's target labels)."""
    runner = generated(f"{runner_set}-runner-", "running")
    ids = f'namespace="arc-runners",pod="{runner}",uid="{runner}"'
    owner = f'{ids},owner_is_controller="true",owner_kind="EphemeralRunner",owner_name="x"'
    exporter = f'namespace="monitoring",pod="{NODE_EXPORTER}"'
    for family, labels, value in (
        ("kube_pod_owner", owner, 1),
        ("kube_pod_info", f'{ids},node="{NODE}"', 1),
        ("kube_pod_info", f'{exporter},uid="ne",node="{NODE}"', 1),
        ("node_vmstat_oom_kill", f'{exporter},job="node-exporter"', node_kills(start, at)),
    ):
        gauges.setdefault(family, []).append(f"{family}{{{labels}}} {value} {at}")


def _buckets(instance: str, counts: dict[tuple[str, float], int], at: int) -> Iterator[str]:
    mine = {wait: n for (where, wait), n in counts.items() if where == instance}
    labels = f'{JOB},instance="{instance}",job="arc"'
    family = "gha_job_startup_duration_seconds"
    for le in BUCKETS:
        below = sum(n for wait, n in mine.items() if wait <= le)
        yield f'{family}_bucket{{{labels},le="{le:g}"}} {below} {at}'
    total = sum(mine.values())
    yield f'{family}_bucket{{{labels},le="+Inf"}} {total} {at}'
    yield f"{family}_count{{{labels}}} {total} {at}"
    yield f"{family}_sum{{{labels}}} {sum(w * n for w, n in mine.items()):g} {at}"


def _executions(instance: str, finished: int, at: int) -> list[str]:
    """The execution histogram's count and sum (what a mean reads), each job `JOB_S` long."""
    labels = f'{JOB},instance="{instance}",job="arc",job_result="succeeded"'
    family = "gha_job_execution_duration_seconds"
    return [
        f'{family}_bucket{{{labels},le="+Inf"}} {finished} {at}',
        f"{family}_count{{{labels}}} {finished} {at}",
        f"{family}_sum{{{labels}}} {finished * JOB_S:g} {at}",
    ]


def expected_p90_s(start: int, end: int) -> float:
    """The queueing type's p90 over [start, end] as `histogram_quantile` interpolates it."""
    steps = (end - start) // STEP_S
    slow_steps = sum((h1 - h0) * HOUR // STEP_S for _, h0, h1 in BURSTS)
    quick, slow = 2 * (steps - slow_steps), 4 * slow_steps
    rank = 0.9 * (quick + slow)
    lower = max(b for b in BUCKETS if b < SLOW_S)
    return lower + (SLOW_S - lower) * (rank - quick) / slow
