"""The busy repository fed by GitHub's `workflow_job` deliveries (recorded as the endpoint
records them, a few lost on purpose), read every minute for three hours on one clock with
GitHub's stand-in: a reading costs no request, polling only reconciles every ten minutes, and what
a lost delivery left wrong is right after the reconcile that can see it. Then the rules that
choose what a reconcile reads, and what it says it fixed."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.backends.github_api import GithubApi
from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.github_feed import (
    RUNS_PER_RECONCILE,
    finished_runs,
    fixed,
    last_changes,
    runs_to_read,
)
from bot.domain.queue_cost.jobs import runner_type_of
from bot.domain.queue_cost.workflow_jobs import JobDelivery, job_delivery, listed_job
from bot.storage.workflow_jobs import WorkflowJobs
from tests.backends.test_github_quota import settings
from tests.support.busy_github import BusyGithub
from tests.support.store import KEYS

LOST = 0.01  # of the deliveries, lost on their way (GitHub gave up, the endpoint was down)
BUDGET = 5000  # a token's hour


@dataclass
class Lost:
    """The deliveries lost, and the last delivered change of each run (whole-second times)."""

    jobs: dict[int, tuple[Any, str]] = field(default_factory=dict)  # job id: (run id, when)
    last_told: dict[Any, str] = field(default_factory=dict)  # run id: when

    def hidden(self, job_id: int, open_runs: set[Any]) -> bool:
        """A lost change that a later delivered change of its (still open) run hides from the
        reconcile: the run's `updated_at` says nothing the record does not know."""
        run_id, when = self.jobs[job_id]
        return run_id in open_runs and self.last_told.get(run_id, "") >= when


async def deliver(
    gh: BusyGithub, record: WorkflowJobs, lost: Lost, pick: random.Random, share: float = LOST
) -> None:
    """The minute's changes, as GitHub delivers them: all at once, `share` of them lost."""
    changes, gh.changes = gh.changes, []
    calls = []
    for n, change in enumerate(changes):
        action, job, when = change
        if pick.random() < share:
            lost.jobs[job["id"]] = (job["run_id"], when)
            continue
        lost.last_told[job["run_id"]] = when
        delivered = job_delivery(gh.delivery(change))
        assert isinstance(delivered, JobDelivery)
        kind = f"workflow_job.{action}"
        calls.append(record.record(f"{gh.clock()}-{n}", kind, delivered, gh.clock()))
    for start in range(0, len(calls), 8):
        await asyncio.gather(*calls[start : start + 8])


