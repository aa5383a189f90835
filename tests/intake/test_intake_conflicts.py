"""An incident that changes under the intake between its read and its commit (an action the leader
commits meanwhile): the intake reads again after a backoff, a bounded number of times, and then
leaves the entry pending for a later retry, never lost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.alerting.alerts import parse_json_body, parse_notification
from bot.intake.consumer import MAX_CONFLICTS, Intake
from bot.storage.incident_store import Commit, GroupLoad, IncidentStore
from bot.storage.streams import NotificationStream
from bot.telemetry import Telemetry
from tests.support.payloads import fixture_json
from tests.support.running import eventually
from tests.support.store import CHANNEL, T0

PREFIX = "qp"


class Contended(IncidentStore):
    """Another writer commits the group's incident right after every read of it."""

    async def load_group(self, group_hash: str) -> GroupLoad:
        read = await super().load_group(group_hash)
        loaded = read[2]
        if loaded.incident is not None:
            change = Commit(loaded.incident, version=loaded.version, thread=loaded.thread)
            assert await self.commit(change)
        return read


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()


def intake(redis: Redis, store: IncidentStore, telemetry: Telemetry) -> Intake:
    config = Settings(slack_channel=CHANNEL, intake_reclaim_idle_ms=200)
    stream = NotificationStream(redis, PREFIX)
    return Intake(stream, store, telemetry, config=config, consumer="a", clock=lambda: T0)


async def notify(stream: NotificationStream, fixture: str) -> None:
    body = json.dumps(fixture_json(fixture)).encode()
    await stream.append(parse_notification("grafana", parse_json_body(body)), body, T0.timestamp())


async def test_a_resolve_that_keeps_meeting_a_newer_incident_waits_and_is_applied_later(
    redis: Redis,
) -> None:
    stream, store, telemetry = (
        NotificationStream(redis, PREFIX),
        IncidentStore(redis, PREFIX),
        Telemetry(),
    )
    await stream.ensure_group()
    await notify(stream, "grafana/queue-alert-firing.json")
    [opened] = await stream.read("a", block_ms=100)
    await intake(redis, store, telemetry).handle(opened)
    await notify(stream, "grafana/queue-alert-resolved.json")
    [resolved] = await stream.read("a", block_ms=100)

    started = asyncio.get_running_loop().time()
    await asyncio.wait_for(intake(redis, Contended(redis, PREFIX), telemetry).handle(resolved), 5)
    took = asyncio.get_running_loop().time() - started

    conflicts = telemetry.registry.get_sample_value(
        "queuepilot_intake_failures_total", {"kind": "conflict"}
    )
    assert conflicts == MAX_CONFLICTS, "read again a bounded number of times"
    assert took > 0.01 * (MAX_CONFLICTS - 1), "with a backoff between the reads"
    incident = await store.get("1")
    assert incident is not None and incident.is_open
    assert (await redis.xpending(stream.key, stream.group))["pending"] == 1, "left pending"

    stop = asyncio.Event()
    running = asyncio.create_task(intake(redis, store, telemetry).run(stop))
    try:

        async def resolved_later() -> bool:
            incident = await store.get("1")
            return incident is not None and not incident.is_open

        await eventually(resolved_later, what="the entry applied once the contention ends")
        assert await stream.backlog() == 0
    finally:
        stop.set()
        await running
