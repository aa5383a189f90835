"""The arrival history against a real Redis: each job counts once, however often and however
many replicas list it, in the slot it was created in; the same hour a day before is kept. So
do the minutes of the jobs that finished, for "whose jobs got slower"."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.domain.queue_cost.jobs import FinishedJob, QueuedJob, Trigger
from bot.storage.fleet import JobArrivals, job_slot
from bot.storage.keys import Keys

# Ten minutes past the current hour (keys expire by the real clock).
NOW = datetime.now(UTC).replace(minute=10, second=0, microsecond=0)
GPU = "linux.g5.4xlarge.nvidia.gpu"


def job(n: int, workflow: str, created_at: datetime, runner_type: str = GPU) -> QueuedJob:
    return QueuedJob(
        runner_type=runner_type,
        workflow=workflow,
        job="test",
        repository="pytorch/pytorch",
        url=f"https://github.com/pytorch/pytorch/actions/runs/1/job/{n}",
        created_at=created_at,
        trigger=Trigger.SCHEDULE,
        run_attempt=1,
        source_id=f"github:{n}",
    )


async def test_a_job_listed_again_is_not_a_new_arrival(redis: Redis) -> None:
    arrivals = JobArrivals(redis, Keys("qp"))
    jobs = [job(n, "periodic", NOW - timedelta(minutes=5)) for n in range(6)]

    first = await arrivals.record(jobs, now=NOW)
    again = await arrivals.record([*jobs, job(99, "periodic", NOW)], now=NOW)

    assert first.last_hour == {(GPU, "periodic"): 6}
    assert again.last_hour == {(GPU, "periodic"): 7}, "only the new job counted"
    assert not again.history, "nothing recorded a day before"


async def test_two_replicas_listing_at_once_count_each_job_once(redis: Redis) -> None:
    replicas = [JobArrivals(redis, Keys("qp")) for _ in range(2)]
    jobs = [job(n, "pull", NOW - timedelta(seconds=n)) for n in range(50)]

    await asyncio.gather(*(r.record(jobs, now=NOW) for r in replicas for _ in range(3)))

    counted = await replicas[0].record([], now=NOW)
    assert counted.last_hour == {(GPU, "pull"): 50}


async def test_the_last_hour_is_compared_with_the_same_hour_a_day_before(redis: Redis) -> None:
    arrivals = JobArrivals(redis, Keys("qp"))
    yesterday = NOW - timedelta(days=1)
    await arrivals.record(
        [job(n, "periodic", yesterday - timedelta(minutes=2)) for n in range(12)],
        now=yesterday,
    )
    surge = [job(100 + n, "periodic", NOW - timedelta(minutes=3)) for n in range(38)]
    # 40 minutes ago counts in full; 70 minutes ago is not in the last hour.
    earlier = [job(200 + n, "pull", NOW - timedelta(minutes=40)) for n in range(6)]
    older = [job(300 + n, "pull", NOW - timedelta(minutes=70)) for n in range(4)]

    seen = await arrivals.record([*surge, *earlier, *older], now=NOW)

    assert seen.history
    assert seen.last_hour == {(GPU, "periodic"): 38, (GPU, "pull"): 6}
    assert seen.day_before == {(GPU, "periodic"): 12}


async def test_the_history_expires_a_day_and_more_after_its_slot(redis: Redis) -> None:
    keys = Keys("qp")
    await JobArrivals(redis, keys).record([job(1, "pull", NOW)], now=NOW)
    slot = job_slot(NOW)
    for key in (keys.jobs_seen(slot), keys.job_arrivals(slot)):
        expires = await redis.expiretime(key)
        assert expires == (slot + 1) * 300 + 26 * 3600, key


async def test_jobs_from_the_future_or_too_old_are_not_counted(redis: Redis) -> None:
    arrivals = JobArrivals(redis, Keys("qp"))
    seen = await arrivals.record(
        [job(1, "pull", NOW + timedelta(hours=2)), job(2, "pull", NOW - timedelta(days=3))],
        now=NOW,
    )
    assert seen.last_hour == {} and await redis.dbsize() == 0, "nothing stored"


async def test_a_tab_in_a_name_does_not_split_it(redis: Redis) -> None:
    arrivals = JobArrivals(redis, Keys("qp"))
    seen = await arrivals.record([job(1, "pull\tnightly", NOW, runner_type="a\tb")], now=NOW)
    assert seen.last_hour == {("a b", "pull nightly"): 1}


def done(n: int, workflow: str, finished_at: datetime, minutes: float) -> FinishedJob:
    return FinishedJob(GPU, workflow, finished_at, minutes, f"github:{n}")


async def test_finished_jobs_give_each_workflows_mean_minutes_now_and_a_day_before(
    redis: Redis,
) -> None:
    arrivals = JobArrivals(redis, Keys("qp"))
    yesterday = NOW - timedelta(days=1)
    before = [done(n, "periodic", yesterday - timedelta(minutes=5), 20) for n in range(3)]
    await arrivals.record([], now=yesterday, finished=before)
    now = [done(10 + n, "periodic", NOW - timedelta(minutes=5), m) for n, m in enumerate((35, 45))]

    seen = await arrivals.record([], now=NOW, finished=now)
    again = await arrivals.record([], now=NOW, finished=now)  # listed again: counted once

    assert seen == again
    assert seen.minutes_last_hour == {(GPU, "periodic"): 40.0}
    assert seen.minutes_day_before == {(GPU, "periodic"): 20.0}
    assert seen.last_hour == {}, "a finished job is not an arrival"


async def test_a_workflow_named_m_has_its_own_minutes(redis: Redis) -> None:
    """A workflow's name is GitHub's to choose: one called `m` is a workflow like any, not the
    minutes of another, and a field that does not read as a number costs only itself."""
    arrivals = JobArrivals(redis, Keys("qp"))
    finished = [
        done(1, "m", NOW - timedelta(minutes=5), 15.0),
        done(2, "build", NOW - timedelta(minutes=5), 10.0),
    ]
    await arrivals.record([job(3, "m", NOW - timedelta(minutes=4))], now=NOW, finished=finished)
    await redis.hset(Keys("qp").job_durations(job_slot(NOW)), f"{GPU}\tbroken", "many")
    seen = await arrivals.record([], now=NOW)
    assert seen.minutes_last_hour == {(GPU, "m"): 15.0, (GPU, "build"): 10.0}
    assert seen.last_hour == {(GPU, "m"): 1}
