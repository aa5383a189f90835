"""The jobs behind a queue: which workflows queue, from where, and which one surges (a periodic
job, a mass re-run, a `ciflow` tag): the fix for a surge is to cancel or defer it, not to scale."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from bot.domain import units
from bot.domain.reading.runner_names import type_named

# (runner type, workflow) -> a count
WorkflowCounts = Mapping[tuple[str, str], int]

MAIN_BRANCHES = frozenset({"main", "master"})
SURGE_MIN_MORE = 5  # more arrivals than a day before for a surge: two against one is noise
SURGE_MIN_QUEUED = 5  # without history: a workflow holding most of a queue this long
SLOWER, SLOWER_MIN_MINS = 1.3, 2.0  # jobs "got slower": as the duration check counts it
GENERIC_LABELS = frozenset(
    {"self-hosted", "linux", "windows", "macos", "x64", "x86", "arm", "arm64"}
)
RUNNERS_NAMED = 2000  # runners named with their job's workflow per listing


class Trigger(StrEnum):
    MAIN = "push to main"
    PUSH = "push"
    PULL_REQUEST = "pull request"
    TAG = "tag"
    DISPATCH = "dispatch"
    SCHEDULE = "schedule"
    OTHER = "other"


_EVENTS = {
    **dict.fromkeys(("pull_request", "pull_request_target", "merge_group"), Trigger.PULL_REQUEST),
    **dict.fromkeys(("workflow_dispatch", "repository_dispatch"), Trigger.DISPATCH),
    "schedule": Trigger.SCHEDULE,
}


def trigger_of(event: object, head_branch: object) -> Trigger:
    """From GitHub's `event` and `head_branch` (outside input). A push of a `ciflow/…` ref is
    PyTorch's way of asking for more CI on a PR: a tag, not a branch push."""
    if event != "push":
        return _EVENTS.get(event, Trigger.OTHER) if isinstance(event, str) else Trigger.OTHER
    branch = head_branch if isinstance(head_branch, str) else ""
    if branch in MAIN_BRANCHES:
        return Trigger.MAIN
    return Trigger.TAG if branch.startswith(("ciflow/", "refs/tags/")) else Trigger.PUSH


# The HUD's `source_type` says it already (`autorevert`: a `trunk/<sha>` dispatch).
_HUD_SOURCES = {"main": Trigger.MAIN, "ciflow": Trigger.TAG, "autorevert": Trigger.DISPATCH}


def trigger_of_hud(source_type: object, event: object, head_branch: object) -> Trigger:
    if isinstance(source_type, str) and source_type in _HUD_SOURCES:
        return _HUD_SOURCES[source_type]
    return trigger_of(event, head_branch)


@dataclass(frozen=True)
class QueuedJob:
    runner_type: str
    workflow: str
    job: str
    repository: str
    url: str
    created_at: datetime
    trigger: Trigger
    run_attempt: int
    source_id: str  # "github:<job id>": a job listed again is no new arrival
    branch: str = ""  # the run's head branch (a tag's name for a tag's push), where followed

    def wait_mins(self, now: datetime) -> float:
        return max((now - self.created_at).total_seconds() / 60, 0.0)


@dataclass(frozen=True)
class FinishedJob:
    runner_type: str
    workflow: str
    finished_at: datetime
    minutes: float
    source_id: str


@dataclass(frozen=True)
class Arrivals:
    """Arrivals per (runner type, workflow) in the last hour and the same hour a day before
    (`history`: anything was recorded then), and the mean minutes of those finished."""

    last_hour: WorkflowCounts = field(default_factory=dict)
    day_before: WorkflowCounts = field(default_factory=dict)
    history: bool = False
    minutes_last_hour: Mapping[tuple[str, str], float] = field(default_factory=dict)
    minutes_day_before: Mapping[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True)
class JobsListing:
    """A source with no per-job rows (ARC's counters) brings `arrivals`."""

    jobs: tuple[QueuedJob, ...] = ()
    ghosts: int = 0
    complete: bool = True
    note: str = ""
    arrivals: Arrivals | None = None
    finished: tuple[FinishedJob, ...] = ()
    # The source lists a job only once it has queued this long (the HUD's `queued_jobs`: 5 min).
    listed_over_mins: float | None = None
    # A job's runner -> its workflow; None: the source names no runners (the HUD, ARC).
    runners: Mapping[str, str] | None = None


