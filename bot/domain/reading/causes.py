"""Causes a CI engineer recognises, refining the runbook's five: every rule in one table, in the
order whose fix comes first. A rule is a condition on the readings, the numbers its evidence
cites and the next step that fits it; one that cannot decide for lack of data says which source
would tell. The runner pods' rules are judged with each reading and stored with it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from bot.domain.alerting.value_string import finite
from bot.domain.queue_cost.jobs import Slower, Surge
from bot.domain.reading.fleet import HistoryPoint, RunnerTypeMetrics
from bot.domain.reading.judgement import BOOT_MINS
from bot.domain.reading.runner_pods import (
    CREATING_MINS,
    DISK,
    WINDOW_MINS,
    PodCause,
    RunnerPods,
    Trouble,
)
from bot.domain.units import minutes, number

STALL_MINS = 15.0  # ARCListenerStall: gha_assigned_jobs > 0 unchanged for 15 minutes
ARC = "ARC's listener metrics (METRICS_BACKEND=prometheus)"
JOBS_SOURCES = "needs the jobs behind the queue (JOBS_BACKEND=github or hud)"
QUOTA_WORDS = ("quota", "limit", "vcpu")  # an autoscaler's error that names a quota it hit
# Node OOM kills (any process) that make a cause when no runner pod was seen killed: a daemon
# killed once on a shared node pool is not the runners' trouble.
NODE_OOM_KILLS = 3
THROTTLED = 0.25  # a quarter of the CFS periods throttled slows every job noticeably
MEMORY_NEAR = 0.9  # the working set this close to the limit is one allocation from a kill
SURGE = 1.5  # arrivals against their baseline that make a surge
NODE_FIX = {
    "DiskPressure": "free or grow its disk (runner work directories, images) or replace it",
    "MemoryPressure": "replace it or lower the runners packed on it",
    "PIDPressure": "replace it; look for jobs leaving processes behind",
}


class Cause(StrEnum):
    # The runbook's five.
    WORKLOAD = "Increased workload"
    CONSTRAINTS = "Resource constraints"
    LONG_JOBS = "Long-running jobs"
    AUTOSCALING = "Autoscaling configuration"
    INFRASTRUCTURE = "Infrastructure problems"
    # What they are, when the evidence says which.
    SURGE = "One workflow's surge"
    LISTENER_STALLED = "Listener stalled"
    NOT_REGISTERING = "Runners not registering"
    SCALE_UP_FAILING = "Scale-up failing"
    ORG_LIMIT = "At the organisation's limit"
    # What the runner pods show, judged with the reading (stored by these names).
    PODS_UNSCHEDULABLE = Trouble.UNSCHEDULABLE.value
    IMAGE_PULL = Trouble.IMAGE_PULL.value
    CONFIG_ERROR = Trouble.CONFIG_ERROR.value
    CREATING = Trouble.CREATING.value
    NODE_PRESSURE = Trouble.NODE_PRESSURE.value
    DISK_BUSY = Trouble.DISK_BUSY.value
    OOM_KILLED = Trouble.OOM_KILLED.value
    CPU_THROTTLED = Trouble.CPU_THROTTLED.value
    MEMORY_NEAR_LIMIT = Trouble.MEMORY_NEAR_LIMIT.value


@dataclass(frozen=True)
class Evidence:
    history: Sequence[HistoryPoint] = ()  # past readings, newest first
    boot_mins: float = BOOT_MINS
    stall_mins: float = STALL_MINS
    # None: not readable; no entry: no scale target.
    scaler_failures: Mapping[str, Sequence[str] | None] = field(default_factory=dict)
    surges: Mapping[str, Surge] = field(default_factory=dict)
    slower: Mapping[str, Sequence[Slower]] = field(default_factory=dict)
    # Why no surges can be told ("" when the jobs were read).
    jobs_note: str = JOBS_SOURCES


@dataclass(frozen=True)
class Facts:
    """What the rules read: a runner type's reading and, when diagnostics run, the rest."""

    name: str
    m: RunnerTypeMetrics
    evidence: Evidence = field(default_factory=Evidence)
    fleet: Mapping[str, RunnerTypeMetrics] = field(default_factory=dict)
    now: datetime | None = None  # None while judging a reading: the pods' rules read no history

    @property
    def pods(self) -> RunnerPods:
        return self.m.pods or RunnerPods()


