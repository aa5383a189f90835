"""Queue numbers from GitHub's REST API: queued jobs and self-hosted runners, per label. The
token's quota is shared, so a run's jobs are read again only when its listing entry changed, pages
are asked with ETags (a 304 is free), and a reading stands as long as GITHUB_READING_SHARE of
GitHub's hour allows. Fed by `workflow_job` deliveries (`fed_by`), a reading costs no request and
polling only reconciles every RECONCILE_S."""

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
    RUNS_PER_RECONCILE,
    JobRecord,
    ended,
    finished_runs,
    fixed,
    last_changes,
    runs_to_read,
)
from bot.backends.metrics.github_jobs import fleet_of, is_ghost, path_of, queued_jobs_of
from bot.config import Settings
from bot.domain.alerting.alerts import time_of
from bot.domain.queue_cost.jobs import JobsListing
from bot.domain.queue_cost.workflow_jobs import JobDelivery, listed_job
from bot.domain.reading.fleet import FleetSnapshot

log = logging.getLogger(__name__)

T = TypeVar("T")
# What of a run's listing entry changes when any of its jobs does.
Mark = tuple[str, Any, Any]
# A run in progress is read again this long after its last read, even unchanged: GitHub moves a
# run's `updated_at` when its jobs change "in the vast majority of cases"
# (github/vscode-github-actions, src/store/workflowRun.ts).
REREAD_S = 600.0
# A run whose `updated_at` is this close to its last read is read again: GitHub's timestamps have
# whole seconds, so a change in the second of the read leaves the entry as the read saw it.
MARGIN_S = 5.0

