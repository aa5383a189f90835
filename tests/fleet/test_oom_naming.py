"""The OOM kills named in the reading, against a real Redis: by the jobs that ran on the killed
pods, kept named once the jobs source fails or no longer lists them, and with the hint to get them
named only where no jobs source can name runners."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from bot.backends.http import BackendError
from bot.config import Settings
from bot.domain.queue_cost.jobs import JobsListing
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.runner_pods import RunnerPods
from bot.fleet.readings import FleetReadings, JobsWatch
from bot.storage.fleet import JobArrivals
from bot.storage.keys import Keys

KEYS = Keys("qp")
NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)
KILLED = (("arc-runner-k7x2p", "u1"), ("arc-runner-k7x2p", "u2"), ("arc-runner-m4q9z", "u3"))


class KilledFleet:
    name = "Prometheus"
    live = True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        pods = RunnerPods(oom_kills=3, oom_pods=KILLED)
        types = {"linux.2xlarge": RunnerTypeMetrics(queued=4, pods=pods)}
        return FleetSnapshot(at=now, source="prometheus", runner_types=types)

    async def aclose(self) -> None:
        return None


class Jobs:
    """A jobs source: GitHub's (`runners` named), the HUD's (None), or one that fails."""

    name = "GitHub"

    def __init__(self, runners: dict[str, str] | None) -> None:
        self.runners: dict[str, str] | None = runners
        self.fails = False

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        if self.fails:
            raise BackendError("GitHub answered 502", retryable=True)
        return JobsListing(runners=self.runners)

    async def aclose(self) -> None:
        return None


def said(reading: object) -> str:
    fleet = getattr(reading, "fleet", None)
    assert fleet is not None
    [cause] = fleet.runner_types["linux.2xlarge"].judged.causes
    return cause.evidence


@pytest.mark.parametrize(
    ("runners", "evidence"),
    [
        (None, "(`JOBS_BACKEND=github` names their workflows)"),  # the HUD: queued jobs only
        ({}, "OOMKilled 3 times in 30 min"),  # GitHub, the jobs gone: no hint, no names
    ],
)
async def test_the_hint_only_where_no_jobs_source_names_runners(
    redis: Redis, runners: dict[str, str] | None, evidence: str
) -> None:
    watch = JobsWatch(Jobs(runners), JobArrivals(redis, KEYS), timeout_s=2)
    readings = FleetReadings(
        redis, KEYS, KilledFleet(), config=Settings(), clock=lambda: NOW, jobs=watch
    )
    text = said(await readings.latest())
    assert text.endswith(evidence), text
    assert text.count("(") == (1 if runners is None else 0)


async def test_kills_named_once_stay_named_while_the_jobs_source_fails(redis: Redis) -> None:
    now = [NOW]
    source = Jobs({"arc-runner-k7x2p": "pull", "arc-runner-m4q9z": "trunk"})
    watch = JobsWatch(source, JobArrivals(redis, KEYS), timeout_s=2)
    readings = FleetReadings(
        redis, KEYS, KilledFleet(), config=Settings(), clock=lambda: now[0], jobs=watch
    )
    assert said(await readings.latest()).endswith("OOMKilled 3 times in 30 min (pull 2, trunk 1)")
    source.fails = True
    now[0] += timedelta(minutes=2)
    again = said(await readings.latest())
    assert again.endswith("(pull 2, trunk 1)"), again
    assert "JOBS_BACKEND" not in again, "a source failing once is no reason for the hint"
    # Without a jobs source the record names them too, and nothing is hinted where it does.
    bare = FleetReadings(redis, KEYS, KilledFleet(), config=Settings(), clock=lambda: now[0])
    await redis.delete(KEYS.fleet_reading)
    assert said(await bare.latest()).endswith("(pull 2, trunk 1)")