# What a rule's condition answers: None (not this cause), what would tell it (a str), or the
# numbers its evidence and advice cite (one mapping, or one per node).
Cited = str | Mapping[str, Any] | list[Mapping[str, Any]] | None


@dataclass(frozen=True)
class Rule:
    cause: Cause
    case_of: Cause | None  # which of the runbook's five it refines
    when: Callable[[Facts], Cited]
    evidence: str  # formatted with what `when` cites
    advice: str  # the same, and `name`: the runner type
    judged: bool = False  # read from the pods, judged with the reading and stored with it


@dataclass(frozen=True)
class Found:
    cause: Cause
    evidence: str
    advice: str


def said(facts: Facts, rules: Iterable[Rule]) -> tuple[list[Found], list[str]]:
    """The causes `rules` find in `facts`, and what would tell those they cannot decide."""
    found, missing = [], []
    for rule in rules:
        cited = rule.when(facts)
        if isinstance(cited, str):
            missing.append(cited)
            continue
        for values in [cited] if isinstance(cited, Mapping) else cited or ():
            advice = rule.advice.format(name=facts.name, **values)
            found.append(Found(rule.cause, rule.evidence.format(**values), advice))
    return found, missing


def _stalled(f: Facts) -> Cited:
    """Assigned jobs above zero and frozen for `stall_mins` while the set could take them."""
    m, stall_mins = f.m, f.evidence.stall_mins
    if m.assigned is None:
        return f"a stalled listener needs assigned jobs over time ({ARC})"
    if m.assigned <= 0:
        return None
    held = _assigned_for(f)
    if held is None:
        return f"a stalled listener needs {stall_mins:.0f} minutes of readings"
    idle = m.idle or 0
    below_max = m.maximum is not None and m.registered is not None and m.registered < m.maximum
    if held < stall_mins or (idle <= 0 and not below_max):
        return None  # frozen at the maximum with every runner busy: a full fleet, not a stall
    room = f"{number(idle)} runners idle" if idle > 0 else "below its maximum"
    return {"assigned": number(m.assigned), "held": held, "room": room}


def _scale_errors(f: Facts, *, quota: bool) -> Cited:
    """The autoscaler's own errors: its metric, or what the scale backend read."""
    listed = list(f.evidence.scaler_failures.get(f.name) or ())
    if not listed and not f.m.scale_errors:
        return None
    if quota != any(word in " ".join(listed).lower() for word in QUOTA_WORDS):
        return None
    return {"errors": "; ".join(listed[:2] or [f"{number(f.m.scale_errors or 0)} scale-up errors"])}


def _org_short(f: Facts) -> Cited:
    """Several types queue below their maximum, each short of what was asked for longer than a
    boot: one type's nodes do not explain it."""
    short = []
    for other, m in f.fleet.items():
        queueing = (m.queued or 0) > 0
        below = m.maximum is not None and m.registered is not None and m.registered < m.maximum
        wanting = m.desired is not None and m.registered is not None and m.desired > m.registered
        if not (queueing and below and wanting):
            if queueing:
                return None  # a type at its maximum, or getting its runners: not a shared limit
            continue
        since = _short_since(f, other)
        if since is None or since < f.evidence.boot_mins:
            return None
        short.append(other)
    if f.name not in short or len(short) < 2:
        return None
    return {"count": len(short), "types": ", ".join(sorted(short)[:4])}


def _offline(f: Facts) -> Cited:
    offline = f.m.offline or 0
    if offline <= 0 or (f.m.queued or 0) <= 0:
        return None
    return {"offline": number(offline), "total": number((f.m.registered or 0) + offline)}


def _unregistered(f: Facts) -> Cited:
    """More runners asked for than registered for longer than a boot."""
    m, boot_mins = f.m, f.evidence.boot_mins
    if _offline(f) or m.desired is None or m.registered is None or m.desired <= m.registered:
        return None
    if m.pods is not None and m.pods.cannot_start >= m.desired - m.registered:
        return None  # the pods' own cause says why, with the pods' numbers
    since = _short_since(f, f.name)
    if since is None:
        return "runners not registering needs readings over time"
    if since < boot_mins:
        return None
    wants, has = number(m.desired), number(m.registered)
    return {"wants": wants, "has": has, "since": minutes(since), "boot": minutes(boot_mins)}


