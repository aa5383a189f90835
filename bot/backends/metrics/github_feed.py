"""What GitHub's `workflow_job` deliveries leave for the polling to do: the runs whose jobs a
reconcile reads again (where a missed delivery would leave the record wrong), and what it fixed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from bot.domain.alerting.alerts import time_of
from bot.domain.queue_cost.workflow_jobs import RANK, JobDelivery, listed_job

RECONCILE_S = 600.0  # the runs and runners are listed this often; the deliveries say the rest
# Runs whose jobs one reconcile reads at most: at GitHub's few hundred milliseconds a request,
# four at a time, well inside a reading's BACKEND_TIMEOUT_SECONDS.
RUNS_PER_RECONCILE = 40
# A run in progress is read again this long after it was last read (or first listed): a missed
# delivery followed by a delivered change of the same run leaves `updated_at` saying nothing new.
REREAD_S = 3600.0
# A run's `updated_at` moves a little after the state its job entered (GitHub updates the run
# once it has taken the job's change in): only a later move means a change nobody delivered.
LATE_S = 30.0


class JobRecord(Protocol):
    """Where the deliveries' jobs are kept (`bot.storage.workflow_jobs.WorkflowJobs`)."""

    async def live(self) -> list[dict[str, Any]]: ...

    async def done(self, since: float, until: float) -> list[dict[str, Any]]: ...

    async def listed(self, jobs: Sequence[JobDelivery], now: float) -> int: ...


def changed_at(job: Mapping[str, Any]) -> float:
    """When the job entered its state, as far as its fields say (epoch seconds; 0: unknown)."""
    times = [time_of(job.get(f)) for f in ("created_at", "started_at", "completed_at")]
    return max((t.timestamp() for t in times if t is not None), default=0.0)


def last_changes(
    runs: Mapping[Any, Any], known: Iterable[Mapping[str, Any]], before: Mapping[Any, float]
) -> dict[Any, float]:
    """Each listed run's last change the record has (epoch seconds): of its jobs `known`, or as
    the last reconcile found it (`before`: a job finished long ago is no longer read back)."""
    last = {run_id: at for run_id, at in before.items() if run_id in runs}
    for job in known:
        run_id = job.get("run_id")
        if run_id in runs:
            last[run_id] = max(last.get(run_id, 0.0), changed_at(job))
    return last


def runs_to_read(
    runs: Mapping[Any, Any], last: Mapping[Any, float], read_at: Mapping[Any, float], now: float
) -> list[Any]:
    """The listed runs whose jobs the record may have wrong: none of its jobs known, the run
    changed (`updated_at`) later than any change the record has of it (`last_changes`), or in
    progress and not read for REREAD_S (`read_at`: when each was last read, or first listed)."""

    def unsure(run_id: Any, run: Any) -> bool:
        updated = time_of(run.get("updated_at"))
        if run_id not in last or updated is None or updated.timestamp() > last[run_id] + LATE_S:
            return True
        return run.get("status") != "queued" and now - read_at.get(run_id, now) >= REREAD_S

    return [run_id for run_id, run in runs.items() if unsure(run_id, run)]


def finished_runs(
    live: Iterable[Mapping[str, Any]], runs: Mapping[Any, Any], before: float
) -> dict[Any, str]:
    """The runs no longer listed (finished) of jobs the record still has to finish, by the
    run's API URL: jobs changed before `before` only, so a run started since the listing is not
    taken for finished."""
    found: dict[Any, str] = {}
    for job in live:
        run_id, url = job.get("run_id"), job.get("run_url")
        if run_id not in runs and isinstance(url, str) and changed_at(job) < before:
            found[run_id] = url
    return found


def ended(job: Mapping[str, Any], now: datetime) -> JobDelivery | None:
    """A job of a finished run that its run's jobs no longer list (an earlier attempt's, or the
    run deleted): nobody will run it, so it is completed now, with no conclusion (none known)."""
    gone = {**job, "status": "completed", "conclusion": None, "completed_at": now.isoformat()}
    return listed_job(gone, str(job.get("repository") or ""))


def fixed(
    before: Mapping[Any, Mapping[str, Any]], found: Iterable[JobDelivery], since: float
) -> list[str]:
    """What a reconcile's listing changed in the record (`before`: its jobs, those finished since
    `since` among them), for the log: "3 jobs a missed delivery left queued are completed"."""
    moves: Counter[tuple[str, str]] = Counter()
    for delivery in found:
        was = before.get(delivery.id)
        if was is None and delivery.at.timestamp() < since:
            continue  # finished before the span read back: the record may well have it
        if was is None:
            moves["", delivery.action] += 1
        elif delivery.rank > RANK.get(str(was.get("status")), 0):
            moves[str(was.get("status")), delivery.action] += 1
    said = []
    for (was, now), n in sorted(moves.items()):
        jobs, are = ("1 job", "is") if n == 1 else (f"{n} jobs", "are")
        state = now.replace("_", " ")
        if was:
            said.append(f"{jobs} a missed delivery left {was.replace('_', ' ')} {are} {state}")
        else:
            said.append(f"{jobs} no delivery told of {are} recorded ({state})")
    return said
