"""Why a runner type's runners do not come up or run slowly, read from its pods and their nodes
(kube-state-metrics, cAdvisor, node-exporter): each cause with its numbers and the next step. A
pod that cannot start makes "more runners" the wrong advice: the new ones would wait the same."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from bot.domain.alerts import stored_short
from bot.domain.units import minutes, number

WINDOW_MINS = 30.0  # the default queries' `[30m]` for OOM kills and restarts
# Node OOM kills (any process) that make a cause when no runner pod was seen killed: a daemon
# killed once on a shared node pool is not the runners' trouble.
NODE_OOM_KILLS = 3
THROTTLED = 0.25  # a quarter of the CFS periods throttled slows every job noticeably
MEMORY_NEAR = 0.9  # the working set this close to the limit is one allocation from a kill
OOM_PODS_KEPT = 20  # the kills' pods kept with a reading: enough to name their workflows
# Creating containers this long after scheduling is stuck, not slow (the kubelet says
# ContainerCreating while it pulls a multi-GB image on a new node, which takes minutes).
CREATING_MINS = 5.0
DISK_BUSY = 0.9  # a node's disk busy this share of the time makes every job on it wait on I/O
# Nodes kept with a reading (stored in each incident): a cluster-wide problem names no node more
# usefully than five do.
NODES_KEPT = 5
# Stuck pods withhold the advice only as this share of those waiting to start: a few stuck among
# many booting say little about the next ones.
STUCK_SHARE = 0.5
KSM = "kube-state-metrics"
CADVISOR = "the kubelet's cAdvisor"
NODE_EXPORTER = "node-exporter"
# Each reading's series and their sources, its own first: it is known only when all are scraped.
# Each is present whenever its source is scraped (the Pending phase stands for the waiting
# reasons, which exist only while a pod waits); every query keeps the pods `kube_pod_owner` names.
OWNER = ("kube_pod_owner", KSM)
DISK = "DiskBusy"  # a node's condition in `RunnerPods.nodes` when node-exporter finds its disk busy
PHASE, CREATED = ("kube_pod_status_phase", KSM), ("kube_pod_created", KSM)
NEEDS: dict[str, tuple[tuple[str, str], ...]] = {
    "pods_pending": (PHASE, OWNER),
    "pending_mins": (CREATED, PHASE, OWNER),
    "unschedulable": (PHASE, CREATED, OWNER),
    "unschedulable_mins": (CREATED, PHASE, OWNER),
    "image_pull": (PHASE, CREATED, OWNER),
    "config_error": (PHASE, CREATED, OWNER),
    "creating": (PHASE, CREATED, OWNER),
    "oom_kills": (PHASE, OWNER),
    "restarts": (("kube_pod_container_status_restarts_total", KSM), OWNER),
    "cpu_throttled_periods": (("container_cpu_cfs_throttled_periods_total", CADVISOR), OWNER),
    "cpu_periods": (("container_cpu_cfs_periods_total", CADVISOR), OWNER),
    "memory_of_limit": (
        ("container_memory_working_set_bytes", CADVISOR),
        ("kube_pod_container_resource_limits", KSM),
        OWNER,
    ),
    "nodes": (("kube_node_status_condition", KSM), ("kube_pod_info", KSM), OWNER),
    # node-exporter's series name its own pod, not the node: `kube_pod_info` ties them.
    "disk_busy": (
        ("node_disk_io_time_seconds_total", NODE_EXPORTER),
        ("kube_pod_info", KSM),
        OWNER,
    ),
    # The kernel's count outlives the pods, which ARC deletes within seconds of a kill.
    "node_oom_kills": (("node_vmstat_oom_kill", NODE_EXPORTER), ("kube_pod_info", KSM), OWNER),
}
NODE_READINGS = ("nodes", "disk_busy")  # read into `RunnerPods.nodes`, not a number


def source_of(reading: str) -> str:
    return NEEDS[reading][0][1]


def not_scraped(reading: str, scraped: set[str]) -> str:
    """The source of the first series `reading` needs not in `scraped`; "" if none."""
    return next((source for series, source in NEEDS[reading] if series not in scraped), "")


SAID = {
    "pods_pending": "pods Pending",
    "pending_mins": "how long pods are Pending",
    "unschedulable": "unschedulable pods",
    "unschedulable_mins": "how long pods are unschedulable",
    "image_pull": "image pulls",
    "config_error": "container config errors",
    "creating": "pods stuck creating",
    "oom_kills": "OOM kills",
    "restarts": "restarts",
    "cpu_throttled_periods": "CPU throttling",
    "cpu_periods": "CPU throttling",
    "memory_of_limit": "memory against its limit",
    "nodes": "node conditions",
    "disk_busy": "disk I/O saturation",
    "node_oom_kills": "OOM kills on the nodes",
}


class Trouble(StrEnum):
    UNSCHEDULABLE = "Runner pods cannot be scheduled"
    IMAGE_PULL = "Runner image not pulled"
    CONFIG_ERROR = "Runner pods misconfigured"
    CREATING = "Runner pods stuck creating"
    OOM_KILLED = "Jobs OOMKilled"
    NODE_PRESSURE = "Nodes under pressure"
    DISK_BUSY = "Node disks saturated"
    CPU_THROTTLED = "Runners CPU-throttled"
    MEMORY_NEAR_LIMIT = "Runners near their memory limit"


class NodeTrouble(BaseModel):
    model_config = ConfigDict(frozen=True, **stored_short("condition=c pods=p busy=b"))

    node: str
    # DiskPressure, MemoryPressure, PIDPressure, NotReady, or DiskBusy (node-exporter's)
    condition: str
    pods: float = 0  # the type's runner pods on it
    busy: float | None = None  # DiskBusy: the share of time its busiest disk was busy


class RunnerPods(BaseModel):
    """One runner type's pods at one reading; None: not read (its series not scraped)."""

    model_config = ConfigDict(
        frozen=True,
        **stored_short(
            "pods_pending=pp pending_mins=pm unschedulable=un unschedulable_mins=um image_pull=ip "
            "config_error=ce creating=cr oom_kills=oom oom_pods=oomp restarts=rs "
            "cpu_throttled_periods=thp cpu_periods=cp memory_of_limit=mem nodes=n more_nodes=n+ "
            "unknown=u oom_workflows=oomw oom_naming=oomn node_oom_kills=noom"
        ),
    )

    pods_pending: float | None = None
    pending_mins: float | None = None  # the oldest Pending pod's age
    # No node fits for longer than a new node takes to come up.
    unschedulable: float | None = None
    unschedulable_mins: float | None = None  # the oldest of those
    image_pull: float | None = None
    config_error: float | None = None
    creating: float | None = None
    # A sample: ARC deletes a killed runner's pod within seconds, often before a scrape.
    oom_kills: float | None = None
    # (name, uid): ARC recreates a failed runner's pod under its name, so the uid tells one kill
    # from the next; the name is the job's runner_name.
    oom_pods: tuple[tuple[str, str], ...] = ()
    oom_workflows: tuple[tuple[str, int], ...] = ()  # most kills first (`bot.domain.fleet`)
    oom_naming: str = ""  # how to get them named where no jobs source can
    # Every kill on the pods' nodes, of any process (a node of several types counts for each).
    node_oom_kills: float | None = None
    restarts: float | None = None  # of all the pods' containers, sidecars too
    # CFS periods per second of the runner and dind containers, summed over the type's pods.
    cpu_throttled_periods: float | None = None
    cpu_periods: float | None = None
    # The fullest runner or dind container's working set over its own limit.
    memory_of_limit: float | None = None
    nodes: tuple[NodeTrouble, ...] = ()  # the worst `NODES_KEPT`
    more_nodes: int = 0  # the other nodes in trouble, not kept
    unknown: str = ""  # what could not be read, and the source that would tell

    @property
    def cpu_throttled(self) -> float | None:
        """None without both readings; 0 without periods (no runner with a CPU limit ran)."""
        if self.cpu_throttled_periods is None or self.cpu_periods is None:
            return None
        return self.cpu_throttled_periods / self.cpu_periods if self.cpu_periods > 0 else 0.0

    @property
    def cannot_start(self) -> int:
        readings = (self.unschedulable, self.image_pull, self.config_error, self.creating)
        return round(sum(n or 0 for n in readings))

    @property
    def withholding(self) -> int:
        """`cannot_start` when they are `STUCK_SHARE` of the pods waiting to start; else 0."""
        stuck = self.cannot_start
        waiting = max(self.pods_pending or 0, stuck)
        return stuck if stuck and stuck >= STUCK_SHARE * waiting else 0