def _surge(f: Facts) -> Cited:
    if (surge := f.evidence.surges.get(f.name)) is not None:
        ratio = arrival_ratio(f.m)
        if not surge.history and ratio is not None and ratio < SURGE:
            # No day before to compare, and the type's arrivals at their usual rate: the
            # workflow's usual share of a queue that capacity left, not a surge.
            return None
        return {"surge": surge.text, "workflow": surge.workflow}
    return f"a workflow's surge {f.evidence.jobs_note}" if f.evidence.jobs_note else None


def arrival_ratio(m: RunnerTypeMetrics) -> float | None:
    """The type's job arrivals against their baseline, where both are read."""
    now, usual = m.arrival_per_min, m.arrival_baseline_per_min
    return now / usual if now is not None and usual else None


def _slower(f: Facts) -> Cited:
    slower = list(f.evidence.slower.get(f.name, ()))[:3]
    if not slower:
        return None
    names, said = ", ".join(s.workflow for s in slower), "; ".join(s.text for s in slower)
    return {"workflows": names, "said": said}


def _stuck(count: float | None, **cited: str) -> Cited:
    """Pods (or nodes) in trouble: their number, plural or not, and what else is cited."""
    if not count or count <= 0:
        return None
    return {"count": number(count), "s": "" if count == 1 else "s", **cited}


def _nodes(pods: RunnerPods, *, disk: bool) -> Cited:
    return [
        {
            "node": node.node,
            "on": f"{number(node.pods)} runner pod{'' if node.pods == 1 else 's'} on it"
            if node.pods
            else "runner pods run on it",
            "busy": f" {node.busy:.0%} of the time" if node.busy is not None else "",
            "state": "not Ready" if node.condition == "NotReady" else f"under {node.condition}",
            "fix": NODE_FIX.get(node.condition, "cordon and replace it"),
        }
        for node in pods.nodes
        if (node.condition == DISK) is disk
    ]


def _oom(pods: RunnerPods, *, on_nodes: bool) -> Cited:
    """The pods seen killed name their workflows; the nodes' counter sees every kill: the larger
    is the count."""
    seen, kills = pods.oom_kills or 0, pods.node_oom_kills or 0
    if (seen <= 0 and kills < NODE_OOM_KILLS) or (kills > seen) is not on_nodes:
        return None  # the kernel counts any process: one kill of a daemon is no runners' cause
    named = ", ".join(f"{workflow} {count}" for workflow, count in pods.oom_workflows)
    named = f" ({named or pods.oom_naming})" if named or pods.oom_naming else ""
    return {
        "times": _times(seen),
        "named": named,
        "kills": f"{number(kills)} OOM kill" + ("" if kills == 1 else "s"),
        "seen": f"; jobs seen OOMKilled {_times(seen)}{named}" if seen else "",
        "restarts": f", {number(pods.restarts)} restarts" if pods.restarts else "",
    }


def _throttled(f: Facts) -> Cited:
    share = f.pods.cpu_throttled
    if share is None or share < THROTTLED:
        return None
    # Against the day before, as `RunnerTypeMetrics` reads it.
    now, before = finite(f.m.job_duration_mins), finite(f.m.duration_baseline_mins)
    longer = f": jobs take {now / before:.1f}× as long as a day before" if now and before else ""
    return {"share": share, "longer": longer}


def _memory(pods: RunnerPods) -> Cited:
    share, kills = pods.memory_of_limit, max(pods.oom_kills or 0, pods.node_oom_kills or 0)
    if share is None or share < MEMORY_NEAR or kills > 0:
        return None  # with kills, the OOM cause says it
    return {"share": share}


