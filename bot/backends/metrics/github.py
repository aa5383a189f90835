"""Queue numbers from GitHub's REST API: queued jobs and self-hosted runners, per label.

Per reading: the organization's self-hosted runners (`GITHUB_ORG`) or each repository's, and for
each repository in `GITHUB_REPOS` the workflow runs that are queued or in progress, then their
jobs. A job's runner type is its first `runs-on` label that is not generic (`self-hosted`, an OS,
an architecture); its wait is now minus `created_at`. A runner counts for every type among its
labels.

The API's quota is shared with everything else using the token, so the client is frugal: every
page is asked with the ETag of its last answer (a 304 costs no quota), pagination follows the
`link` header as given, and a rate-limit answer stops all calls for as long as GitHub asks
(`GithubApi._limited`).

The jobs behind the queue (`queued_jobs`, for `/queue jobs` and diagnostics) come from the same
listing as the reading: a listing younger than `reuse_s` is reused as it is, an older one is
asked again with its ETags (304s, free).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from bot.backends.errors import BackendError
from bot.backends.github_api import GithubApi, Listing
from bot.config import Settings
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.jobs import FinishedJob, JobsListing, QueuedJob, trigger_of

T = TypeVar("T")

GENERIC_LABELS = frozenset(
    {"self-hosted", "linux", "windows", "macos", "x64", "x86", "arm", "arm64"}
)
QUEUED_STATUSES = frozenset({"queued"})
MAX_PAGES = 20  # per listing: a runaway org must not eat the hour's quota
# A jobs listing this recent serves `queued_jobs` without a call: the reading just made it.
REUSE_S = 30.0


@dataclass(frozen=True)
class RunsAndJobs:
    """The runs that may hold queued jobs (by id) and their jobs."""

    runs: dict[Any, dict[str, Any]]
    jobs: Listing


def runner_type_of(labels: Iterable[Any]) -> str:
    """A job's runner type: its first `runs-on` label that is not generic."""
    names = [str(label) for label in labels if isinstance(label, str) and label]
    specific = [name for name in names if name.casefold() not in GENERIC_LABELS]
    if specific:
        return specific[0]
    return ",".join(names)


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class GithubMetrics:
    name = "GitHub"
    live = True

    def __init__(
        self,
        config: Settings,
        api: GithubApi | None = None,
        *,
        max_pages: int = MAX_PAGES,
        reuse_s: float = REUSE_S,
    ) -> None:
        self._config = config
        self._api = api or GithubApi(config)
        self._max_pages = max_pages
        self._reuse_s = reuse_s
        self._last: tuple[float, RunsAndJobs] | None = None

    @property
    def api(self) -> GithubApi:
        return self._api

    async def read(self, *, now: datetime) -> FleetSnapshot:
        listed, runners = await all_or_none([self._listed(), self._runners()])
        jobs = listed.jobs
        # A ghost (queued in a completed run) waits for nothing: the queue is what can still run.
        live = [job for job in jobs.items if not is_ghost(job, listed.runs)]
        return fleet_of(live, runners.items, now=now, every_job_listed=jobs.complete)

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        last = self._last
        fresh = last is not None and time.monotonic() - last[0] < self._reuse_s
        listed = last[1] if last is not None and fresh else await self._listed()
        return queued_jobs_of(listed.runs, listed.jobs.items, complete=listed.jobs.complete)

    async def _listed(self) -> RunsAndJobs:
        listed = await self._jobs()
        self._last = (time.monotonic(), listed)
        return listed

    async def _pages(self, url: str, key: str) -> Listing:
        return await self._api.pages(url, key, max_pages=self._max_pages)

    async def _runners(self) -> Listing:
        config = self._config
        if config.github_org:
            org = config.github_org
            return await self._pages(f"/orgs/{org}/actions/runners?per_page=100", "runners")
        listings = await all_or_none(
            [
                self._pages(f"/repos/{repo}/actions/runners?per_page=100", "runners")
                for repo in config.github_repos
            ]
        )
        return _joined(listings)

    async def _jobs(self) -> RunsAndJobs:
        """Jobs of the runs that may hold queued jobs: queued runs, and runs in progress (one
        job running and the next waiting for a runner is the usual shape of a queue).

        Complete only when every configured repository's runs and every run's jobs were listed
        to the end: then a runner type with no job in it has none queued in those repositories.
        """
        run_lists = await all_or_none(
            [
                self._pages(
                    f"/repos/{repo}/actions/runs?status={status}&per_page=100", "workflow_runs"
                )
                for repo in self._config.github_repos
                for status in ("queued", "in_progress")
            ]
        )
        listed = _joined(run_lists)
        runs = {run["id"]: run for run in listed.items if isinstance(run, dict) and "id" in run}
        paths = [_path(run.get("url")) for run in runs.values()]
        job_lists = await all_or_none(
            [self._pages(f"{path}/jobs?per_page=100", "jobs") for path in paths if path]
        )
        jobs = _joined(job_lists)
        # A run that could not be read (no id, no usable `url`) may hold any queue.
        every_run_read = all(isinstance(r, dict) and "id" in r for r in listed.items) and all(paths)
        complete = bool(self._config.github_repos) and listed.complete and every_run_read
        return RunsAndJobs(runs, Listing(jobs.items, complete and jobs.complete))

    async def aclose(self) -> None:
        await self._api.aclose()


