"""The fleet at one moment, by runner type, what the history keeps of a past reading, and the
runner pods it saw OOM-killed. Every number is optional: each backend knows different things."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from bot.domain.alerting.alerts import RunnerQueue, stored_short
from bot.domain.queue_cost.jobs import JobsView
from bot.domain.reading.judgement import Judgement
from bot.domain.reading.runner_names import type_named
from bot.domain.reading.runner_pods import NEEDS, RunnerPods
from bot.domain.units import minutes


class RunnerTypeMetrics(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        **stored_short(
            "queued=q assigned=asg longest_wait_mins=w registered=reg offline=off minimum=min "
            "maximum=max desired=want arrival_per_min=in started_per_min=start "
            "completed_per_min=out job_duration_mins=dur arrival_baseline_per_min=in0 "
            "duration_baseline_mins=dur0 scale_errors=err wait_over=w+ wait_of_starts=ws "
            "wait_unknown=w? pods=pd judged=j"
        ),
    )

    queued: float | None = None
    # Queued or running (ARC: gha_assigned_jobs): frozen while runners idle, a listener stalled.
    assigned: float | None = None
    longest_wait_mins: float | None = None
    # More than `longest_wait_mins`, by how much nobody knows (a quantile in the `+Inf` bucket);
    # with no number, a wait not known to be under any (a jobs listing that failed this reading).
    wait_over: bool | None = None
    # The slowest recent start (ARC's startup histogram), not the oldest queued job's age.
    wait_of_starts: bool | None = None
    # Why this reading knows no wait, where its source says more than the backend's own reason.
    wait_unknown: str | None = None
    registered: float | None = None
    busy: float | None = None
    idle: float | None = None
    offline: float | None = None
    minimum: float | None = None
    maximum: float | None = None
    desired: float | None = None  # what the autoscaler targets now (ARC: gha_desired_runners)
    arrival_per_min: float | None = None  # jobs queued per minute: the demand
    started_per_min: float | None = None  # jobs a runner picked up per minute
    completed_per_min: float | None = None  # jobs finished per minute: the throughput
    job_duration_mins: float | None = None
    arrival_baseline_per_min: float | None = None  # the same hour on earlier days, or before
    duration_baseline_mins: float | None = None
    scale_errors: float | None = None  # scale-up failures in the recent window
    pods: RunnerPods | None = None  # its runner pods and their nodes (kube-state-metrics, cAdvisor)
    judged: Judgement | None = None  # what this reading means, decided once as it arrived


# What a query may read: every number of a reading, and each of its runner pods'.
_NOT_READ = {"wait_over", "wait_of_starts", "wait_unknown", "judged", "pods"}
FIELDS = frozenset(RunnerTypeMetrics.model_fields) - _NOT_READ | frozenset(NEEDS)


def unknown_fields(queries: Mapping[str, str]) -> list[str]:
    """Query names that are no field of a reading: a typo would otherwise be ignored."""
    return sorted(set(queries) - FIELDS)


class FleetSnapshot(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: datetime
    source: str  # "alert", "prometheus", ...: which backend said so
    runner_types: dict[str, RunnerTypeMetrics] = Field(default_factory=dict)
    note: str = ""  # said to the reader: e.g. the alert's numbers stand in for a failed backend
    # A type the reading lacks has nothing queued: the source lists every type that queues (the
    # HUD). False: nobody knows (a Prometheus series vanishes while its listener is recreated).
    absent_means_empty: bool = False
    # The source counts only jobs queued longer than this (the HUD's `queuedThresholdMinutes`).
    queued_over_mins: float | None = None
    # The source is read no more often than this, to keep its quota (GitHub's). None: every
    # METRICS_INTERVAL_SECONDS.
    paced_s: float | None = None
    # An incident's view: followed types absent ("none queued over N min"), those without
    # numbers (no drain while any is), and the types left out to keep its state small.
    absent: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    hidden: int = 0
    hidden_queueing: int = 0

    @property
    def is_live(self) -> bool:
        return self.source != "alert"


def with_job_waits(fleet: FleetSnapshot, jobs: JobsView | None, listing: str) -> FleetSnapshot:
    """`fleet` with each type's wait the age of its oldest queued job, as the jobs `listing` read
    it (`jobs`: None when it failed). Where it names none of a type's queued jobs, the backend's
    wait stands only if it is of the same measure: a slowest recent start would switch the
    type's line, peak and chart to the other measure for one reading."""
    types = {}
    for name, metrics in fleet.runner_types.items():
        oldest = _oldest_age(jobs, name) if jobs is not None else None
        alike = metrics.longest_wait_mins is not None and not metrics.wait_of_starts
        empty = jobs is not None and jobs.complete and not metrics.queued
        if oldest is not None or not alike or empty:
            why = None if oldest is not None or not metrics.queued else unlisted(jobs, listing)
            # A listing that failed or was cut short bounds no wait: its queue is not known to be
            # drained (`wait_over` with no number: not known to be under any).
            cut = jobs is None or (not jobs.complete and jobs.listed_over_mins is None)
            over = (bool(why) and cut) or None
            wait = {"longest_wait_mins": oldest, "wait_over": over, "wait_of_starts": None}
            metrics = metrics.model_copy(update={**wait, "wait_unknown": why})
        types[name] = metrics
    return fleet.model_copy(update={"runner_types": types})