class PodCause(BaseModel):
    model_config = ConfigDict(frozen=True, **stored_short("trouble=t evidence=e advice=a"))

    trouble: Trouble
    evidence: str
    advice: str


SOURCE_SAID = {
    KSM: "pods Pending, image pulls, OOM kills, node conditions",
    CADVISOR: "CPU throttling, memory against its limit",
    NODE_EXPORTER: "disk I/O saturation, OOM kills on the nodes",
}


def unknown_said(missing: dict[str, str]) -> str:
    """ "CPU throttling, memory against its limit not known (the kubelet's cAdvisor is not
    scraped)": one clause per source."""
    by_source: dict[str, list[str]] = {}
    for reading, source in missing.items():
        by_source.setdefault(source, []).append(reading)
    clauses = []
    for source, readings in by_source.items():
        own = {r for r in NEEDS if source_of(r) == source}
        if own <= set(readings):  # the source's own said short, then others that need it
            rest = [SAID.get(r, r) for r in readings if r not in own]
            said = ", ".join(dict.fromkeys([SOURCE_SAID[source], *rest]))
        else:
            said = ", ".join(dict.fromkeys(SAID.get(r, r) for r in readings))
        clauses.append(f"{said} not known ({source} is not scraped)")
    return "; ".join(clauses)


