"""Queue numbers from GitHub's REST API: queued jobs and self-hosted runners, per label. The
token's quota is shared, so a run's jobs are read again only when its listing entry changed, pages
are asked with ETags (a 304 is free), and a reading stands as long as GITHUB_READING_SHARE of
GitHub's hour allows (`paced_s`); `queued_jobs` serves the last reading's jobs while it stands.

Fed by GitHub's `workflow_job` deliveries (`fed_by`), a reading costs no request: its jobs are the
deliveries' record, and polling only reconciles every RECONCILE_S (`github_feed`)."""

from __future__ import annotations

import asyncio
import bisect
import logging
import math
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from bot.backends.github_api import GithubApi, Listing, Rate
from bot.backends.http import BackendError
from bot.backends.metrics.github_feed import (
    LATE_S,
    RECONCILE_S,
    JobRecord,
    ended,
    finished_runs,
    fixed,
    last_changes,
    runs_to_read,
)
from bot.config import Settings
from bot.domain.alerts import time_of
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.jobs import RUNNERS_NAMED, FinishedJob, JobsListing, QueuedJob, trigger_of
from bot.domain.workflow_jobs import JobDelivery, listed_job

log = logging.getLogger(__name__)

T = TypeVar("T")
# What of a run's listing entry changes when any of its jobs does.
Mark = tuple[str, Any, Any]
# A run in progress is read again this long after its last read even when its listing entry is
# unchanged: GitHub moves a run's `updated_at` when its jobs change "in the vast majority of
# cases" (github/vscode-github-actions, src/store/workflowRun.ts), not always.
REREAD_S = 600.0
# A run whose `updated_at` is this close to its last read is read again: GitHub's timestamps have
# whole seconds, so a change in the second of the read leaves the entry as the read saw it.
MARGIN_S = 5.0

GENERIC_LABELS = frozenset(
    {"self-hosted", "linux", "windows", "macos", "x64", "x86", "arm", "arm64"}
)
MAX_PAGES = 20  # per listing: a runaway org must not eat the hour's quota
WINDOW_S = 3600.0  # GitHub's primary limit is an hour's requests
STEP_S = 15.0  # the intervals tried for a reading, a quarter of a minute apart


def runner_type_of(job: Any) -> str:
    """A job's runner type: its first `runs-on` label that is not generic; "" without labels."""
    labels = job.get("labels") if isinstance(job, dict) else None
    if not isinstance(labels, list):
        return ""
    names = [label for label in labels if isinstance(label, str) and label]
    specific = [name for name in names if name.casefold() not in GENERIC_LABELS]
    return specific[0] if specific else ",".join(names)


