"""What GitHub's REST jobs (listed, or recorded from `workflow_job` deliveries) and runners say,
in queuepilot's terms: the fleet by runner type, and the jobs listing behind the queue."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from bot.domain.alerting.alerts import time_of
from bot.domain.queue_cost.jobs import (
    RUNNERS_NAMED,
    FinishedJob,
    JobsListing,
    QueuedJob,
    runner_type_of,
    trigger_of,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics


def path_of(url: Any) -> str:
    """An API URL as a path on the configured base (GitHub Enterprise has its own host)."""
    if not isinstance(url, str) or "/repos/" not in url:
        return ""
    return "/repos/" + url.split("/repos/", 1)[1]


def fleet_of(
    jobs: Iterable[Any],
    runners: Iterable[Any],
    *,
    now: datetime,
    every_job_listed: bool = False,
    fed: bool = False,
) -> FleetSnapshot:
    """Per runner type: queued jobs, the longest wait, and the runners carrying its label; an
    absent type has none only when `every_job_listed`. `fed`: the jobs are the deliveries' record,
    newer than the runners' listing, so a type's busy runners are its jobs in progress."""
    waits: dict[str, list[datetime]] = {}
    busy: dict[str, int] = {}
    for job in jobs:
        runner_type = runner_type_of(job)
        if not runner_type:
            continue
        queued = waits.setdefault(runner_type, [])
        if job.get("status") == "queued" and not job.get("runner_id"):
            queued.append(_created(job) or now)
        busy[runner_type] = busy.get(runner_type, 0) + (job.get("status") == "in_progress")
    counts = {t: dict.fromkeys(("registered", "busy", "idle", "offline"), 0) for t in waits}
    folded = {t.casefold(): t for t in waits}
    for runner in runners:
        if not isinstance(runner, dict):
            continue
        listed = runner.get("labels") if isinstance(runner.get("labels"), list) else []
        labels = {str(n.get("name", "")).casefold() for n in listed if isinstance(n, dict)}
        state = "busy" if runner.get("busy") is True else "idle"
        state = state if runner.get("status") == "online" else "offline"
        for label in labels & set(folded):
            counts[folded[label]]["registered"] += 1
            counts[folded[label]][state] += 1
    for runner_type, count in counts.items() if fed else ():
        online = count["registered"] - count["offline"]
        count["busy"] = busy[runner_type]
        count["idle"] = max(online - busy[runner_type], 0)
        count["registered"] = count["offline"] + count["busy"] + count["idle"]
    types = {
        runner_type: RunnerTypeMetrics(
            queued=len(queued),
            longest_wait_mins=max((now - min(queued)).total_seconds() / 60, 0) if queued else None,
            **counts[runner_type],
        )
        for runner_type, queued in sorted(waits.items())
    }
    return FleetSnapshot(
        at=now, source="github", runner_types=types, absent_means_empty=every_job_listed
    )


def queued_jobs_of(
    runs: Mapping[Any, Any], jobs: Iterable[Any], *, complete: bool = True
) -> JobsListing:
    """The queued jobs (ghosts and unreadable ones counted), the finished ones, and the workflow
    of each runner (ARC names a runner after its pod)."""
    found: list[QueuedJob] = []
    finished: list[FinishedJob] = []
    runners: dict[str, str] = {}
    ghosts = unreadable = 0
    for job in jobs:
        if not isinstance(job, dict):
            continue
        run = runs.get(job.get("run_id"))
        run = run if isinstance(run, dict) else {}
        runner = _text(job.get("runner_name"))
        if runner and job.get("status") != "queued" and len(runners) < RUNNERS_NAMED:
            runners[runner] = _workflow(job, run)
        if job.get("status") == "completed":
            done = _finished_job(job, run)
            finished += [done] if done is not None else []
        elif job.get("status") != "queued" or job.get("runner_id"):
            continue
        elif is_ghost(job, runs):
            ghosts += 1
        elif (queued := _queued_job(job, run)) is None:
            unreadable += 1
        else:
            found.append(queued)
    note = f"{unreadable} unreadable GitHub jobs left out" if unreadable else ""
    whole = complete and not unreadable
    return JobsListing(tuple(found), ghosts, whole, note, finished=tuple(finished), runners=runners)


def is_ghost(job: Any, runs: Mapping[Any, Any]) -> bool:
    """Queued in a completed run, or with a conclusion of its own: nobody will run it."""
    if not isinstance(job, dict) or job.get("status") != "queued":
        return False
    run = runs.get(job.get("run_id"))
    run = run if isinstance(run, dict) else {}
    return bool(run.get("status") == "completed" or run.get("conclusion") or job.get("conclusion"))


def _created(job: dict[str, Any]) -> datetime | None:
    return time_of(job.get("created_at")) or time_of(job.get("started_at"))


def _identity(job: dict[str, Any], run: dict[str, Any]) -> tuple[str, str, str] | None:
    runner_type = runner_type_of(job)
    job_id = job.get("id")
    if not runner_type or job_id is None or isinstance(job_id, bool):
        return None
    return runner_type, _workflow(job, run), f"github:{str(job_id)[:40]}"


def _workflow(job: dict[str, Any], run: dict[str, Any]) -> str:
    return _text(run.get("name")) or _text(job.get("workflow_name")) or "(unnamed workflow)"


def _queued_job(job: dict[str, Any], run: dict[str, Any]) -> QueuedJob | None:
    identity, created = _identity(job, run), _created(job)
    if identity is None or created is None:
        return None
    runner_type, workflow, source_id = identity
    attempt = job.get("run_attempt", run.get("run_attempt"))
    return QueuedJob(
        runner_type=runner_type,
        workflow=workflow,
        job=_text(job.get("name")),
        repository=_repository(run, job),
        url=_text(job.get("html_url")),
        created_at=created,
        trigger=trigger_of(run.get("event"), run.get("head_branch", job.get("head_branch"))),
        run_attempt=attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 1,
        source_id=source_id,
    )


def _finished_job(job: dict[str, Any], run: dict[str, Any]) -> FinishedJob | None:
    """A job that ran on a runner to its end, for "whose jobs got slower"."""
    identity = _identity(job, run)
    started, ended = time_of(job.get("started_at")), time_of(job.get("completed_at"))
    if identity is None or not job.get("runner_id") or not started or not ended or ended < started:
        return None
    runner_type, workflow, source_id = identity
    minutes = (ended - started).total_seconds() / 60
    return FinishedJob(runner_type, workflow, ended, minutes, source_id)


def _repository(run: dict[str, Any], job: dict[str, Any]) -> str:
    """`owner/name`: the run's `repository.full_name`, else from its API URL."""
    repository = run.get("repository")
    if isinstance(repository, dict) and _text(repository.get("full_name")):
        return _text(repository.get("full_name"))
    parts = path_of(run.get("url") or job.get("run_url")).split("/")
    return "/".join(parts[2:4]) if len(parts) > 3 else ""


def _text(value: Any) -> str:
    return value[:500] if isinstance(value, str) else ""
