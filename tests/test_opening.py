"""A lone first notification of a new group, opened as the webhook writes it (`bot.opening`):
it opens the same incident the consumer would, in one script; a group Redis already has goes to
the stream; nothing is lost, duplicated or applied out of order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.alerts import Source, parse_json_body, parse_notification
from bot.delivery import delivery_of
from bot.incidents import Change, open_incident
from bot.intake import Intake, IntakeConfig
from bot.keys import Keys
from bot.opening import DirectOpens, KnownGroups, OpenConfig
from bot.root_hints import RootHints
from bot.store import IncidentStore
from bot.stream import GROUP, NotificationStream
from bot.telemetry import Telemetry
from tests.conftest import CHANNEL as BOT_CHANNEL
from tests.conftest import FIXTURES, RunningBot, Slack, eventually, fixture_json
from tests.test_store import CHANNEL, T0

PREFIX = "qp"
KEYS = Keys(PREFIX)
FIRING = "grafana/queue-alert-firing.json"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


def direct(
    redis: Redis,
    prefix: str = PREFIX,
    known: KnownGroups | None = None,
    stream: NotificationStream | None = None,
) -> DirectOpens:
    return DirectOpens(
        IncidentStore(redis, prefix),
        stream or NotificationStream(redis, prefix),
        Telemetry(),
        config=OpenConfig(CHANNEL, 600),
        clock=lambda: T0,
        hints=RootHints(),
        known=known or KnownGroups(),
    )


def consumer(redis: Redis, prefix: str = PREFIX, name: str = "c1") -> Intake:
    return Intake(
        NotificationStream(redis, prefix),
        IncidentStore(redis, prefix),
        Telemetry(),
        config=IntakeConfig(consumer=name, channel=CHANNEL, status_interval_s=600),
        clock=lambda: T0,
    )


def payload(name: str = FIRING, **changes: Any) -> tuple[Source, bytes]:
    source: Source = "alertmanager" if name.startswith("alertmanager/") else "grafana"
    return source, json.dumps({**fixture_json(name), **changes}).encode()


async def accept(opens: DirectOpens, name: str = FIRING, **changes: Any) -> Any:
    source, body = payload(name, **changes)
    notification = parse_notification(source, parse_json_body(body))
    return await opens.accept(notification, body, T0.timestamp())


async def stream_entries(redis: Redis, prefix: str = PREFIX) -> list[Any]:
    return await redis.xrange(Keys(prefix).stream)


def firing_fixtures() -> list[str]:
    names = []
    for path in sorted(FIXTURES.glob("*/*.json")):
        kind, firing = path.parent.name, json.loads(path.read_text()).get("status") == "firing"
        if kind in ("grafana", "alertmanager") and firing:
            names.append(f"{kind}/{path.name}")
    return names


async def test_a_lone_first_notification_opens_its_incident_with_nothing_left_to_consume(
    redis: Redis,
) -> None:
    opened = await accept(direct(redis))

    assert opened.incident_id == "1" and not opened.entry_id
    store = IncidentStore(redis, PREFIX)
    assert await store.open_ids() == ["1"]
    loaded = await store.load("1")
    assert loaded.incident is not None and loaded.incident.id == "1" and loaded.version == 1
    assert await stream_entries(redis) == [], "nothing waits for a consumer"
    assert await redis.zrange(KEYS.posts(CHANNEL), 0, -1) == ["root:1"], "the root is queued"
    assert await redis.zscore(KEYS.status_due, "1") == T0.timestamp() + 600
    [event] = await store.events("1")
    assert event.kind == "opened"


@pytest.mark.parametrize("name", firing_fixtures())
async def test_the_direct_open_writes_what_the_consumers_open_writes(
    redis: Redis, name: str
) -> None:
    """The same notification, opened directly under one prefix and by the consumer under
    another: the same incident, group, timeline, schedule and root waiting for the sender."""
    opened = await accept(direct(redis, "qa"), name)
    source, body = payload(name)
    delivery = delivery_of(parse_notification(source, parse_json_body(body)))
    assert await consumer(redis, "qb").apply("5-0", delivery) is Change.OPENED

    a, b = await snapshot(redis, "qa", opened.incident_id), await snapshot(redis, "qb", "1")
    assert a == b


async def snapshot(redis: Redis, prefix: str, incident_id: str) -> dict[str, Any]:
    keys = Keys(prefix)
    incident = await redis.hgetall(keys.incident(incident_id))
    state = json.loads(incident.pop("state"))
    state.pop("uid", None)  # random
    incident.pop("uid")
    group_hash = state["group_hash"]
    group = await redis.hgetall(keys.group(group_hash))
    group_state = json.loads(group["state"])
    group_state.pop("last_entry")  # where each stream stood
    return {
        "incident": incident,
        "state": state,
        "group": (group_state, group["incident"], group["v"]),
        "timeline": await redis.lrange(keys.timeline(incident_id), 0, -1),
        "open": await redis.zrange(keys.open, 0, -1, withscores=True),
        "due": await redis.zrange(keys.status_due, 0, -1, withscores=True),
        "posts": await redis.zrange(keys.posts(CHANNEL), 0, -1),
        "channels": await redis.smembers(keys.send_channels),
    }


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    title=st.text(min_size=1, max_size=60),
    group_key=st.text(min_size=1, max_size=60),
)
async def test_alert_text_reaches_the_stored_incident_untouched(
    redis: Redis, title: str, group_key: str
) -> None:
    """The script fills placeholders into the commit; no alert text is ever taken for one
    (`%`, Lua pattern characters, anything)."""
    await redis.flushdb()
    labels = {**fixture_json(FIRING)["commonLabels"], "alertname": title}
    opened = await accept(
        direct(redis), groupKey=group_key, commonLabels=labels, groupLabels={"alertname": title}
    )
    source, body = payload(FIRING, groupKey=group_key, commonLabels=labels)
    body = json.dumps({**json.loads(body), "groupLabels": {"alertname": title}}).encode()
    delivery = delivery_of(parse_notification(source, parse_json_body(body)))
    expected = open_incident(delivery, incident_id="1", uid="", channel=CHANNEL, now=T0)

    stored = await IncidentStore(redis, PREFIX).get(opened.incident_id)
    assert stored is not None
    assert stored.model_copy(update={"uid": ""}) == expected


async def test_a_group_redis_knows_is_appended_for_the_consumer(redis: Redis) -> None:
    """Another replica opened the group: this one does not know it, and its script appends
    the notification for a consumer instead of opening a second incident."""
    await accept(direct(redis))
    again = await accept(direct(redis), message="renotified")

    assert again.entry_id and not again.incident_id
    assert [entry_id for entry_id, _ in await stream_entries(redis)] == [again.entry_id]
    intake = consumer(redis)
    await NotificationStream(redis, PREFIX).ensure_group()
    [entry] = await NotificationStream(redis, PREFIX).read("c1", block_ms=100)
    await intake.handle(entry)
    store = IncidentStore(redis, PREFIX)
    assert await store.open_ids() == ["1"]
    incident = await store.get("1")
    assert incident is not None and incident.notifications == 2


async def test_a_group_this_replica_knows_is_not_tried(redis: Redis) -> None:
    known = KnownGroups()
    opens = direct(redis, known=known)
    await accept(opens)
    assert await accept(opens, message="again") is None, "the webhook appends it as usual"


async def test_a_resolved_first_notification_is_left_to_the_stream(redis: Redis) -> None:
    assert await accept(direct(redis), "grafana/queue-alert-resolved.json") is None
    assert await IncidentStore(redis, PREFIX).open_ids() == []


async def test_an_older_entry_of_the_group_is_stale_after_the_direct_open(redis: Redis) -> None:
    """An earlier notification of the group still waits in the stream (a burst, another
    replica) when a later one opens the group directly: applied afterwards, the older one
    changes nothing, as any entry older than its group's last."""
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    source, body = payload(FIRING, message="older")
    older = parse_notification(source, parse_json_body(body))
    await stream.append(older, body, T0.timestamp())
    opened = await accept(direct(redis), message="newer")
    assert opened.incident_id == "1"

    [entry] = await stream.read("c1", block_ms=100)
    intake = consumer(redis)
    await intake.handle(entry)
    incident = await IncidentStore(redis, PREFIX).get("1")
    assert incident is not None and incident.notifications == 1
    assert await stream_entries(redis) == [], "the stale entry is acknowledged"