class GithubMetrics:
    name = "GitHub"
    live = True

    def __init__(
        self, config: Settings, api: GithubApi | None = None, *, max_pages: int = MAX_PAGES
    ) -> None:
        self._config = config
        self.api = api or GithubApi(config)
        self._max_pages = max_pages
        self._last: Last | None = None
        # One read at a time: a command and a reading never read the same runs twice.
        self._reading = asyncio.Lock()
        self._jobs_of: dict[Any, Known] = {}  # each listed run's jobs as last read
        self._record: JobRecord | None = None
        self._reconciled: Reconciled | None = None
        self._changed: dict[Any, float] = {}  # each listed run's last change the record has
        self._read_at: dict[Any, float] = {}  # when each listed run was last read, or first listed

    def fed_by(self, record: JobRecord) -> None:
        """Readings from the jobs GitHub's deliveries keep in `record` (every replica's endpoint
        writes it); the REST API is read only to reconcile it, every RECONCILE_S."""
        self._record = record

    async def read(self, *, now: datetime) -> FleetSnapshot:
        if self._record is not None:
            fed = await self._fed(self._record, now)
            live = [job for job in fed.jobs if not is_ghost(job, fed.runs)]
            return fleet_of(live, fed.runners, now=now, every_job_listed=fed.complete, fed=True)
        async with self._reading:
            listed, runners = await all_or_none([self._runs(), self._runners()])
            last = await self._listed(listed, listed.counted + runners.counted, now)
        # A ghost (queued in a completed run) waits for nothing: the queue is what can still run.
        live = [job for job in last.jobs.items if not is_ghost(job, last.runs)]
        fleet = fleet_of(live, runners.items, now=now, every_job_listed=last.jobs.complete)
        # A reading standing past the interval says so: the surfaces say when the next comes.
        pace = last.until - now.timestamp()
        if pace <= self._config.metrics_interval_seconds:
            return fleet
        return fleet.model_copy(update={"paced_s": pace})

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        """The last reading's jobs while it stands; past it, the runs and their jobs read again.
        Fed by deliveries: the record's jobs, and those finished in the last RECONCILE_S."""
        if self._record is not None:
            fed = await self._fed(self._record, now)
            at = now.timestamp()
            done = self._ours(await self._record.done(at - RECONCILE_S, at))
            return queued_jobs_of(fed.runs, fed.jobs + done, complete=fed.complete)
        async with self._reading:
            last = self._last
            if last is None or now.timestamp() >= last.until:
                listed = await self._runs()
                last = await self._listed(listed, listed.counted, now)
        return queued_jobs_of(last.runs, last.jobs.items, complete=last.jobs.complete)

    def _pace(self, pages: int, runs: Mapping[Any, Any], now: float) -> tuple[float, int] | None:
        """Seconds until the next reading and its cost; None where GitHub states no quota."""
        rate, config = self.api.rate, self._config
        if rate is None:
            return None
        due = sorted(self._due_in(run_id, run, now) for run_id, run in runs.items())
        share, shortest = config.github_reading_share, config.metrics_interval_seconds
        return reading_pace(due, pages, rate, share=share, now=now, shortest=shortest)

    async def sizing(self, *, now: datetime) -> Sizing:
        """What a reading costs and how often the share allows one, from the listings alone."""
        listed, runners = await all_or_none([self._runs(), self._runners()])
        pages = listed.counted + runners.counted
        runs = _runs_of(listed)
        pace, cost = self._pace(pages, runs, now.timestamp()) or (None, pages + len(runs))
        return Sizing(len(runs), pages, cost, pace)

    def _due_in(self, run_id: Any, run: dict[str, Any], now: float) -> float:
        """Seconds within which a reading would read `run`'s jobs again, as the pace predicts."""
        changed = time_of(run.get("updated_at"))
        since = now - changed.timestamp() if changed else 0.0
        known = self._jobs_of.get(run_id)
        if known is not None and changed_near(run, known.at):
            return 0.0
        if known is not None and in_progress(run):
            since = min(since, known.at + REREAD_S - now)
        return max(since, 0.0)

    async def _listing(self, url: str, key: str) -> Listing:
        return await self.api.pages(f"{url}per_page=100", key, max_pages=self._max_pages)

    async def _pages(self, urls: Iterable[str], key: str) -> Listing:
        """Several listings as one, complete when each is (each URL ends ready for `per_page`)."""
        parts = await all_or_none([self._listing(url, key) for url in urls])
        items = [i for part in parts for i in part.items]
        return Listing(items, all(p.complete for p in parts), sum(p.counted for p in parts))

    async def _runners(self) -> Listing:
        org, repos = self._config.github_org, self._config.github_repos
        if org:
            return await self._listing(f"/orgs/{org}/actions/runners?", "runners")
        return await self._pages([f"/repos/{repo}/actions/runners?" for repo in repos], "runners")

    async def _runs(self) -> Listing:
        """The queued runs and those in progress (a job running, the next waiting for a runner)."""
        repos = self._config.github_repos
        statuses = ("queued", "in_progress")
        urls = [f"/repos/{r}/actions/runs?status={s}&" for r in repos for s in statuses]
        return await self._pages(urls, "workflow_runs")

    async def _listed(self, listed: Listing, pages: int, now: datetime) -> Last:
        """The listed runs and their jobs, read again only for a run whose listing entry changed
        (or, in progress, was last read REREAD_S ago; or changed in the second it was read). Kept
        as the last reading, standing until the pace (the listings cost `pages`) allows the next."""
        at = now.timestamp()
        runs = _runs_of(listed)
        paths = {run_id: _path(run.get("url")) for run_id, run in runs.items()}
        marks = {run_id: _mark(run) for run_id, run in runs.items()}
        kept = {
            run_id: known
            for run_id, mark in marks.items()
            if (known := self._jobs_of.get(run_id)) is not None
            and known.mark == mark
            and not (in_progress(runs[run_id]) and at - known.at >= REREAD_S)
            and not changed_near(runs[run_id], known.at)
        }
        changed = [run_id for run_id in runs if run_id not in kept and paths[run_id]]
        read = await all_or_none([self._listing(f"{paths[i]}/jobs?", "jobs") for i in changed])
        self._jobs_of = kept | {
            run_id: Known(mark, jobs.items, at)
            for run_id, jobs in zip(changed, read, strict=True)
            if (mark := marks[run_id]) is not None and jobs.complete
        }
        items = [job for known in kept.values() for job in known.jobs]
        items += [job for jobs in read for job in jobs.items]
        # A run that could not be read (no id, no usable `url`) may hold any queue.
        every_run_read = all(isinstance(r, dict) and "id" in r for r in listed.items) and all(
            paths.values()
        )
        every_page = all(jobs.complete for jobs in read)
        repos = self._config.github_repos
        complete = bool(repos) and listed.complete and every_run_read and every_page
        paced = self._pace(pages, runs, at)
        every = max(paced[0] if paced else 0.0, self._config.metrics_interval_seconds)
        self._last = Last(runs, Listing(items, complete), at + every)
        return self._last

    async def _fed(self, record: JobRecord, now: datetime) -> Fed:
        """The record's jobs still to finish, reconciled first when due. A failed reconcile is
        retried RECONCILE_S later, the record standing meanwhile (the first one must succeed:
        the runners come from it)."""
        async with self._reading:
            last = self._reconciled
            if last is None or now.timestamp() >= last.until:
                try:
                    last = await self._reconcile(record, now)
                except BackendError as failed:
                    if last is None:
                        raise
                    log.warning("reconcile: %s; the deliveries' jobs stand until the next", failed)
                    last = last._replace(until=now.timestamp() + RECONCILE_S)
                self._reconciled = last
            jobs = self._ours(await record.live())
        return Fed(last.runs, last.runners, jobs, last.complete)

    async def _reconcile(self, record: JobRecord, now: datetime) -> Reconciled:
        """The runs and runners listed; the jobs read of each run the record may have wrong (see
        `runs_to_read`) and of each finished run it still has jobs of, and put in the record."""
        at = now.timestamp()
        listed, runners = await all_or_none([self._runs(), self._runners()])
        runs = _runs_of(listed)
        live, since = self._ours(await record.live()), at - 2 * RECONCILE_S
        known = live + self._ours(await record.done(since, at))
        changed = last_changes(runs, known, self._changed)
        read_at = {run_id: self._read_at.get(run_id, at) for run_id in runs}
        unread = runs_to_read(runs, changed, read_at, at)
        paths = {run_id: _path(runs[run_id].get("url")) for run_id in unread}
        # A run missing from an incomplete listing may still be running.
        finished = finished_runs(live, runs, at - LATE_S) if listed.complete else {}
        paths |= {run_id: _path(url) for run_id, url in finished.items()}
        paths = {run_id: path for run_id, path in paths.items() if path}
        read = await all_or_none([self._run_jobs(path) for path in paths.values()])
        found: list[JobDelivery] = []
        for path, jobs in zip(paths.values(), read, strict=True):
            repository = "/".join(path.split("/")[2:4])
            found += [d for job in jobs.items if (d := listed_job(job, repository)) is not None]
        shown = {d.id for d in found}
        whole = {run_id for run_id, jobs in zip(paths, read, strict=True) if jobs.complete}
        gone = [
            job
            for job in live
            if job.get("run_id") in finished.keys() & whole and job.get("id") not in shown
        ]
        found += [d for job in gone if (d := ended(job, now)) is not None]
        await record.listed(found, at)
        self._changed = last_changes(runs, [d.job for d in found], changed)
        self._read_at = read_at | dict.fromkeys(unread, at)
        said = fixed({job.get("id"): job for job in known}, found, since)
        if said:
            log.info("reconcile: %s (%d runs read)", "; ".join(said), len(paths))
        cost = listed.counted + runners.counted + sum(jobs.counted for jobs in read)
        rate, share = self.api.rate, self._config.github_reading_share
        every = (
            reading_pace((), cost, rate, share=share, now=at, shortest=RECONCILE_S)[0]
            if rate is not None
            else RECONCILE_S
        )
        complete = (
            bool(self._config.github_repos)
            and listed.complete
            and len(runs) == len(listed.items)
            and all(jobs.complete for jobs in read)
        )
        return Reconciled(runs, runners.items, complete, at + every)

    async def _run_jobs(self, path: str) -> Listing:
        """A run's jobs; none (complete) where GitHub no longer has the run (deleted)."""
        try:
            return await self._listing(f"{path}/jobs?", "jobs")
        except BackendError as failed:
            if failed.status == 404:
                return Listing([], True, 1)
            raise

    def _ours(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The jobs of the configured repositories: an organization's webhook delivers every
        repository's, and only the configured ones are listed to reconcile them."""
        repos = set(self._config.github_repos)
        return [job for job in jobs if job.get("repository") in repos]

    async def aclose(self) -> None:
        await self.api.aclose()


async def all_or_none(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Every call's result, or the first failure with the others cancelled (after a rate limit,
    no sibling may still reach GitHub)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except* BackendError as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


def reading_pace(
    due: Sequence[float], pages: int, rate: Rate, *, share: float, now: float, shortest: float
) -> tuple[float, int]:
    """Seconds until the next reading, and its predicted cost: the shortest interval (from
    `shortest`, in steps) at which every reading before the reset fits in what the readings may
    still spend (`remaining` less the `1 - share` of the limit kept for the others: the quota is
    the token's, shared with the alert's issue and anyone else on it). A reading T from now costs
    `pages` and a request per run in `due` (ascending) under T: the runs that changed in the last
    T stand for those that will in the next. None fits: wait for the reset."""
    if now >= rate.reset:
        rate = Rate(rate.limit, rate.limit, now + WINDOW_S)  # a new hour, whole
    left = rate.remaining - (1 - share) * rate.limit
    span = rate.reset - now
    every = shortest
    while every < span:
        readings = math.ceil(span / every) - 1  # the reading at the reset starts a new hour
        cost = pages + bisect.bisect_left(due, every)
        if readings * cost <= left:
            return every, cost
        every += STEP_S
    return span, pages + bisect.bisect_left(due, span)


class Sizing(NamedTuple):
    runs: int
    pages: int
    cost: int  # requests the next reading costs
    every_s: float | None  # None: GitHub states no quota


class Last(NamedTuple):
    runs: dict[Any, dict[str, Any]]
    jobs: Listing
    until: float  # epoch seconds


class Reconciled(NamedTuple):
    """The last reconcile's listings, standing until `until` (epoch seconds)."""

    runs: dict[Any, dict[str, Any]]
    runners: list[Any]
    complete: bool  # every queued and running run listed, and each run read in full
    until: float


class Fed(NamedTuple):
    runs: dict[Any, dict[str, Any]]
    runners: list[Any]
    jobs: list[dict[str, Any]]
    complete: bool


class Known(NamedTuple):
    """A run's jobs as last read, with the run's mark then."""

    mark: Mark
    jobs: list[Any]
    at: float  # epoch seconds


def in_progress(run: dict[str, Any]) -> bool:
    """A run whose stale jobs could misstate the queue (a run listed as queued has none started)."""
    return run.get("status") != "queued"


def changed_near(run: dict[str, Any], read_at: float) -> bool:
    """The run's `updated_at` within MARGIN_S of its last read, or after it."""
    changed = time_of(run.get("updated_at"))
    return changed is not None and changed.timestamp() >= read_at - MARGIN_S


def _runs_of(listed: Listing) -> dict[Any, dict[str, Any]]:
    return {run["id"]: run for run in listed.items if isinstance(run, dict) and "id" in run}


def _mark(run: dict[str, Any]) -> Mark | None:
    """What changes in a run's listing entry when any of its jobs does; None: read every time."""
    updated = run.get("updated_at")
    if not isinstance(updated, str) or not updated:
        return None
    return updated, run.get("run_attempt"), run.get("status")


def _path(url: Any) -> str:
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
    """Per runner type: queued jobs, the longest wait, and the runners carrying its label. Types
    are the jobs': "nothing queued" for an absent one only when `every_job_listed`. `fed`: the
    jobs are the deliveries' record, newer than the runners' listing, so a type's busy runners
    are its jobs in progress (each runs one), and it has registered at least those."""
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
        listed = runner.get("labels")
        listed = listed if isinstance(listed, list) else []
        labels = {
            str(label.get("name", "")).casefold() for label in listed if isinstance(label, dict)
        }
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
    """The queued jobs with their run's workflow and trigger (ghosts and unreadable ones counted),
    the finished ones, and the workflow of each runner (ARC names a runner after its pod)."""
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
    return JobsListing(
        tuple(found),
        ghosts,
        complete and not unreadable,
        note,
        finished=tuple(finished),
        runners=runners,
    )


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
    parts = _path(run.get("url") or job.get("run_url")).split("/")
    return "/".join(parts[2:4]) if len(parts) > 3 else ""


def _text(value: Any) -> str:
    return value[:500] if isinstance(value, str) else ""