async def all_or_none(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Every call's result, or the first failure with the others cancelled: after a rate
    limit, no sibling call may still reach GitHub."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except* BackendError as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


def _joined(listings: Iterable[Listing]) -> Listing:
    """Several listings as one, complete when each is."""
    parts = list(listings)
    return Listing([i for part in parts for i in part.items], all(p.complete for p in parts))


def _path(url: Any) -> str:
    """An API URL as a path on the configured base (GitHub Enterprise has its own host)."""
    if not isinstance(url, str) or "/repos/" not in url:
        return ""
    return "/repos/" + url.split("/repos/", 1)[1]


def fleet_of(
    jobs: Iterable[Any], runners: Iterable[Any], *, now: datetime, every_job_listed: bool = False
) -> FleetSnapshot:
    """Per runner type: queued jobs and the longest wait, and the runners carrying its label.

    Types are those of the jobs seen (queued or running): the labels jobs ask for, not every
    label a runner carries (`AWS:us-east-1`…). So a type whose jobs all finished is not in the
    reading: that means "nothing queued" only when `every_job_listed`.
    """
    queued: dict[str, list[datetime]] = {}
    types: set[str] = set()
    for job in jobs:
        if not isinstance(job, dict) or not isinstance(job.get("labels"), list):
            continue
        runner_type = runner_type_of(job["labels"])
        if not runner_type:
            continue
        types.add(runner_type)
        if job.get("status") in QUEUED_STATUSES and not job.get("runner_id"):
            since = parse_time(job.get("created_at")) or parse_time(job.get("started_at")) or now
            queued.setdefault(runner_type, []).append(since)
    counts: dict[str, dict[str, float]] = {
        t: {"registered": 0, "busy": 0, "idle": 0, "offline": 0} for t in types
    }
    folded = {t.casefold(): t for t in types}
    for runner in runners:
        if not isinstance(runner, dict):
            continue
        listed = runner.get("labels")
        labels = {
            str(label.get("name", "")).casefold()
            for label in (listed if isinstance(listed, list) else ())
            if isinstance(label, dict)
        }
        online = runner.get("status") == "online"
        busy = runner.get("busy") is True
        for label in labels & set(folded):
            c = counts[folded[label]]
            c["registered"] += 1
            if not online:
                c["offline"] += 1
            elif busy:
                c["busy"] += 1
            else:
                c["idle"] += 1
    result = {}
    for runner_type in sorted(types):
        waits = queued.get(runner_type, [])
        oldest = min(waits) if waits else None
        result[runner_type] = RunnerTypeMetrics(
            queued=len(waits),
            longest_wait_mins=max((now - oldest).total_seconds() / 60, 0) if oldest else None,
            **counts[runner_type],
        )
    return FleetSnapshot(
        at=now, source="github", runner_types=result, absent_means_empty=every_job_listed
    )


def queued_jobs_of(
    runs: Mapping[Any, Any], jobs: Iterable[Any], *, complete: bool = True
) -> JobsListing:
    """The queued jobs with their run's workflow and trigger. A job still `queued` whose run has
    completed (or which has a conclusion itself) is a ghost: GitHub lists it, nobody will run
    it. Ghosts are left out and counted; so are jobs that cannot be read."""
    found: list[QueuedJob] = []
    finished: list[FinishedJob] = []
    ghosts = unreadable = 0
    for job in jobs:
        if isinstance(job, dict) and job.get("status") == "completed":
            done = _finished_job(job, runs.get(job.get("run_id")))
            if done is not None:
                finished.append(done)
            continue
        if not isinstance(job, dict) or job.get("status") not in QUEUED_STATUSES:
            continue
        if job.get("runner_id"):
            continue
        if is_ghost(job, runs):
            ghosts += 1
            continue
        run = runs.get(job.get("run_id"))
        queued = _queued_job(job, run if isinstance(run, dict) else {})
        if queued is None:
            unreadable += 1
        else:
            found.append(queued)
    note = f"{unreadable} unreadable GitHub jobs left out" if unreadable else ""
    return JobsListing(
        tuple(found), ghosts, complete and not unreadable, note, finished=tuple(finished)
    )


def is_ghost(job: Any, runs: Mapping[Any, Any]) -> bool:
    """A job still `queued` whose run has completed, or that has a conclusion of its own."""
    if not isinstance(job, dict) or job.get("status") not in QUEUED_STATUSES:
        return False
    run = runs.get(job.get("run_id"))
    run = run if isinstance(run, dict) else {}
    return bool(run.get("status") == "completed" or run.get("conclusion") or job.get("conclusion"))


def _queued_job(job: dict[str, Any], run: dict[str, Any]) -> QueuedJob | None:
    labels = job.get("labels")
    runner_type = runner_type_of(labels) if isinstance(labels, list) else ""
    created = parse_time(job.get("created_at")) or parse_time(job.get("started_at"))
    job_id = job.get("id")
    if not runner_type or created is None or job_id is None or isinstance(job_id, bool):
        return None
    workflow = _text(run.get("name")) or _text(job.get("workflow_name")) or "(unnamed workflow)"
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
        source_id=f"github:{str(job_id)[:40]}",
    )


