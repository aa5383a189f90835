"""A runner type's pods and their nodes as read (kube-state-metrics, cAdvisor, node-exporter),
the series each reading needs and what a source not scraped leaves unknown."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from bot.domain.alerting.alerts import stored_short

WINDOW_MINS = 30.0  # the default queries' `[30m]` for OOM kills and restarts
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
# Each reading: what it is called where it is not known, then its series and their sources, its
# own first: it is known only when all are scraped (the Pending phase stands for the waiting
# reasons, which exist only while a pod waits).
OWNER = ("kube_pod_owner", KSM)
DISK = "DiskBusy"  # a node's condition in `RunnerPods.nodes` when node-exporter finds its disk busy
PHASE, CREATED = ("kube_pod_status_phase", KSM), ("kube_pod_created", KSM)
POD_INFO = ("kube_pod_info", KSM)
_READINGS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "pods_pending": ("pods Pending", (PHASE, OWNER)),
    "pending_mins": ("how long pods are Pending", (CREATED, PHASE, OWNER)),
    "no_node": ("pods waiting for a node", (PHASE, OWNER)),
    "unschedulable": ("unschedulable pods", (PHASE, CREATED, OWNER)),
    "unschedulable_mins": ("how long pods are unschedulable", (CREATED, PHASE, OWNER)),
    "image_pull": ("image pulls", (PHASE, CREATED, OWNER)),
    "config_error": ("container config errors", (PHASE, CREATED, OWNER)),
    "creating": ("pods stuck creating", (PHASE, CREATED, OWNER)),
    "oom_kills": ("OOM kills", (PHASE, OWNER)),
    "restarts": ("restarts", (("kube_pod_container_status_restarts_total", KSM), OWNER)),
    "cpu_throttled_periods": (
        "CPU throttling",
        (("container_cpu_cfs_throttled_periods_total", CADVISOR), OWNER),
    ),
    "cpu_periods": ("CPU throttling", (("container_cpu_cfs_periods_total", CADVISOR), OWNER)),
    "memory_of_limit": (
        "memory against its limit",
        (
            ("container_memory_working_set_bytes", CADVISOR),
            ("kube_pod_container_resource_limits", KSM),
            OWNER,
        ),
    ),
    "nodes": ("node conditions", (("kube_node_status_condition", KSM), POD_INFO, OWNER)),
    # node-exporter's series name its own pod, not the node: `kube_pod_info` ties them.
    "disk_busy": (
        "disk I/O saturation",
        (("node_disk_io_time_seconds_total", NODE_EXPORTER), POD_INFO, OWNER),
    ),
    # The kernel's count outlives the pods, which ARC deletes within seconds of a kill.
    "node_oom_kills": (
        "OOM kills on the nodes",
        (("node_vmstat_oom_kill", NODE_EXPORTER), POD_INFO, OWNER),
    ),
}
NEEDS = {reading: series for reading, (_, series) in _READINGS.items()}
SAID = {reading: said for reading, (said, _) in _READINGS.items()}
NODE_READINGS = ("nodes", "disk_busy")  # read into `RunnerPods.nodes`, not a number


def source_of(reading: str) -> str:
    return NEEDS[reading][0][1]


def not_scraped(reading: str, scraped: set[str]) -> str:
    """The source of the first series `reading` needs not in `scraped`; "" if none."""
    return next((source for series, source in NEEDS[reading] if series not in scraped), "")


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
            "pods_pending=pp pending_mins=pm no_node=nn unschedulable=un unschedulable_mins=um "
            "image_pull=ip "
            "config_error=ce creating=cr oom_kills=oom oom_pods=oomp restarts=rs "
            "cpu_throttled_periods=thp cpu_periods=cp memory_of_limit=mem nodes=n more_nodes=n+ "
            "unknown=u oom_workflows=oomw oom_naming=oomn node_oom_kills=noom"
        ),
    )

    pods_pending: float | None = None
    pending_mins: float | None = None  # the oldest Pending pod's age
    # No node fits yet, at any age: a node may be on its way (a cluster autoscaler's), or not.
    no_node: float | None = None
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
    oom_workflows: tuple[tuple[str, int], ...] = ()  # most kills first (`bot.domain.reading.fleet`)
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


def kept_nodes(troubles: list[NodeTrouble]) -> tuple[tuple[NodeTrouble, ...], int]:
    """The worst `NODES_KEPT` (most runner pods first), and how many other nodes are in trouble."""
    worst = sorted(troubles, key=lambda n: (-n.pods, -(n.busy or 0), n.node, n.condition))
    kept = tuple(worst[:NODES_KEPT])
    return kept, len({n.node for n in worst[NODES_KEPT:]} - {n.node for n in kept})