def _oldest_age(jobs: JobsView, runner_type: str) -> float | None:
    listed = jobs.runner_types.get(jobs.name_of(runner_type))
    waits = [w.longest_wait_mins for w in listed.workflows] if listed else []
    return max((wait for wait in waits if wait is not None), default=None)


def unlisted(jobs: JobsView | None, listing: str) -> str:
    """Why `listing` gave a queueing type no oldest job this reading, in a responder's words."""
    if jobs is None:
        return f"{listing} could not list the queued jobs this reading"
    if jobs.listed_over_mins is not None:
        over = minutes(jobs.listed_over_mins)
        return f"{listing} lists none of them yet (it lists a job once it has queued {over})"
    if not jobs.complete:
        return f"{listing}'s listing was cut short this reading and names none of them"
    return f"{listing} lists none of them this reading"


SOURCE_NAMES = {
    "alert": "the alert",
    "prometheus": "Prometheus",
    "github": "GitHub",
    "hud": "the HUD",
}


def source_name(source: str) -> str:
    return SOURCE_NAMES.get(source, source)


Q = TypeVar("Q", RunnerQueue, RunnerTypeMetrics)
V = TypeVar("V")


def longest_wait(queues: Iterable[Q]) -> Q | None:
    """The queue of the longest wait read; a wait "over" a number ranks above that number."""
    waited = [q for q in queues if q.longest_wait_mins is not None]
    return max(waited, key=lambda q: (q.longest_wait_mins or 0, bool(q.wait_over)), default=None)


def of_measure(queues: Iterable[Q], *, starts: bool) -> list[Q]:
    """The queues whose wait is of one measure: the slowest recent start (`starts`), else the
    oldest queued job's age. The two are never ranked, compared or peaked together."""
    return [q for q in queues if bool(q.wait_of_starts) == starts]


def measured(
    mins: float | None, types: Iterable[RunnerQueue], *, starts: bool = False
) -> RunnerQueue:
    """The wait `mins` of one measure, with how it was read (a wait "over" a bound): the type's
    that read it, else a plain wait of that measure."""
    worst = longest_wait(of_measure(types, starts=starts))
    if worst is not None and worst.longest_wait_mins == mins:
        return worst
    return RunnerQueue(longest_wait_mins=mins, wait_of_starts=starts or None)


def worst_first(types: Mapping[str, Q]) -> list[tuple[str, Q]]:
    """Longest wait first, then most queued; unknown numbers sort last, names break ties."""

    def key(item: tuple[str, Q]) -> tuple[bool, float, bool, float, str]:
        name, queue = item
        wait, queued = queue.longest_wait_mins, queue.queued
        return (wait is None, -(wait or 0), queued is None, -(queued or 0), name)

    return sorted(types.items(), key=key)


@dataclass(frozen=True)
class Reading:
    """The newest good fleet reading, and why the latest refresh failed, if it did."""

    fleet: FleetSnapshot | None
    tried_at: datetime
    error: str = ""

    def encode(self) -> str:
        fleet = self.fleet.model_dump(mode="json", exclude_none=True) if self.fleet else None
        return json.dumps(
            {"fleet": fleet, "tried_at": self.tried_at.isoformat(), "error": self.error}
        )

    @classmethod
    def decode(cls, raw: str) -> Reading:
        data = json.loads(raw)
        fleet = FleetSnapshot.model_validate(data["fleet"]) if data.get("fleet") else None
        return cls(fleet, datetime.fromisoformat(data["tried_at"]), str(data.get("error") or ""))


