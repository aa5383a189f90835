"""New alert groups opened by consumers racing each other: one incident per group, numbered by
the one ID sequence, every notification applied once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.alerting.alerts import parse_json_body, parse_notification
from bot.intake.consumer import Intake
from bot.storage.incident_store import IncidentStore
from bot.storage.streams import NotificationStream
from bot.telemetry import Telemetry
from tests.support.payloads import fixture_json
from tests.support.store import CHANNEL, T0

PREFIX = "qp"
FIRING = "grafana/queue-alert-firing.json"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()


def consumer(redis: Redis, name: str, telemetry: Telemetry | None = None) -> Intake:
    return Intake(
        NotificationStream(redis, PREFIX),
        IncidentStore(redis, PREFIX),
        telemetry or Telemetry(),
        config=Settings(slack_channel=CHANNEL),
        consumer=name,
        clock=lambda: T0,
    )


async def test_two_consumers_open_twenty_new_groups_once_each_numbered_1_to_20(
    redis: Redis,
) -> None:
    """Two replicas' consumers take the entries of twenty new groups, each notified twice, at
    once: twenty incidents, numbered 1 to 20 (people type them: `/queue ack 12`), and every
    notification applied (one that reaches its group after a newer one changes nothing)."""
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    for n in range(20):
        body = json.dumps({**fixture_json(FIRING), "groupKey": f"g{n}"}).encode()
        notification = parse_notification("grafana", parse_json_body(body))
        await stream.append(notification, body, T0.timestamp())
        await stream.append(notification, body, T0.timestamp())

    async def consume(intake: Intake, name: str) -> None:
        while entries := await stream.read(name, count=3, block_ms=100):
            await asyncio.gather(*(intake.handle(entry) for entry in entries))

    telemetry = Telemetry()
    a, b = consumer(redis, "a", telemetry), consumer(redis, "b", telemetry)
    await asyncio.gather(consume(a, "a"), consume(b, "b"))

    store = IncidentStore(redis, PREFIX)
    ids = await store.open_ids()
    assert sorted(ids, key=int) == [str(n) for n in range(1, 21)]
    incidents = await store.get_many(ids)
    assert sorted(i.group_key for i in incidents) == sorted(f"g{n}" for n in range(20))
    applied = {
        change: telemetry.registry.get_sample_value(
            "queuepilot_notifications_applied_total", {"change": change}
        )
        or 0
        for change in ("opened", "updated", "stale")
    }
    assert applied["opened"] == 20 and sum(applied.values()) == 40, applied
    assert await stream.backlog() == 0


async def test_a_number_an_old_incident_still_holds_is_skipped(redis: Redis) -> None:
    """The ID sequence expires with its retention when no group opens, and starts again from 1;
    an incident kept longer (its own retention runs from its last change) keeps its number, and
    a new incident takes the next free one instead of overwriting it."""
    store = IncidentStore(redis, PREFIX)
    await redis.hset(store.keys.incident("1"), mapping={"v": "3", "state": "{}"})
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    body = json.dumps({**fixture_json(FIRING), "groupKey": "after-a-quiet-month"}).encode()
    await stream.append(parse_notification("grafana", parse_json_body(body)), body, T0.timestamp())

    [entry] = await stream.read("a", block_ms=100)
    await consumer(redis, "a").handle(entry)

    assert await store.open_ids() == ["2"]
    assert await redis.hget(store.keys.incident("1"), "v") == "3", "the old incident untouched"
    assert 0 < await redis.ttl(store.keys.incident_seq) <= store.retention_s
