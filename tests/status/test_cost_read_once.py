"""An organization-wide storm opens many incidents on one fleet, and GitHub's workflow_job record
holds a day of its jobs: each status tick reads that record once for all the incidents due, not
once per incident, and each incident still shows what its own jobs waited since its own alert."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import GroupState
from bot.domain.queue_cost.workflow_jobs import JobDelivery, job_delivery
from bot.domain.reading.fleet import FleetSnapshot
from bot.fleet.cost import CostReader
from bot.fleet.readings import FleetReadings
from bot.status.tick import StatusReporter
from bot.storage.incident_store import Commit, IncidentStore
from bot.storage.workflow_jobs import WorkflowJobs
from bot.telemetry import Telemetry
from tests.support.incidents import make_incident
from tests.support.payloads import fixture_json

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
QUEUED = fixture_json("backends/github/workflow_job-queued.json")  # runs on linux.4xlarge
INCIDENTS, JOBS = 20, 20_000


def finished(job_id: int, started: datetime) -> JobDelivery:
    """A job that waited 6 minutes for its runner, started (and done) at `started`."""
    payload = copy.deepcopy(QUEUED)
    payload["action"] = "completed"
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    payload["workflow_job"].update(
        {
            "id": job_id,
            "status": "completed",
            "conclusion": "success",
            "created_at": (started - timedelta(minutes=6)).strftime(stamp),
            "started_at": started.strftime(stamp),
            "completed_at": started.strftime(stamp),  # a job done at once: no future moment
            "runner_id": 7,
            "runner_name": "i-0abc",
        }
    )
    found = job_delivery(payload)
    assert isinstance(found, JobDelivery), found
    return found


class Quiet:
    """A live backend that knows no runner type: the cost is the record's alone."""

    name, live = "Prometheus", True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        return FleetSnapshot(at=now, source="prometheus", runner_types={})

    async def aclose(self) -> None:
        return None


async def commands(redis: Redis) -> dict[str, int]:
    stats: dict[str, Any] = await redis.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}


async def test_twenty_due_incidents_read_the_job_record_once_a_tick(redis: Redis) -> None:
    jobs = WorkflowJobs(redis, IncidentStore(redis, "qp").keys)
    # A day of the fleet's jobs, one started every 4 s; a delivery was heard in the last hour.
    starts = [NOW - timedelta(seconds=4 * n) for n in range(JOBS)]
    for first in range(0, JOBS, 1000):
        batch = [finished(n + 1, starts[n]) for n in range(first, first + 1000)]
        await jobs.listed(batch, NOW.timestamp())
    heard = finished(JOBS + 1, NOW - timedelta(minutes=1))
    await jobs.record("d-1", "workflow_job.completed", heard, NOW.timestamp())
    store = IncidentStore(redis, "qp")
    # Twenty incidents, each alerted a minute after the last: incident n's alert fired n + 1
    # minutes ago, so its cost counts the jobs started since, 15 a minute.
    for n in range(INCIDENTS):
        fired = NOW - timedelta(minutes=n + 1)
        incident = make_incident(
            id=str(n + 1),
            uid=f"u{n + 1}",
            group_key=f"storm-{n}",
            group_hash=f"h{n}",
            started_at=fired,
            opened_at=fired,
            updated_at=fired,
            runner_types={"linux.4xlarge": RunnerQueue(queued=9, longest_wait_mins=6)},
            peak_types={"linux.4xlarge": RunnerQueue(queued=9, longest_wait_mins=6)},
        )
        group = GroupState(incident_id=incident.id)
        await store.commit(Commit(incident, group=group, status_due=NOW.timestamp()))
    config = Settings(github_webhook_secret="storm-secret", backend_timeout_seconds=5)
    readings = FleetReadings(redis, store.keys, Quiet(), config=config, clock=lambda: NOW)
    reporter = StatusReporter(
        store,
        readings,
        Telemetry(),
        config=config,
        clock=lambda: NOW,
        cost=CostReader(config, Quiet(), jobs),  # type: ignore[arg-type]
    )
    await redis.config_resetstat()

    await reporter.tick()

    called = await commands(redis)
    assert called.get("hvals") == 1, f"the record's unfinished jobs read {called.get('hvals')}x"
    incidents = await store.get_many([str(n + 1) for n in range(INCIDENTS)])
    assert all(i.shown.statuses == 1 for i in incidents), "every due incident got its status"
    for n, incident in enumerate(incidents):
        waited = incident.queue_cost.by_type["linux.4xlarge"]
        # Its own window: the jobs started since its alert, 15 a minute and the one heard a
        # minute ago, each 6 minutes waited.
        assert waited.jobs == 15 * (n + 1) + 2, (incident.id, waited.jobs)
        assert waited.jobs_past == waited.jobs
