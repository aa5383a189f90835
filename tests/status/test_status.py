"""The status tick keeps going whatever one incident does."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import GroupState, open_incident
from bot.domain.reading.fleet import FleetSnapshot
from bot.fleet.readings import FleetReadings
from bot.status.tick import StatusReporter
from bot.storage.incident_store import Commit, IncidentStore
from bot.storage.keys import Keys
from bot.telemetry import Telemetry
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack

KEYS = Keys("qp")  # the prefix `settings_for` gives the bot


async def test_an_unreadable_incident_does_not_stop_other_status_posts(
    settings_for: Any, slack: Slack, redis_url: str
) -> None:
    # A corrupt or newer-format record (a rolling deploy) must cost only itself.
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.hset(
        KEYS.incident("999"),
        mapping={"v": 1, "state": json.dumps({"id": "999", "unexpected": True})},
    )
    started = time.time()
    await redis.zadd(KEYS.status_due, {"999": started - 1})
    try:
        async with run_bot(settings_for(status_interval_seconds=1)) as running:
            await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
            roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

            def statuses() -> int:
                replies = slack.emulator.thread(CHANNEL, roots[0].ts)[1:]
                # Quiet statuses edit the previous one: each edit is a status shown.
                return sum(1 + m.edits for m in replies if "status" in m.text.lower())

            await eventually(lambda: statuses() >= 2, what="status posts go on", timeout=8)
            postponed = await redis.zscore(KEYS.status_due, "999")
            assert postponed is not None and postponed > started, "the bad one is pushed back"
    finally:
        await redis.aclose()


async def test_two_replicas_ticking_at_once_give_each_due_incident_one_status(
    redis_url: str,
) -> None:
    # The tick reads its due incidents in one round trip and commits them in another: a replica
    # that lost an incident's race must redo it on fresh state, never post it a second time.
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushall()
    store = IncidentStore(redis, "race")
    now = [datetime(2026, 11, 22, 10, tzinfo=UTC)]
    payload = fixture_json("grafana/queue-alert-firing.json")
    count = 60
    for n in range(count):
        payload["groupKey"] = f"race-{n}"
        incident = open_incident(
            delivery_of(parse_notification("grafana", payload)),
            incident_id=str(n),
            uid=f"u{n}",
            channel="C1",
            now=now[0],
        )
        await store.commit(
            Commit(incident, group=GroupState(incident_id=str(n)), status_due=now[0].timestamp())
        )
    now[0] += timedelta(seconds=1)
    telemetry = [Telemetry(), Telemetry()]
    config = Settings(backend_timeout_seconds=5)
    replicas = [
        StatusReporter(
            IncidentStore(redis, "race"),
            FleetReadings(redis, store.keys, AlertOnly(), config=config, clock=lambda: now[0]),
            t,
            config=config,
            clock=lambda: now[0],
        )
        for t in telemetry
    ]
    try:
        await asyncio.gather(*(replica.tick() for replica in replicas))

        incidents = await store.get_many([str(n) for n in range(count)])
        assert [i.shown.statuses for i in incidents] == [1] * count
        posted = sum(t.status_posts._value.get() for t in telemetry)
        assert posted == count
        for n in range(count):
            waiting = await redis.lrange(store.keys.outbox(str(n)), 0, -1)
            assert [item.split(":")[0] for item in waiting] == ["status"]
        assert await store.status_due.pending(now[0].timestamp()) == []
    finally:
        await redis.aclose()


class AlertOnly:
    """A live backend that knows no runner type: the statuses show the alert's numbers."""

    name, live = "Prometheus", True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        return FleetSnapshot(at=now, source="prometheus", runner_types={})

    async def aclose(self) -> None:
        return None


async def test_an_incident_key_redis_cannot_read_does_not_stop_other_status_posts(
    settings_for: Any, slack: Slack, redis_url: str
) -> None:
    # The tick reads every due incident in one round trip: a key of the wrong type must fail
    # only its own read, not the whole tick.
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.set(KEYS.incident("998"), "not a hash")
    await redis.zadd(KEYS.status_due, {"998": time.time() - 1})
    try:
        async with run_bot(settings_for(status_interval_seconds=1)) as running:
            await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
            roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

            def statuses() -> int:
                replies = slack.emulator.thread(CHANNEL, roots[0].ts)[1:]
                return sum(1 + m.edits for m in replies if "status" in m.text.lower())

            await eventually(lambda: statuses() >= 2, what="status posts go on", timeout=8)
    finally:
        await redis.aclose()