@dataclass(frozen=True)
class WorkflowQueue:
    workflow: str
    queued: int
    longest_wait_mins: float | None
    oldest_url: str
    oldest_job: str
    triggers: tuple[tuple[Trigger, int], ...]  # with their queued jobs, most first
    last_hour: int | None = None
    day_before: int | None = None

    @property
    def trigger(self) -> Trigger:
        return self.triggers[0][0] if self.triggers else Trigger.OTHER


@dataclass(frozen=True)
class RunnerTypeJobs:
    runner_type: str
    queued: int
    workflows: tuple[WorkflowQueue, ...]
    triggers: tuple[tuple[Trigger, int], ...] = ()


@dataclass(frozen=True, kw_only=True)
class JobsView(JobsListing):
    """A listing, its jobs counted by runner type and workflow."""

    source: str
    at: datetime
    runner_types: dict[str, RunnerTypeJobs]
    history: bool = False
    slower: dict[str, tuple[Slower, ...]] = field(default_factory=dict)

    def workflow_on(self, runner: str) -> str:
        """The workflow of the job that ran on `runner` (ARC: a runner pod's name), or ""."""
        return (self.runners or {}).get(runner, "")

    def name_of(self, runner_type: str) -> str:
        return type_named((*self.runner_types, *self.slower), runner_type) or runner_type


@dataclass(frozen=True)
class Slower:
    workflow: str
    minutes: float  # mean of the jobs that finished in the last hour
    before: float  # the same hour a day before

    @property
    def text(self) -> str:
        return (
            f"{self.workflow} jobs take {self.minutes:.0f} min against {self.before:.0f} a day "
            f"before ({self.minutes / self.before:.1f}×)"
        )


def queued_said(count: int, listed_over_mins: float | None, *, jobs: bool = False) -> str:
    """ "40 queued", or "2 jobs waiting over 5 min" from a source that lists only those: beside
    a queue count of 22 it must not read as the same quantity."""
    noun = f" job{'' if count == 1 else 's'}" if jobs or listed_over_mins is not None else ""
    over = f"waiting over {units.minutes(listed_over_mins)}" if listed_over_mins is not None else ""
    return f"{count}{noun} {over or 'queued'}"


@dataclass(frozen=True)
class Surge:
    runner_type: str
    workflow: str
    trigger: Trigger
    last_hour: int
    day_before: int
    queued: int
    share: float  # of the runner type's queued jobs
    history: bool = True  # without it, the surge is the workflow's share of the queue
    listed_over_mins: float | None = None

    @property
    def text(self) -> str:
        queued = queued_said(self.queued, self.listed_over_mins, jobs=True)
        head = f"{self.workflow} ({self.trigger.value}): {queued}"
        arrived = f"{self.last_hour} arrivals in the last hour"
        if not self.history:
            arrived = f", {arrived}" if self.last_hour else ""
            no_history = "(no arrivals recorded a day before to compare)"
            of = "the queue" if self.listed_over_mins is None else "those waiting that long"
            return f"{head}, {self.share:.0%} of {of}{arrived} {no_history}"
        before = "none a day before"
        if self.day_before:
            before = f"{self.day_before} a day before ({self.last_hour / self.day_before:.1f}×)"
        return f"{head}, {arrived} against {before}"


def jobs_view(listing: JobsListing, arrivals: Arrivals, *, source: str, at: datetime) -> JobsView:
    by_workflow: dict[tuple[str, str], list[QueuedJob]] = {}
    for job in listing.jobs:
        by_workflow.setdefault((job.runner_type, job.workflow), []).append(job)
    per_type: dict[str, list[WorkflowQueue]] = {}
    for key in {*by_workflow, *arrivals.last_hour, *arrivals.day_before}:
        jobs = by_workflow.get(key, [])
        oldest = min(jobs, key=lambda j: (j.created_at, j.source_id)) if jobs else None
        workflow = WorkflowQueue(
            workflow=key[1],
            queued=len(jobs),
            longest_wait_mins=oldest.wait_mins(at) if oldest else None,
            oldest_url=oldest.url if oldest else "",
            oldest_job=oldest.job if oldest else "",
            triggers=_ranked(Counter(j.trigger for j in jobs)),
            last_hour=arrivals.last_hour.get(key),
            day_before=arrivals.day_before.get(key) if arrivals.history else None,
        )
        per_type.setdefault(key[0], []).append(workflow)
    types = {
        name: RunnerTypeJobs(
            runner_type=name,
            queued=sum(w.queued for w in workflows),
            workflows=tuple(sorted(workflows, key=_rank)),
            triggers=_ranked(Counter(j.trigger for j in listing.jobs if j.runner_type == name)),
        )
        for name, workflows in sorted(per_type.items())
    }
    return JobsView(
        **vars(listing),
        source=source,
        at=at,
        runner_types=types,
        history=arrivals.history,
        slower=_slower(arrivals),
    )