MAX_PAGES = 20  # per listing: a runaway org must not eat the hour's quota
WINDOW_S = 3600.0  # GitHub's primary limit is an hour's requests
STEP_S = 15.0  # the intervals tried for a reading, a quarter of a minute apart


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
        """Readings from the jobs GitHub's deliveries keep in `record` (every replica writes it)."""
        self._record = record

    async def read(self, *, now: datetime) -> FleetSnapshot:
        if self._record is not None:
            fed, jobs = await self._fed(self._record, now)
            live = [job for job in jobs if not is_ghost(job, fed.runs)]
            return fleet_of(live, fed.runners, now=now, every_job_listed=fed.complete, fed=True)
        async with self._reading:
            listed, runners = await all_or_none([self._runs(), self._runners()])
            last = await self._listed(listed, listed.counted + runners.counted, now)
        # A ghost (queued in a completed run) waits for nothing: the queue is what can still run.
        live = [job for job in last.jobs.items if not is_ghost(job, last.runs)]
        fleet = fleet_of(live, runners.items, now=now, every_job_listed=last.jobs.complete)
        # A reading standing past the interval says so: the surfaces say when the next comes.
        pace = last.until - now.timestamp()
        paced = pace > self._config.metrics_interval_seconds
        return fleet.model_copy(update={"paced_s": pace}) if paced else fleet

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        """The last reading's jobs while it stands (fed: the record's, and those finished in the
        last RECONCILE_S)."""
        if self._record is not None:
            fed, jobs = await self._fed(self._record, now)
            at = now.timestamp()
            done = self._ours(await self._record.done(at - RECONCILE_S, at))
            return queued_jobs_of(fed.runs, jobs + done, complete=fed.complete)
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
        pages, runs = listed.counted + runners.counted, _runs_of(listed)
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
        repos, statuses = self._config.github_repos, ("queued", "in_progress")
        urls = [f"/repos/{r}/actions/runs?status={s}&" for r in repos for s in statuses]
        return await self._pages(urls, "workflow_runs")

    async def _listed(self, listed: Listing, pages: int, now: datetime) -> Last:
        """The listed runs and their jobs, read again only for a run whose listing entry changed
        (or, in progress, was last read REREAD_S ago; or changed in the second it was read), kept
        until the pace allows the next reading."""
        at = now.timestamp()
        runs = _runs_of(listed)
        paths = {run_id: path_of(run.get("url")) for run_id, run in runs.items()}
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
        every_run = all(isinstance(r, dict) and "id" in r for r in listed.items)
        every_page = all(paths.values()) and all(jobs.complete for jobs in read)
        complete = bool(self._config.github_repos) and listed.complete and every_run and every_page
        paced = self._pace(pages, runs, at)
        every = max(paced[0] if paced else 0.0, self._config.metrics_interval_seconds)
        self._last = Last(runs, Listing(items, complete), at + every)
        return self._last

    async def _fed(
        self, record: JobRecord, now: datetime
    ) -> tuple[Reconciled, list[dict[str, Any]]]:
        """The last reconcile (run first when due) and the record's jobs still to finish. A failed
        reconcile is retried RECONCILE_S later (the first must succeed: it lists the runners)."""
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
        return last, jobs

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
        paths = {run_id: path_of(runs[run_id].get("url")) for run_id in unread}
        # A run missing from an incomplete listing may still be running.
        finished = finished_runs(live, runs, at - LATE_S) if listed.complete else {}
        paths |= {run_id: path_of(url) for run_id, url in finished.items()}
        paths = {run_id: path for run_id, path in paths.items() if path}
        # A bounded share each time, the finished runs first (their jobs show as still queued): a
        # busy repository's first reconcile would outlast a reading; the rest comes next reading.
        ordered = sorted(paths, key=lambda run_id: run_id not in finished)
        left = ordered[RUNS_PER_RECONCILE:]
        paths = {run_id: paths[run_id] for run_id in ordered[:RUNS_PER_RECONCILE]}
        found, whole, counted = await self._jobs_read(paths)
        shown, ended_runs = {d.id for d in found}, finished.keys() & whole
        gone = [j for j in live if j.get("run_id") in ended_runs and j.get("id") not in shown]
        found += [d for job in gone if (d := ended(job, now)) is not None]
        await record.listed(found, at)
        self._changed = last_changes(runs, [d.job for d in found], changed)
        self._read_at = read_at | dict.fromkeys(paths.keys() & set(unread), at)
        if said := fixed({job.get("id"): job for job in known}, found, since):
            log.info("reconcile: %s (%d runs read)", "; ".join(said), len(paths))
        rate, share = self.api.rate, self._config.github_reading_share
        cost = listed.counted + runners.counted + counted
        # Paced as the readings are: as often as RECONCILE_S, if the share allows it.
        every = RECONCILE_S
        if left:
            every = self._config.metrics_interval_seconds
        elif rate is not None:
            every = reading_pace((), cost, rate, share=share, now=at, shortest=RECONCILE_S)[0]
        repos, every_run = self._config.github_repos, len(runs) == len(listed.items)
        complete = bool(repos) and listed.complete and every_run and whole == paths.keys()
        return Reconciled(runs, runners.items, complete and not left, at + every)

    async def _jobs_read(self, paths: dict[Any, str]) -> tuple[list[JobDelivery], set[Any], int]:
        """Each run's jobs as deliveries, the runs read to the end, and the requests counted."""
        read = await all_or_none([self._run_jobs(path) for path in paths.values()])
        found: list[JobDelivery] = []
        for path, jobs in zip(paths.values(), read, strict=True):
            repository = "/".join(path.split("/")[2:4])
            found += [d for job in jobs.items if (d := listed_job(job, repository)) is not None]
        whole = {run_id for run_id, jobs in zip(paths, read, strict=True) if jobs.complete}
        return found, whole, sum(jobs.counted for jobs in read)

    async def _run_jobs(self, path: str) -> Listing:
        """A run's jobs; none (complete) where GitHub no longer has the run (deleted)."""
        try:
            return await self._listing(f"{path}/jobs?", "jobs")
        except BackendError as failed:
            if failed.status == 404:
                return Listing([], True, 1)
            raise

    def _ours(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The jobs of the configured repositories (an organization's webhook delivers all)."""
        repos = {repo.casefold() for repo in self._config.github_repos}
        return [job for job in jobs if str(job.get("repository")).casefold() in repos]

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
    `shortest`, in steps) at which every reading before the reset fits in `remaining` less the
    `1 - share` of the limit kept for the token's other users. A reading T from now costs `pages`
    and a request per run in `due` (ascending) under T; none fits: wait for the reset."""
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