WINDOW, CREATING = minutes(WINDOW_MINS), minutes(CREATING_MINS)
OOM_FIX = (
    "raise the runner's memory or move those jobs to a larger type; each kill reruns a job and "
    "lengthens the queue"
)
# Every cause named, the one whose fix comes first first. A pod that cannot start makes "more
# runners" the wrong advice: the new ones would wait the same.
RULES = (
    Rule(Cause.LISTENER_STALLED, Cause.INFRASTRUCTURE, _stalled,
         "{assigned} jobs assigned and unchanged for {held:.0f} min while {room}",
         "restart the ARC listener of {name} (delete its listener pod; the controller recreates "
         "it): scaling does not help while it takes no jobs"),
    Rule(Cause.SCALE_UP_FAILING, Cause.CONSTRAINTS, lambda f: _scale_errors(f, quota=True),
         "{errors}",
         "raise the quota the autoscaler hit, or move the type to an instance type with room"),
    Rule(Cause.SCALE_UP_FAILING, Cause.CONSTRAINTS, lambda f: _scale_errors(f, quota=False),
         "{errors}", "fix what the autoscaler reports for {name} before scaling further"),
    Rule(Cause.PODS_UNSCHEDULABLE, Cause.CONSTRAINTS,
         lambda f: _stuck(f.pods.unschedulable, since=_for(f.pods.unschedulable_mins)),
         "{count} runner pod{s} Pending{since}: no node fits (unschedulable)",
         "the node group is at its limit or out of the resource the pods request (GPUs, "
         "memory): look at the cluster autoscaler or Karpenter; raising maxRunners will not help",
         judged=True),
    Rule(Cause.IMAGE_PULL, Cause.INFRASTRUCTURE, lambda f: _stuck(f.pods.image_pull),
         "new runners fail to pull their image (ImagePullBackOff, {count} pods)",
         "check the runner image's tag and the registry's credentials or limits; roll back a new "
         "image; more runners would fail the same", judged=True),
    Rule(Cause.CONFIG_ERROR, Cause.INFRASTRUCTURE, lambda f: _stuck(f.pods.config_error),
         "{count} runner pod{s} cannot start (CreateContainerConfigError)",
         "a Secret or ConfigMap the runner pod names is missing: fix the scale set's pod "
         "template; more runners would fail the same", judged=True),
    Rule(Cause.CREATING, Cause.INFRASTRUCTURE, lambda f: _stuck(f.pods.creating),
         "{count} runner pod{s} ContainerCreating or PodInitializing for over " + CREATING
         + " on their node",
         "describe one of those pods: most often a large runner image still pulling on a new "
         "node (pre-pull it or bake it into the node image), else a volume that does not attach "
         "or mount, or no pod IP from the network plugin; more runners would wait the same",
         judged=True),
    Rule(Cause.ORG_LIMIT, Cause.CONSTRAINTS, _org_short,
         "{count} runner types queue below their maximum and none gets the runners asked for "
         "({types})",
         "check the organisation's limits: the cloud account's instance quota, GitHub's runner "
         "limit for the organisation or runner group"),
    Rule(Cause.NOT_REGISTERING, Cause.INFRASTRUCTURE, _offline,
         "{offline} of {total} runners offline while jobs wait",
         "look at the offline {name} runners (the node, the runner's service, its token)"),
    Rule(Cause.NOT_REGISTERING, Cause.INFRASTRUCTURE, _unregistered,
         "the autoscaler wants {wants} runners, {has} registered, for {since} (a boot takes about "
         "{boot})",
         "find why new {name} runners do not register (pods pending, image pulls, node capacity, "
         "the registration token) before asking for more"),
    Rule(Cause.NODE_PRESSURE, Cause.INFRASTRUCTURE, lambda f: _nodes(f.pods, disk=False),
         "node {node} {state}: {on}, which it may evict",
         "cordon {node} so no new runner lands there, then {fix}", judged=True),
    Rule(Cause.NODE_PRESSURE, Cause.INFRASTRUCTURE, lambda f: _stuck(f.pods.more_nodes),
         "and {count} more node{s} of these runners under pressure, not Ready or with busy disks",
         "`kubectl get nodes` and the node group's health: so many nodes at once is the node "
         "group or its image, not one node", judged=True),
    Rule(Cause.DISK_BUSY, Cause.INFRASTRUCTURE, lambda f: _nodes(f.pods, disk=True),
         "node {node} disk busy{busy}: {on}; jobs there wait on I/O",
         "cordon {node} and look for the jobs writing most on it (caches, Docker layers, "
         "artifacts); give runners faster disks (NVMe instance storage, more provisioned IOPS) "
         "or fewer runners per node", judged=True),
    Rule(Cause.OOM_KILLED, Cause.CONSTRAINTS, lambda f: _oom(f.pods, on_nodes=False),
         "jobs were OOMKilled {times} in " + WINDOW + "{named}{restarts}", OOM_FIX, judged=True),
    Rule(Cause.OOM_KILLED, Cause.CONSTRAINTS, lambda f: _oom(f.pods, on_nodes=True),
         "{kills} in " + WINDOW + " on the nodes these runners ran on (the kernel's count, of any "
         "process there){seen}{restarts}", OOM_FIX, judged=True),
    Rule(Cause.SURGE, Cause.WORKLOAD, _surge,
         "{surge}", "cancel or defer {workflow} if it can wait; scaling only buys time"),
    Rule(Cause.CPU_THROTTLED, Cause.CONSTRAINTS, _throttled,
         "runners CPU-throttled {share:.0%} of periods{longer}",
         "raise the runner container's CPU limit (or drop it and keep the request), or move the "
         "heavy jobs to a larger type", judged=True),
    Rule(Cause.MEMORY_NEAR_LIMIT, Cause.CONSTRAINTS, lambda f: _memory(f.pods),
         "a runner's memory working set is at {share:.0%} of its limit",
         "raise the runner's memory limit before jobs start being OOMKilled", judged=True),
    Rule(Cause.LONG_JOBS, None, _slower,
         "{said}",
         "find why {workflows} jobs got slower (a new test, a dependency, the runner image); "
         "scaling only buys time"),
)  # fmt: skip
FIRST = list(dict.fromkeys(rule.cause for rule in RULES))  # whose fix comes first, first
CASE_OF = {rule.cause: rule.case_of for rule in RULES if rule.case_of is not None}