def _finished_job(job: dict[str, Any], run: Any) -> FinishedJob | None:
    """A job that ran on a runner to its end (the runs still in progress list them beside their
    queued ones): how long it ran, for "whose jobs got slower". A job cancelled before it
    started, or without times, says nothing about durations."""
    run = run if isinstance(run, dict) else {}
    labels = job.get("labels")
    runner_type = runner_type_of(labels) if isinstance(labels, list) else ""
    started, ended = parse_time(job.get("started_at")), parse_time(job.get("completed_at"))
    job_id = job.get("id")
    if not runner_type or not job.get("runner_id") or started is None or ended is None:
        return None
    if ended < started or job_id is None or isinstance(job_id, bool):
        return None
    workflow = _text(run.get("name")) or _text(job.get("workflow_name")) or "(unnamed workflow)"
    minutes = (ended - started).total_seconds() / 60
    return FinishedJob(runner_type, workflow, ended, minutes, f"github:{str(job_id)[:40]}")


def _repository(run: dict[str, Any], job: dict[str, Any]) -> str:
    """`owner/name`: the run's `repository.full_name`, else from its API URL."""
    repository = run.get("repository")
    if isinstance(repository, dict) and _text(repository.get("full_name")):
        return _text(repository.get("full_name"))
    parts = _path(run.get("url") or job.get("run_url")).split("/")
    return "/".join(parts[2:4]) if len(parts) > 3 else ""


def _text(value: Any) -> str:
    return value[:500] if isinstance(value, str) else ""
