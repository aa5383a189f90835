"""The HUD's queued jobs followed from one listing to the next, against a real redis-server: a
job gone from the list is kept with the last listing that had it and the first that did not; one
listed again never left; a listing with rows left unread, or older than the last, tells no job
gone; the gone are kept a day and a cap. Then a simulated queue with known waits: the cost read
from the followed listings against the truth."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.backends.metrics.hud import job_rows
from bot.domain.queue_cost.cost import waited_of_left
from bot.domain.queue_cost.jobs import JobsListing
from bot.storage.listed_jobs import ListedJobs
from tests.support.store import KEYS

T0 = datetime(2026, 11, 30, 2, 30, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"


def row(n: int, queued_s: float, *, workflow: str = "pull", machine: str = GPU) -> dict[str, Any]:
    """A `queued_jobs` row as the HUD answers it."""
    pr = workflow == "pull"
    return {
        "queue_s": int(queued_s),
        "name": f"{workflow} / linux-jammy / test (default, 1, 5, {machine})",
        "html_url": f"https://github.com/pytorch/pytorch/actions/runs/1/job/{n}",
        "machine_type": machine,
        "head_sha": f"{n:040x}",
        "head_branch": f"gh/someone/{n}/head" if pr else "main",
        "event": "pull_request" if pr else "push",
        "source_type": "other" if pr else "main",
        "ciflow_id": None,
    }


def listing(rows: list[dict[str, Any]], now: datetime, *, complete: bool = True) -> JobsListing:
    jobs, skipped = job_rows(rows, now=now)
    assert not skipped
    return JobsListing(tuple(jobs), complete=complete, listed_over_mins=5)


async def test_a_job_gone_from_the_list_is_kept_with_when_it_was_last_seen(redis: Redis) -> None:
    followed = ListedJobs(redis, KEYS)
    minute = timedelta(minutes=1)
    assert await followed.follow(listing([row(1, 400), row(2, 360)], T0), now=T0) == 0
    assert await followed.follow(listing([row(1, 460)], T0 + minute), now=T0 + minute) == 1
    [gone] = await followed.left(T0, T0 + 2 * minute)
    assert (gone.last_listed, gone.gone_by) == (T0, T0 + minute)
    assert gone.created_at == T0 - timedelta(seconds=360)
    assert gone.started_at == T0 + minute / 2
    assert (gone.runner_type, gone.workflow, gone.pull_request) == (GPU, "pull", True)
    assert gone.branch == "gh/someone/2/head"
    # Job 1 goes at the third listing; found gone once, not at every listing after.
    assert await followed.follow(listing([], T0 + 2 * minute), now=T0 + 2 * minute) == 1
    assert await followed.follow(listing([], T0 + 3 * minute), now=T0 + 3 * minute) == 0
    assert len(await followed.left(T0, T0 + 3 * minute)) == 2


async def test_a_job_listed_again_never_left(redis: Redis) -> None:
    followed = ListedJobs(redis, KEYS)
    minute = timedelta(minutes=1)
    await followed.follow(listing([row(1, 400)], T0), now=T0)
    await followed.follow(listing([], T0 + minute), now=T0 + minute)  # the HUD lagging a moment
    await followed.follow(listing([row(1, 520)], T0 + 2 * minute), now=T0 + 2 * minute)
    assert await followed.left(T0, T0 + 3 * minute) == []
    await followed.follow(listing([], T0 + 3 * minute), now=T0 + 3 * minute)
    [gone] = await followed.left(T0, T0 + 3 * minute)
    assert (gone.last_listed, gone.gone_by) == (T0 + 2 * minute, T0 + 3 * minute)


async def test_an_incomplete_or_older_listing_tells_no_job_gone(redis: Redis) -> None:
    followed = ListedJobs(redis, KEYS)
    minute = timedelta(minutes=1)
    await followed.follow(listing([row(1, 400), row(2, 400)], T0), now=T0)
    # Rows left unread may have been job 2's: it is not taken as gone.
    at = T0 + minute
    assert await followed.follow(listing([row(1, 460)], at, complete=False), now=at) == 0
    # A replica's listing read before the last one followed changes nothing.
    assert await followed.follow(listing([], T0), now=T0) is None
    at = T0 + 2 * minute
    assert await followed.follow(listing([row(1, 520), row(2, 520)], at), now=at) == 0
    assert await followed.left(T0, T0 + 3 * minute) == []


async def test_the_gone_are_kept_a_day_and_no_more_than_the_cap(redis: Redis) -> None:
    followed = ListedJobs(redis, KEYS, keep_s=3600, cap=3)
    minute = timedelta(minutes=1)
    await followed.follow(listing([row(n, 400) for n in range(5)], T0), now=T0)
    await followed.follow(listing([], T0 + minute), now=T0 + minute)
    assert len(await followed.left(T0, T0 + 2 * minute)) == 3, "the cap"
    later = T0 + timedelta(hours=2)
    await followed.follow(listing([row(9, 400)], later), now=later)
    assert await followed.left(T0, later) == [], "past the span kept"
    assert await redis.ttl(KEYS.left_jobs_at) <= 2 * 3600


@pytest.mark.parametrize("seed", range(4))
async def test_a_simulated_queue_costs_within_a_tenth_of_its_true_waits(
    redis: Redis, seed: int
) -> None:
    """Two hours of a busy GPU queue: jobs arrive at random, wait 0–40 min, and are listed by
    the HUD's rule (queued past 5 min, age in whole seconds) at each minute's reading, a reading
    now and then lost. What the followed listings say the jobs that waited past 5 min cost,
    against what they truly waited."""
    rng = random.Random(seed)
    followed = ListedJobs(redis, KEYS)
    jobs = []  # (n, created s, started s, workflow)
    for n in range(300):
        created = rng.uniform(0, 7200)
        workflow = rng.choice(["pull", "pull", "trunk", "periodic"])
        waited = rng.uniform(0, 40 * 60) if workflow != "periodic" else rng.uniform(0, 10 * 60)
        jobs.append((n, created, created + waited, workflow))
    for minute in range(0, 170):  # past the last start (2 h + 40 min)
        if rng.random() < 0.05:
            continue  # the HUD did not answer this reading
        at = minute * 60 + rng.uniform(0, 5)
        now = T0 + timedelta(seconds=at)
        rows = [
            row(n, at - created, workflow=workflow)
            for n, created, started, workflow in jobs
            if created + 300 < at < started
        ]
        await followed.follow(listing(rows, now), now=now)
    end = T0 + timedelta(minutes=170)
    cost = waited_of_left(await followed.left(T0, end), GPU, T0, end, 30.0, 5.0)
    seen = [(s - c) / 60 for _, c, s, _ in jobs if s - c > 300 + 60]  # listed at least once
    past = [m - 30 for m in seen if m > 30]
    assert len(seen) <= cost.jobs <= sum(s - c > 300 for _, c, s, _ in jobs)
    assert abs(cost.minutes - sum(seen)) <= 0.1 * sum(seen), (cost.minutes, sum(seen))
    assert abs(cost.minutes_past - sum(past)) <= 0.1 * sum(past), (cost.minutes_past, sum(past))
    assert [name for name, _ in cost.top_workflows()][:1] == ["pull"]
    pulls = [(s - c) / 60 for _, c, s, w in jobs if w == "pull"]
    # Each PR's own branch: those of the pull jobs past 30 min, give or take a reading.
    assert sum(m > 31 for m in pulls) <= (cost.prs or 0) <= sum(m > 29 for m in pulls)


async def test_a_job_unlisted_past_the_gap_is_taken_as_gone_even_while_rows_go_unread(
    redis: Redis,
) -> None:
    """One HUD row that never reads makes every listing incomplete: a job not listed for longer
    than a wait can be told across is taken as gone then (its wait said as not known), so the
    jobs followed stay those of the last quarter hour, not every job ever listed."""
    followed = ListedJobs(redis, KEYS)
    for minute in range(120):
        now = T0 + timedelta(minutes=minute)
        # Ten jobs listed at a time, each for ten minutes: 120 jobs in two hours.
        rows = [row(n, 400 + (minute - n) * 60) for n in range(max(minute - 9, 0), minute + 1)]
        await followed.follow(listing(rows, now, complete=False), now=now)
    assert await redis.hlen(KEYS.listed_jobs) <= 10 + 16
    gone = await followed.left(T0, T0 + timedelta(hours=2))
    assert len(gone) >= 120 - 10 - 16
    assert all(job.gone_by - job.last_listed > timedelta(minutes=15) for job in gone)