def refined(facts: Facts) -> tuple[list[Found], list[str]]:
    """The causes found for the type, the first fix first, and what would tell the others."""
    found, missing = said(facts, (rule for rule in RULES if not rule.judged))
    # The runner pods' causes were judged with the reading: said as judged, never recomputed.
    if (judged := facts.m.judged) is not None:
        found += [Found(Cause(c.trouble.value), c.evidence, c.advice) for c in judged.causes]
    return sorted(found, key=lambda f: FIRST.index(f.cause)), missing


def pod_causes(m: RunnerTypeMetrics) -> tuple[PodCause, ...]:
    """What the reading's runner pods show, the first fix first; judged with the reading."""
    if m.pods is None:
        return ()
    found, _ = said(Facts("", m), (rule for rule in RULES if rule.judged))
    return tuple(
        PodCause(trouble=Trouble(f.cause), evidence=f.evidence, advice=f.advice) for f in found
    )


def _assigned_for(f: Facts) -> float | None:
    """Minutes the type's assigned jobs have read what they read now; None while the history is
    too short."""
    if f.now is None:
        return None
    oldest = f.now
    for point in f.evidence.history:  # newest first
        if point.gauges_of(f.name).get("assigned") != f.m.assigned:
            return (f.now - oldest) / timedelta(minutes=1)
        oldest = point.at
    held = (f.now - oldest) / timedelta(minutes=1)
    return held if held >= f.evidence.stall_mins else None


def _short_since(f: Facts, name: str) -> float | None:
    """Minutes `name` has had fewer runners registered than desired; None without a reading."""
    oldest: datetime | None = None
    for point in f.evidence.history if f.now else ():
        gauges = point.gauges_of(name)
        desired, registered = gauges.get("desired"), gauges.get("registered")
        if desired is None or registered is None:
            break
        if desired <= registered:
            return (f.now - oldest) / timedelta(minutes=1) if f.now and oldest else 0.0
        oldest = point.at
    return (f.now - oldest) / timedelta(minutes=1) if f.now and oldest else None


def _for(mins: float | None) -> str:
    return f" for {minutes(mins)}" if mins else ""


def _times(count: float) -> str:
    return "once" if count == 1 else f"{number(count)} times"
