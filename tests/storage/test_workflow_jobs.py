"""GitHub's jobs as workflow_job deliveries tell them, against a real redis-server: each delivery
recorded once by its ID, a job's state only moving forward whatever order its deliveries come in,
a replay of an old state refused as stale, the finished kept a day and the kinds heard counted,
at most the last hour's and a cap of them whatever is sent."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from bot.domain.queue_cost.workflow_jobs import JobDelivery, job_delivery
from bot.storage.workflow_jobs import SLOT_S, WorkflowJobs
from tests.support.payloads import fixture_json
from tests.support.store import KEYS

NOW = datetime(2026, 11, 30, 2, 30, tzinfo=UTC)
QUEUED = fixture_json("backends/github/workflow_job-queued.json")


def delivery(action: str, job_id: int = 289782451, **job: Any) -> JobDelivery:
    payload = copy.deepcopy(QUEUED)
    payload["action"] = action
    payload["workflow_job"].update({"id": job_id, "status": action, **job})
    found = job_delivery(payload)
    assert isinstance(found, JobDelivery), found
    return found


STARTED = {"started_at": "2026-11-30T02:25:00Z", "runner_id": 7, "runner_name": "i-0abc"}
DONE = {**STARTED, "completed_at": "2026-11-30T02:29:00Z", "conclusion": "success"}


async def test_a_job_moves_forward_whatever_order_its_deliveries_come_in(redis: Redis) -> None:
    jobs, now = WorkflowJobs(redis, KEYS), NOW.timestamp()
    assert (
        await jobs.record(
            "d-2", "workflow_job.in_progress", delivery("in_progress", **STARTED), now
        )
        == "recorded"
    )
    # The queued delivery arrives after the start: the job stays started.
    assert await jobs.record("d-1", "workflow_job.queued", delivery("queued"), now) == "kept"
    [live] = await jobs.live()
    assert live["status"] == "in_progress" and live["runner_name"] == "i-0abc"
    assert live["labels"] == ["linux.4xlarge"] and live["repository"] == "pytorch/pytorch"
    assert (
        await jobs.record("d-3", "workflow_job.completed", delivery("completed", **DONE), now)
        == "recorded"
    )
    assert await jobs.live() == []
    [done] = await jobs.done(now - 3600, now)
    assert done["conclusion"] == "success" and done["created_at"] == "2026-11-30T02:21:11Z"
    # A late queued or started delivery never brings a finished job back.
    assert await jobs.record("d-4", "workflow_job.queued", delivery("queued"), now) == "kept"
    assert await jobs.live() == []


async def test_a_delivery_is_recorded_once_and_a_replay_of_an_old_state_is_stale(
    redis: Redis,
) -> None:
    jobs, now = WorkflowJobs(redis, KEYS), NOW.timestamp()
    assert await jobs.record("d-1", "workflow_job.queued", delivery("queued"), now) == "recorded"
    assert await jobs.record("d-1", "workflow_job.queued", delivery("queued"), now) == "duplicate"
    heard = await jobs.heard(now)
    assert heard == {"workflow_job.queued": (1, now)}, "a duplicate is not counted twice"
    # The same body under a new ID a day and more later: its job may be forgotten, so refused.
    later = now + 25 * 3600
    assert await jobs.record("d-9", "workflow_job.queued", delivery("queued"), later) == "stale"


async def test_a_delivery_without_a_job_is_kept_an_hour_and_a_jobs_a_day(redis: Redis) -> None:
    """A hook that sends every event keeps an hour of their signatures, not a day's; a job's
    delivery is kept past the day its state is, so a replay of it is stale, never new."""
    jobs, now = WorkflowJobs(redis, KEYS), NOW.timestamp()
    assert await jobs.record("sig-ping", "ping", None, now) == "kept"
    assert await jobs.record("sig-ping", "ping", None, now) == "duplicate"
    assert await jobs.record("sig-job", "workflow_job.queued", delivery("queued"), now) == (
        "recorded"
    )
    assert 3500 < await redis.ttl(KEYS.github_delivery("sig-ping")) <= 3600
    assert await redis.ttl(KEYS.github_delivery("sig-job")) > 24 * 3600


async def test_the_record_keeps_a_day_and_its_cap_and_counts_the_last_hour(redis: Redis) -> None:
    jobs, start = WorkflowJobs(redis, KEYS, cap=3), NOW.timestamp()
    for n in range(5):
        created = (NOW + timedelta(minutes=n)).isoformat()
        job = delivery("queued", job_id=n + 1, created_at=created, started_at=created)
        await jobs.record(f"d-{n}", "workflow_job.queued", job, start + n * 60)
    assert sorted(j["id"] for j in await jobs.live()) == [3, 4, 5], "the oldest past the cap go"
    await jobs.record("p-1", "ping", None, start + 300)
    heard = await jobs.heard(start + 300)
    assert heard["workflow_job.queued"][0] == 5 and heard["ping"] == (1, start + 300)
    # An hour on, nothing was heard in the last hour; a day on, the queued jobs are gone.
    assert await jobs.heard(start + 300 + 3601) == {}
    late = (NOW + timedelta(days=1, minutes=10)).isoformat()
    job = delivery("queued", job_id=99, created_at=late, started_at=late)
    await jobs.record("d-99", "workflow_job.queued", job, start + 86400 + 600)
    assert [j["id"] for j in await jobs.live()] == [99]
    assert 0 < await redis.ttl(KEYS.github_jobs) <= 25 * 3600


async def test_the_kinds_heard_keep_their_cap_and_the_hour_whatever_is_sent(
    redis: Redis,
) -> None:
    jobs, now = WorkflowJobs(redis, KEYS, kinds_kept=3), NOW.timestamp()
    for n in range(6):
        await jobs.record(f"s-{n}", f"invented_{n}", None, now + n)
    slot = KEYS.github_events_slot(int(now // SLOT_S))
    assert await redis.hgetall(slot) == {
        "invented_0": "1",
        "invented_1": "1",
        "invented_2": "1",
        "other": "3",
    }
    # The newest three kinds; the oldest falls out.
    assert await jobs.heard(now + 5) == {
        "invented_1": (1, now + 1),
        "invented_2": (1, now + 2),
        "other": (3, now + 5),
    }
    # An hour on, what came before it is dropped, not only left unread; a delivery without a
    # job is recorded once too.
    assert await jobs.record("s-late", "ping", None, now + 5 + 3601) == "kept"
    assert await jobs.record("s-late", "invented", None, now + 5 + 3601) == "duplicate"
    assert await redis.zrange(KEYS.github_events, 0, -1) == ["ping"]


async def test_a_listing_fills_in_what_a_missed_delivery_left(redis: Redis) -> None:
    jobs, now = WorkflowJobs(redis, KEYS), NOW.timestamp()
    await jobs.record("d-1", "workflow_job.queued", delivery("queued"), now)
    # The completed delivery was lost; the run's listing finds the job finished.
    assert (
        await jobs.listed([delivery("completed", **DONE), delivery("queued", job_id=5)], now) == 2
    )
    assert [j["id"] for j in await jobs.live()] == [5]
    assert await jobs.listed([delivery("completed", **DONE)], now) == 0, "already so"
    assert await jobs.heard(now) == {"workflow_job.queued": (1, now)}, "a listing is no delivery"
