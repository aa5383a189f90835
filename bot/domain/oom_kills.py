"""The workflows behind the jobs OOMKilled: ARC registers a runner under its pod's name, so a
GitHub job's `runner_name` names the pod killed for memory (`RunnerPods.oom_pods`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from bot.domain.fleet import FleetSnapshot

KEEP_DAYS = 8  # kills recorded for the weekly report: its window, and a day's grace
WORKFLOWS_NAMED = 5  # per runner type, most kills first: the rest are in the count
WORKFLOW_CHARS = 100  # a workflow's name as kept with a reading and in the record
# Said beside kills no jobs source can name, once per cause.
NAMING = "`JOBS_BACKEND=github` names their workflows"

Pod = tuple[str, str]  # (pod name, uid)


@dataclass(frozen=True)
class OomKill:
    runner_type: str
    pod: str
    uid: str
    workflow: str = ""  # "" when no job listed ran on the pod
    at: datetime | None = None  # when a reading first saw it (from the record)


def kills_of(fleet: FleetSnapshot) -> list[OomKill]:
    return [
        OomKill(name, pod, uid)
        for name, metrics in fleet.runner_types.items()
        if metrics.pods is not None
        for pod, uid in metrics.pods.oom_pods
    ]


def ranked(workflows: Iterable[str], kept: int = WORKFLOWS_NAMED) -> tuple[tuple[str, int], ...]:
    """(workflow, kills), most first, the unnamed ("") left out."""
    counted = Counter(w[:WORKFLOW_CHARS] for w in workflows if w)
    return tuple(sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:kept])


def with_workflows(fleet: FleetSnapshot, named: Mapping[Pod, str], naming: str) -> FleetSnapshot:
    """`fleet` with its OOM kills named (`named`), or how to get them named (`naming`); the pods
    are left out: the record keeps them, and the reading is stored in every incident."""
    types = {}
    for name, metrics in fleet.runner_types.items():
        pods = metrics.pods
        if pods is not None and pods.oom_pods:
            workflows = ranked(named.get(pod, "") for pod in pods.oom_pods)
            update = {
                "oom_workflows": workflows,
                "oom_naming": "" if workflows else naming,
                "oom_pods": (),
            }
            metrics = metrics.model_copy(update={"pods": pods.model_copy(update=update)})
        types[name] = metrics
    return fleet.model_copy(update={"runner_types": types})