# What the history keeps of a troubled type for causes and the next readings' direction, and of
# a type advised runners, what the next readings hold the advice from (`Advised`).
GAUGES = ("queued", "assigned", "busy", "desired", "registered", "idle", "maximum")
ADVISED = {"own": "own", "sup": "supply", "adv": "wanted"}


@dataclass(frozen=True)
class HistoryPoint:
    at: datetime
    arrival_per_min: dict[str, float]
    job_duration_mins: dict[str, float]
    gauges: dict[str, dict[str, float]] = field(default_factory=dict)  # `troubled_gauges`

    def gauges_of(self, runner_type: str) -> dict[str, float]:
        return of_type(self.gauges, runner_type) or {}


def troubled_gauges(types: Mapping[str, RunnerTypeMetrics]) -> dict[str, dict[str, float]]:
    """The `GAUGES` of types with jobs queued, assigned or running (the early warning's trend
    starts before anything queues), short of runners or advised some."""
    kept = {}
    for name, m in types.items():
        short = m.desired is not None and m.registered is not None and m.desired > m.registered
        j = m.judged
        advised = j is not None and (j.own > 0 or j.wanted > 0)
        if (m.queued or 0) > 0 or (m.assigned or 0) > 0 or (m.busy or 0) > 0 or short or advised:
            values = {g: getattr(m, g) for g in GAUGES}
            if advised:
                values |= {key: getattr(j, field) for key, field in ADVISED.items()}
            kept[name] = {g: float(v) for g, v in values.items() if v is not None}
    return kept


def of_type(types: Mapping[str, V], runner_type: str) -> V | None:
    """`runner_type`'s entry, named as the reading or an alert names it."""
    name = type_named(types, runner_type)
    return None if name is None else types[name]


def judged_of(view: FleetSnapshot | None, runner_type: str) -> Judgement | None:
    """`runner_type`'s judgement in a live reading (None: not read live, or not judged)."""
    metrics = of_type(view.runner_types, runner_type) if view and view.is_live else None
    return metrics.judged if metrics is not None else None


# The workflows behind the jobs OOMKilled: ARC registers a runner under its pod's name, so a
# GitHub job's `runner_name` names the pod killed for memory (`RunnerPods.oom_pods`).
OOM_KEEP_DAYS = 8  # kills recorded for the weekly report: its window, and a day's grace
WORKFLOWS_NAMED = 5  # per runner type, most kills first: the rest are in the count
WORKFLOW_CHARS = 100  # a workflow's name as kept with a reading and in the record
# Said beside kills no jobs source can name, once per cause.
OOM_NAMING = "`JOBS_BACKEND=github` names their workflows"

KilledPod = tuple[str, str]  # (pod name, uid)


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


def ranked_workflows(workflows: Iterable[str]) -> tuple[tuple[str, int], ...]:
    """(workflow, kills), most first, the unnamed ("") left out."""
    counted = Counter(w[:WORKFLOW_CHARS] for w in workflows if w)
    return tuple(sorted(counted.items(), key=lambda item: (-item[1], item[0]))[:WORKFLOWS_NAMED])


def with_workflows(
    fleet: FleetSnapshot, named: Mapping[KilledPod, str], naming: str
) -> FleetSnapshot:
    """`fleet` with its OOM kills named (`named`), or how to get them named (`naming`); the pods
    are left out (the record keeps them, and the reading is stored in every incident)."""
    types = {}
    for name, metrics in fleet.runner_types.items():
        pods = metrics.pods
        if pods is not None and pods.oom_pods:
            workflows = ranked_workflows(named.get(pod, "") for pod in pods.oom_pods)
            update = {"oom_workflows": workflows, "oom_naming": "" if workflows else naming}
            pods = pods.model_copy(update={**update, "oom_pods": ()})
            metrics = metrics.model_copy(update={"pods": pods})
        types[name] = metrics
    return fleet.model_copy(update={"runner_types": types})