@pytest.mark.slow
async def test_a_busy_repository_fed_by_deliveries_spends_under_a_tenth_of_the_hour(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.backends.metrics.github")
    gh = BusyGithub()
    config = settings()
    metrics = GithubMetrics(config, GithubApi(config, gh.client(), clock=gh.clock))
    record = WorkflowJobs(redis, KEYS)
    metrics.fed_by(record)
    # The webhook was made with the repository: the record has what it did before the bot came.
    lost, pick, start = Lost(), random.Random(7), gh.clock()
    await deliver(gh, record, lost, pick)
    reconciles = hidden_seen = bounded_ones = 0
    for minute in range(180):
        if minute:
            gh.clock.now += 60
            gh.minute()
            await deliver(gh, record, lost, pick)
        listings = sum("status=queued" in url for url in gh.actions.calls)
        spent, asked = len(gh.actions.spent_at), len(gh.actions.calls)
        fleet = await metrics.read(now=gh.clock.at())
        reconciled = sum("status=queued" in url for url in gh.actions.calls) > listings
        reconciles += reconciled
        if not reconciled:
            assert len(gh.actions.spent_at) == spent, "a reading between reconciles is free"

        live = {job["id"]: job["status"] for job in await record.live()}
        open_jobs = [job for run in gh.runs for job in run["jobs"]]
        open_runs = {run["id"] for run in gh.runs}
        # What the record says of each job still to finish, or of each GitHub says is:
        # a lost delivery's job may be wrong until a reconcile sees it, no other. A finished
        # run's jobs are all completed: wrong only while the record has them live.
        wrong = {
            job["id"] for job in open_jobs if live.get(job["id"], "completed") != job["status"]
        }
        wrong |= live.keys() - {job["id"] for job in open_jobs}
        assert wrong <= lost.jobs.keys(), "every delivered change shows on this reading"
        # A reconcile that read its most runs leaves the rest to the next reading's.
        bounded = sum("/jobs" in url for url in gh.actions.calls[asked:]) >= RUNS_PER_RECONCILE
        bounded_ones += reconciled and bounded
        if reconciled and not bounded:
            left = {job_id for job_id in wrong if not lost.hidden(job_id, open_runs)}
            assert not left, f"a reconcile leaves {len(left)} lost deliveries' jobs wrong"
            hidden_seen = max(hidden_seen, len(wrong))
        # The root's numbers are the record's: queued by type, and busy runners as the jobs
        # running say.
        status = Counter((runner_type_of(job), job["status"]) for job in open_jobs)
        off = Counter(runner_type_of(gh.jobs[job_id]) for job_id in wrong)
        for runner_type, metric in fleet.runner_types.items():
            assert abs(metric.queued - status[runner_type, "queued"]) <= off[runner_type]
            assert abs(metric.busy - status[runner_type, "in_progress"]) <= off[runner_type]
    await metrics.aclose()

    hours = [
        sum(start + h * 3600 <= t < start + (h + 1) * 3600 for t in gh.actions.spent_at)
        for h in range(3)
    ]
    print(
        f"\nfed by deliveries: counted requests per hour {hours}; {reconciles} reconciles; lost "
        f"{len(lost.jobs)} deliveries, at most {hidden_seen} jobs wrong after a reconcile"
    )
    assert gh.transport.statuses.count(403) == gh.transport.statuses.count(429) == 0
    assert all(n < BUDGET / 10 for n in hours), hours
    # Every ten minutes, and at the reading after one that read its most runs.
    assert reconciles == 18 + bounded_ones, "every ten minutes"
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reconcile: ")]
    assert any("jobs a missed delivery left queued are" in line for line in said), said


RUN = {"id": 7, "status": "in_progress", "updated_at": "2026-03-02T09:10:00Z"}
AT_9_10 = 1772442600.0  # 2026-03-02T09:10:00Z


def test_a_run_is_read_where_the_record_may_be_wrong_and_a_long_one_hourly() -> None:
    runs, known = {7: RUN}, [{"run_id": 7, "created_at": "2026-03-02T09:10:00Z"}]
    last = last_changes(runs, known, {})
    assert last == {7: AT_9_10}
    fresh = {7: AT_9_10}
    assert runs_to_read(runs, last, fresh, AT_9_10 + 600) == [], "nothing the record lacks"
    assert runs_to_read(runs, {}, fresh, AT_9_10) == [7], "none of its jobs known"
    later = {7: {**RUN, "updated_at": "2026-03-02T09:11:00Z"}}
    assert runs_to_read(later, last, fresh, AT_9_10 + 600) == [7], "changed since"
    # A change the record missed, hidden by one it has: the hourly read finds it.
    assert runs_to_read(runs, last, fresh, AT_9_10 + 3600) == [7]
    queued = {7: {**RUN, "status": "queued"}}
    assert runs_to_read(queued, last, fresh, AT_9_10 + 3600) == [], "a queued run has none begun"


def test_a_finished_runs_jobs_are_read_and_a_reconcile_says_what_it_fixed() -> None:
    job = {"id": 1, "run_id": 9, "run_url": "https://api.github.com/repos/o/r/actions/runs/9"}
    live = [{**job, "created_at": "2026-03-02T09:00:00Z", "status": "queued", "labels": ["x"]}]
    assert finished_runs(live, {}, AT_9_10) == {9: job["run_url"]}
    assert finished_runs(live, {9: RUN}, AT_9_10) == {}, "still listed"
    assert finished_runs(live, {}, AT_9_10 - 900) == {}, "queued since the listing"
    done = listed_job(
        {**live[0], "status": "completed", "completed_at": "2026-03-02T09:05Z"}, "o/r"
    )
    assert done is not None and done.job["repository"] == "o/r"
    new = listed_job({**live[0], "id": 2}, "o/r")
    assert new is not None and listed_job({"id": 3}, "o/r") is None
    said = fixed({1: live[0]}, [done, new], since=0.0)
    assert said == [
        "1 job no delivery told of is recorded (queued)",
        "1 job a missed delivery left queued is completed",
    ]


async def test_a_reconcile_refused_by_the_rate_limit_leaves_the_deliveries_reading(
    redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    gh = BusyGithub()
    config = settings()
    metrics = GithubMetrics(config, GithubApi(config, gh.client(), clock=gh.clock))
    record = WorkflowJobs(redis, KEYS)
    metrics.fed_by(record)
    await deliver(gh, record, Lost(), random.Random(7), share=0.0)
    first = await metrics.read(now=gh.clock.at())
    # Another process on the token spends the hour; the repository goes on, its deliveries come.
    gh.actions.remaining = 0
    for _ in range(11):
        gh.clock.now += 60
        gh.minute()
        await deliver(gh, record, Lost(), random.Random(7), share=0.0)
        fleet = await metrics.read(now=gh.clock.at())
    await metrics.aclose()

    assert gh.transport.statuses.count(403) == 1, "asked once, then the reset waited for"
    assert "reconcile: GitHub's rate limit is exhausted" in caplog.text
    queued = Counter(runner_type_of(job) for job in gh.jobs.values() if job["status"] == "queued")
    assert fleet.at > first.at
    assert {t: m.queued for t, m in fleet.runner_types.items()} == dict(queued)