def pod_causes(pods: RunnerPods | None, *, slower: float | None = None) -> tuple[PodCause, ...]:
    """Worst first; `slower`: jobs' duration against the day before."""
    if pods is None:
        return ()
    found = [
        _unschedulable(pods),
        _waiting(pods.image_pull, Trouble.IMAGE_PULL),
        _waiting(pods.config_error, Trouble.CONFIG_ERROR),
        _waiting(pods.creating, Trouble.CREATING),
        *(_node(node) for node in pods.nodes),
        _more_nodes(pods.more_nodes),
        _oom(pods),
        _throttled(pods.cpu_throttled, slower),
        _memory(pods.memory_of_limit, max(pods.oom_kills or 0, pods.node_oom_kills or 0)),
    ]
    return tuple(cause for cause in found if cause is not None)


def _unschedulable(pods: RunnerPods) -> PodCause | None:
    stuck = pods.unschedulable or 0
    if stuck <= 0:
        return None
    since = f" for {minutes(pods.unschedulable_mins)}" if pods.unschedulable_mins else ""
    return PodCause(
        trouble=Trouble.UNSCHEDULABLE,
        evidence=f"{_pods(stuck)} Pending{since}: no node fits (unschedulable)",
        advice="the node group is at its limit or out of the resource the pods request "
        "(GPUs, memory): look at the cluster autoscaler or Karpenter; raising maxRunners "
        "will not help",
    )


def _waiting(count: float | None, trouble: Trouble) -> PodCause | None:
    if not count or count <= 0:
        return None
    evidence, advice = {
        Trouble.IMAGE_PULL: (
            f"new runners fail to pull their image (ImagePullBackOff, {number(count)} pods)",
            "check the runner image's tag and the registry's credentials or limits; roll back a "
            "new image; more runners would fail the same",
        ),
        Trouble.CREATING: (
            f"{_pods(count)} ContainerCreating or PodInitializing for over "
            f"{minutes(CREATING_MINS)} on their node",
            "describe one of those pods: most often a large runner image still pulling on a new "
            "node (pre-pull it or bake it into the node image), else a volume that does not "
            "attach or mount, or no pod IP from the network plugin; more runners would wait the "
            "same",
        ),
        Trouble.CONFIG_ERROR: (
            f"{_pods(count)} cannot start (CreateContainerConfigError)",
            "a Secret or ConfigMap the runner pod names is missing: fix the scale set's pod "
            "template; more runners would fail the same",
        ),
    }[trouble]
    return PodCause(trouble=trouble, evidence=evidence, advice=advice)