async def test_an_incident_left_at_the_next_id_sends_the_notification_to_the_consumer(
    redis: Redis,
) -> None:
    """The ID sequence expired and started again while an old incident lived on: the open
    meets the commit's fence, writes nothing, and the entry waits for the consumer, which
    opens the incident under the next free ID. Nothing is lost or overwritten."""
    await redis.set(KEYS.incident_seq, 4)
    await redis.hset(KEYS.incident("5"), mapping={"v": 3, "state": "{}"})
    opened = await accept(direct(redis))

    assert opened.entry_id and not opened.incident_id
    assert await redis.hget(KEYS.incident("5"), "v") == "3", "the old incident is untouched"
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await redis.xgroup_setid(KEYS.stream, GROUP, "0")
    [entry] = await stream.read("c1", block_ms=100)
    await consumer(redis).handle(entry)
    assert await IncidentStore(redis, PREFIX).open_ids() == ["6"]


async def test_opens_and_appends_interleave_without_duplicates(redis: Redis) -> None:
    """Twenty new groups, each notified twice, by two replicas at once: one incident each,
    numbered 1 to 20, every notification applied."""
    a, b = direct(redis, known=KnownGroups()), direct(redis, known=KnownGroups())
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()

    async def notify(opens: DirectOpens, n: int) -> None:
        source, body = payload(FIRING, groupKey=f"g{n}")
        notification = parse_notification(source, parse_json_body(body))
        if await opens.accept(notification, body, T0.timestamp()) is None:
            await stream.append(notification, body, T0.timestamp())

    await asyncio.gather(*(notify(side, n) for n in range(20) for side in (a, b)))
    intake = consumer(redis)
    while entries := await stream.read("c1", count=100, block_ms=100):
        await asyncio.gather(*(intake.handle(entry) for entry in entries))

    store = IncidentStore(redis, PREFIX)
    ids = await store.open_ids()
    assert sorted(ids, key=int) == [str(n) for n in range(1, 21)]
    incidents = await store.get_many(ids)
    assert sorted(i.group_key for i in incidents) == sorted(f"g{n}" for n in range(20))
    assert all(i.notifications == 2 for i in incidents)


async def test_a_new_alert_through_the_bot_is_opened_without_the_consumer(
    running_bot: RunningBot, slack: Slack, redis: Redis
) -> None:
    """End to end: the 202 names the incident the notification opened, the consumer never
    reads an entry, and the root reaches Slack once."""
    response = await running_bot.send("grafana", fixture_json(FIRING))
    assert response.status_code == 202
    assert response.json()["incident"] == "1"

    def posted() -> list[Any]:
        return [m for m in slack.emulator.channel_messages(BOT_CHANNEL) if "queueing" in m.text]

    await eventually(posted, what="the root in Slack")
    [group] = await redis.xinfo_groups(Keys(running_bot.bot.settings.redis_prefix).stream)
    assert group["entries-read"] in (None, 0), "no entry went through the stream"
    assert len(posted()) == 1


def test_fixtures_are_found() -> None:
    assert len(firing_fixtures()) >= 3
    assert all(Path(FIXTURES, name).exists() for name in firing_fixtures())


async def test_a_bug_building_the_open_leaves_the_notification_to_the_stream(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr("bot.opening.opening_commit", broken)
    assert await accept(direct(redis)) is None, "the webhook appends it as usual"
    assert await redis.keys("*") == [], "nothing written"