def _slower(arrivals: Arrivals) -> dict[str, tuple[Slower, ...]]:
    """Workflows `SLOWER` times and `SLOWER_MIN_MINS` slower than a day before (a 1-minute job
    taking 2 is not the queue's cause)."""
    found: dict[str, list[Slower]] = {}
    for (runner_type, workflow), minutes in arrivals.minutes_last_hour.items():
        before = arrivals.minutes_day_before.get((runner_type, workflow))
        if not before or minutes < SLOWER * before or minutes - before < SLOWER_MIN_MINS:
            continue
        found.setdefault(runner_type, []).append(Slower(workflow, minutes, before))
    return {
        t: tuple(sorted(ws, key=lambda w: (-w.minutes / w.before, w.workflow)))
        for t, ws in found.items()
    }


def _rank(w: WorkflowQueue) -> tuple[float, float, float, str]:
    return (-w.queued, -(w.longest_wait_mins or 0), -(w.last_hour or 0), w.workflow)


def _ranked(counted: Counter[Trigger]) -> tuple[tuple[Trigger, int], ...]:
    return tuple(sorted(counted.items(), key=lambda item: (-item[1], item[0].value)))


def surging(view: JobsView, runner_type: str) -> Surge | None:
    """The workflow behind a runner type's surge: arrivals at least doubled against a day before,
    or, with no history, most of the queue. The biggest jump wins."""
    queue = view.runner_types.get(runner_type)
    if queue is None:
        return None
    found: list[tuple[float, Surge]] = []
    for w in queue.workflows:
        last, before = w.last_hour or 0, w.day_before or 0
        share = w.queued / queue.queued if queue.queued else 0.0
        if view.history and last >= 2 * before and last - before >= SURGE_MIN_MORE:
            score = float(last - before)
        elif not view.history and queue.queued >= SURGE_MIN_QUEUED and share > 0.5:
            score = float(w.queued)
        else:
            continue
        said = (w.workflow, w.trigger, last, before, w.queued, share, view.history)
        found.append((score, Surge(runner_type, *said, view.listed_over_mins)))
    return max(found, key=lambda pair: pair[0])[1] if found else None


# Listed later than this after the incident ended, the jobs are another hour's.
JOBS_WINDOW = timedelta(hours=1)


class WorkflowRow(BaseModel, frozen=True):
    runner_type: str
    workflow: str
    queued: int
    last_hour: int | None = None


class Workflows(BaseModel, frozen=True):
    """The workflows behind an incident as listed when its postmortem was drafted, or why none
    are known: every write-up renders this record, never a later listing."""

    at: datetime | None = None
    source: str = ""
    rows: tuple[WorkflowRow, ...] = ()
    note: str = ""
    unknown: str = ""
    late: bool = False


def workflows_seen(
    view: JobsView | None, why: str, *, types: Sequence[str], ended: datetime | None
) -> Workflows:
    """Most queued first."""
    if view is None:
        return Workflows(unknown=why or "no jobs source")
    seen = Workflows(at=view.at, source=view.source, note=view.note)
    if ended is not None and view.at - ended > JOBS_WINDOW:
        return seen.model_copy(update={"late": True, "note": ""})
    rows = [
        WorkflowRow(runner_type=name, workflow=w.workflow, queued=w.queued, last_hour=w.last_hour)
        for name in dict.fromkeys(view.name_of(t) for t in sorted(types))
        if (found := view.runner_types.get(name)) is not None
        for w in found.workflows
    ]
    rows.sort(key=lambda row: (-row.queued, row.runner_type, row.workflow))
    return seen.model_copy(update={"rows": tuple(rows)})


def runner_type_of(job: Any) -> str:
    """A job's runner type: its first `runs-on` label that is not generic; "" without labels."""
    labels = job.get("labels") if isinstance(job, dict) else None
    if not isinstance(labels, list):
        return ""
    names = [label for label in labels if isinstance(label, str) and label]
    specific = [name for name in names if name.casefold() not in GENERIC_LABELS]
    return specific[0] if specific else ",".join(names)


def workflow_of(labels: Mapping[str, str]) -> str:
    """`job_workflow_name`, else the file `job_workflow_ref` names (`…/periodic.yml@…`)."""
    name = labels.get("job_workflow_name", "").strip()
    if name:
        return name[:200]
    stem = labels.get("job_workflow_ref", "").partition("@")[0].rsplit("/", 1)[-1]
    return stem.removesuffix(".yml").removesuffix(".yaml").strip()[:200]
