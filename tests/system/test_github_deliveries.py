"""With `METRICS_BACKEND=github` and GITHUB_WEBHOOK_SECRET, a running bot reads the queue from
the `workflow_job` deliveries' record (as the endpoint of any replica writes it): jobs queued
show in `/queue` and `/queue jobs` at the next reading, with no request to GitHub for it."""

from __future__ import annotations

import copy
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.actions.commands import run_command
from bot.actions.core import Actor
from bot.domain.queue_cost.workflow_jobs import JobDelivery, job_delivery
from sandbox.serve import RunningServer
from tests.support.fakes.github_api import FakeGithub
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot

ARM = "linux.arm64.m7g.4xlarge"
BIG = "linux.2xlarge"  # one of the runner types the alert names
QUEUED = fixture_json("backends/github/workflow_job-queued.json")


def queued(job_id: int, at: datetime, label: str = ARM) -> JobDelivery:
    payload = copy.deepcopy(QUEUED)
    created = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    job = {"id": job_id, "run_id": 4100, "labels": [label], "name": f"arm ({job_id})"}
    payload["workflow_job"].update(job, created_at=created, started_at=created)
    found = job_delivery(payload)
    assert isinstance(found, JobDelivery), found
    return found


async def test_jobs_delivered_show_in_the_queue_at_the_next_reading_at_no_request(
    settings_for: Any, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    fake, server = github_jobs
    settings = settings_for(
        metrics_backend="github",
        github_token="ghp-test",
        github_api_url=server.url,
        github_org="pytorch",
        github_repos="pytorch/pytorch",
        github_webhook_secret="webhook-secret",
        metrics_interval_seconds=1,
    )
    async with run_bot(settings) as running:
        core, record = running.bot.core, running.bot.workflow_jobs

        async def queue() -> str:
            answer = await run_command(core, Actor("U1", "al"), "")
            assert answer.ok, answer.message
            return answer.message

        async def read() -> str:
            text = await queue()
            return "" if "No live numbers" in text else text

        # The first reading reconciles: the runs listed, and their jobs read once. `/queue`
        # answers before it too ("no reading yet"): the reading itself is waited for.
        first = await eventually(read, what="the queue as first read", timeout=30)
        reconciled = len(fake.calls)
        assert reconciled and ARM not in first
        now = time.time()
        at = datetime.fromtimestamp(now, UTC) - timedelta(minutes=7)
        for n in range(5):
            await record.record(f"d-{n}", "workflow_job.queued", queued(5100 + n, at), now)

        async def shown() -> str:
            text = await queue()
            return text if ARM in text else ""

        said = await eventually(shown, what="the delivered jobs in /queue", timeout=30)
        # Seven minutes old when recorded; a loaded machine's reading may come seconds later.
        assert re.search(
            rf"• {re.escape(ARM)}: \*5\* queued · longest wait \*7(\.[0-4])? min\*", said
        )
        jobs = await run_command(core, Actor("U1", "al"), f"jobs {ARM}")
        assert jobs.ok and re.search(
            r"• `pull` — 5 queued, longest wait 7(\.[0-4])? min", jobs.message
        )
        assert len(fake.calls) == reconciled, "the readings asked GitHub nothing"


async def test_an_incidents_cost_is_read_from_githubs_job_times(
    settings_for: Any, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    """The jobs a runner picked up during the incident, each with the wait GitHub's deliveries
    told (created to started), in the summary's and the postmortem's one sentence."""
    _, server = github_jobs
    settings = settings_for(
        metrics_backend="github",
        github_token="ghp-test",
        github_api_url=server.url,
        github_org="pytorch",
        github_repos="pytorch/pytorch",
        github_webhook_secret="webhook-secret",
        metrics_interval_seconds=1,
        status_interval_seconds=2,
        status_tick_seconds=0.5,
    )
    async with run_bot(settings) as running:
        record, now = running.bot.workflow_jobs, time.time()
        at = datetime.fromtimestamp(now, UTC)
        for n in range(4):  # queued 10 min ago; two still queue, two started 2 min ago
            await record.record(
                f"q-{n}",
                "workflow_job.queued",
                queued(5200 + n, at - timedelta(minutes=10), BIG),
                now,
            )
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        started = (at - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for n in range(2):
            payload = copy.deepcopy(QUEUED)
            payload["action"] = "in_progress"
            created = (at - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
            job = {"id": 5200 + n, "run_id": 4100, "labels": [BIG], "status": "in_progress"}
            job |= {
                "created_at": created,
                "started_at": started,
                "runner_id": 9,
                "runner_name": "i-1",
            }
            payload["workflow_job"].update(job)
            delivered = job_delivery(payload)
            assert isinstance(delivered, JobDelivery)
            await record.record(f"s-{n}", "workflow_job.in_progress", delivered, now)

        async def cost() -> str:
            incident = await running.bot.store.get("1")
            waited = incident.queue_cost.by_type.get(BIG) if incident is not None else None
            return "" if waited is None or waited.jobs < 2 else str(waited)

        await eventually(cost, what="the incident's cost read from the deliveries", timeout=30)
        incident = await running.bot.store.get("1")
        assert incident is not None
        waited = incident.queue_cost.by_type[BIG]
        assert (waited.jobs, round(waited.minutes), waited.source) == (2, 16, "GitHub's job times")
        assert waited.branches == 1 and waited.prs is None