def _node(node: NodeTrouble) -> PodCause:
    on = f"{_pods(node.pods)} on it" if node.pods else "runner pods run on it"
    if node.condition == DISK:
        busy = f" {node.busy:.0%} of the time" if node.busy is not None else ""
        return PodCause(
            trouble=Trouble.DISK_BUSY,
            evidence=f"node {node.node} disk busy{busy}: {on}; jobs there wait on I/O",
            advice=f"cordon {node.node} and look for the jobs writing most on it (caches, "
            "Docker layers, artifacts); give runners faster disks (NVMe instance storage, "
            "more provisioned IOPS) or fewer runners per node",
        )
    state = "not Ready" if node.condition == "NotReady" else f"under {node.condition}"
    fix = {
        "DiskPressure": "free or grow its disk (runner work directories, images) or replace it",
        "MemoryPressure": "replace it or lower the runners packed on it",
        "PIDPressure": "replace it; look for jobs leaving processes behind",
    }.get(node.condition, "cordon and replace it")
    return PodCause(
        trouble=Trouble.NODE_PRESSURE,
        evidence=f"node {node.node} {state}: {on}, which it may evict",
        advice=f"cordon {node.node} so no new runner lands there, then {fix}",
    )


def _more_nodes(more: int) -> PodCause | None:
    if more <= 0:
        return None
    nodes = "node" if more == 1 else "nodes"
    return PodCause(
        trouble=Trouble.NODE_PRESSURE,
        evidence=f"and {more} more {nodes} of these runners under pressure, not Ready or with "
        "busy disks",
        advice="`kubectl get nodes` and the node group's health: so many nodes at once is the "
        "node group or its image, not one node",
    )


def _oom(pods: RunnerPods) -> PodCause | None:
    """The pods seen killed name their workflows; the nodes' counter sees every kill: the larger
    is the count, said for what it is."""
    seen, on_nodes = pods.oom_kills or 0, pods.node_oom_kills or 0
    if seen <= 0 and on_nodes < NODE_OOM_KILLS:
        return None  # the kernel counts any process: one kill of a daemon is no runners' cause
    restarts = f", {number(pods.restarts)} restarts" if pods.restarts else ""
    named = ", ".join(f"{workflow} {count}" for workflow, count in pods.oom_workflows)
    named = f" ({named or pods.oom_naming})" if named or pods.oom_naming else ""
    window = minutes(WINDOW_MINS)
    evidence = f"jobs were OOMKilled {_times(seen)} in {window}{named}"
    if on_nodes > seen:
        kills = "OOM kill" + ("" if on_nodes == 1 else "s")
        evidence = (
            f"{number(on_nodes)} {kills} in {window} on the nodes these runners ran on "
            "(the kernel's count, of any process there)"
        )
        if seen:
            evidence += f"; jobs seen OOMKilled {_times(seen)}{named}"
    return PodCause(
        trouble=Trouble.OOM_KILLED,
        evidence=evidence + restarts,
        advice="raise the runner's memory or move those jobs to a larger type; "
        "each kill reruns a job and lengthens the queue",
    )


def _throttled(share: float | None, slower: float | None) -> PodCause | None:
    if share is None or share < THROTTLED:
        return None
    longer = f": jobs take {slower:.1f}× as long as a day before" if slower else ""
    return PodCause(
        trouble=Trouble.CPU_THROTTLED,
        evidence=f"runners CPU-throttled {share:.0%} of periods{longer}",
        advice="raise the runner container's CPU limit (or drop it and keep the request), "
        "or move the heavy jobs to a larger type",
    )


def _memory(share: float | None, kills: float | None) -> PodCause | None:
    if share is None or share < MEMORY_NEAR or (kills or 0) > 0:
        return None  # with kills, the OOM cause says it
    return PodCause(
        trouble=Trouble.MEMORY_NEAR_LIMIT,
        evidence=f"a runner's memory working set is at {share:.0%} of its limit",
        advice="raise the runner's memory limit before jobs start being OOMKilled",
    )


def kept_nodes(troubles: list[NodeTrouble]) -> tuple[tuple[NodeTrouble, ...], int]:
    """The worst `NODES_KEPT` (most runner pods first), and how many other nodes are in trouble."""
    worst = sorted(troubles, key=lambda n: (-n.pods, -(n.busy or 0), n.node, n.condition))
    kept = tuple(worst[:NODES_KEPT])
    shown = {n.node for n in kept}
    return kept, len({n.node for n in worst[NODES_KEPT:]} - shown)


def _times(count: float) -> str:
    return "once" if count == 1 else f"{number(count)} times"


def _pods(count: float) -> str:
    return f"{number(count)} runner pod" + ("" if count == 1 else "s")
