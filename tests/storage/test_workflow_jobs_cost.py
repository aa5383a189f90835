"""What the jobs GitHub's deliveries recorded waited: the record's REST-shaped jobs (still live
and done) read by the cost as they are."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from bot.domain.queue_cost.cost import GITHUB, waited_of_jobs
from bot.domain.queue_cost.workflow_jobs import JobDelivery, job_delivery
from bot.render.cost import cost_said
from bot.storage.workflow_jobs import WorkflowJobs
from tests.support.payloads import fixture_json
from tests.support.store import KEYS

QUEUED = fixture_json("backends/github/workflow_job-queued.json")
CREATED = datetime(2026, 11, 30, 2, 21, 11, tzinfo=UTC)  # the fixture's `created_at`


def delivery(action: str, job_id: int, **job: Any) -> JobDelivery:
    payload = copy.deepcopy(QUEUED)
    payload["action"] = action
    payload["workflow_job"].update({"id": job_id, "status": action, **job})
    found = job_delivery(payload)
    assert isinstance(found, JobDelivery), found
    return found


def started(after_mins: float, **more: Any) -> dict[str, Any]:
    at = CREATED + timedelta(minutes=after_mins)
    return {"started_at": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "runner_id": 7, **more}


async def test_the_jobs_github_delivered_waited_past_the_threshold(redis: Redis) -> None:
    jobs, now = WorkflowJobs(redis, KEYS), (CREATED + timedelta(minutes=30)).timestamp()
    done = started(8, completed_at="2026-11-30T02:40:00Z", conclusion="success")
    recorded = [
        delivery("in_progress", 1, **started(12)),
        delivery("completed", 2, **done),
        delivery("in_progress", 3, **started(1, head_branch="main")),
        delivery("queued", 4),
    ]
    for n, found in enumerate(recorded):
        await jobs.record(f"d-{n}", f"workflow_job.{found.action}", found, now)
    read = [*await jobs.live(), *await jobs.done(now - 3600, now + 3600)]
    waited = waited_of_jobs(
        read, "linux.4xlarge", CREATED, CREATED + timedelta(minutes=30), threshold_mins=5
    )
    assert (waited.jobs, waited.jobs_past, waited.unreadable) == (3, 2, 0)
    assert cost_said(waited) == (
        "10 job-minutes past 5 min: 2 jobs in 1 workflow, pull 100%, 1 branch · "
        "21 job-minutes waited by 3 jobs · longest 12 min (GitHub's job times) · "
        "pull requests not known: GitHub's jobs do not say which pull request ran them"
    )
    assert waited.source == GITHUB
