"""Alert groups read while the webhook appends (`bot.preloads`): a read is used once, a stale
one is redone, and no incident number is skipped for a read nobody used."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.incidents import Change
from bot.intake import Intake, IntakeConfig
from bot.preloads import KEEP_ID_S, TTL_S, GroupPreloads
from bot.store import GroupLoad, IncidentStore
from bot.stream import NotificationStream, StreamEntry
from bot.telemetry import Telemetry
from tests.conftest import eventually
from tests.test_store import CHANNEL, PREFIX, T0, delivery


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


def replica(redis: Redis, consumer: str) -> Intake:
    return Intake(
        NotificationStream(redis, PREFIX),
        IncidentStore(redis, PREFIX),
        Telemetry(),
        config=IntakeConfig(consumer=consumer, channel=CHANNEL),
        clock=lambda: T0,
    )


def note(group: str) -> tuple[str, str]:
    """What the webhook hands `Intake.preload`: the source, and the body's group key."""
    return "grafana", group


async def test_a_read_nobody_took_leaves_no_gap_in_incident_numbers(redis: Redis) -> None:
    """The webhook's entry went to another replica's consumer: the read made for it is dropped,
    and the incident number it reserved goes to this replica's next new incident."""
    intake = replica(redis, "c1")
    intake.preload(*note("taken-elsewhere"))
    assert intake.preloads_waiting == 1
    await eventually(lambda: intake.preloads_waiting == 0, what="dropped", timeout=TTL_S + 5)

    assert await intake.apply("1-0", delivery(groupKey="second")) is Change.OPENED
    assert await intake.apply("2-0", delivery(groupKey="third")) is Change.OPENED

    store = IncidentStore(redis, PREFIX)
    assert sorted(await store.open_ids()) == ["1", "2"]


async def test_a_read_another_replica_made_stale_is_redone_and_opens_nothing_twice(
    redis: Redis,
) -> None:
    """Replica A reads a new group early; replica B opens the group's incident before A applies
    its own entry. A's commit meets the fence, is redone on a fresh read, and updates B's
    incident: one incident, both notifications."""
    a, b = replica(redis, "a"), replica(redis, "b")
    a.preload(*note("shared"))
    assert await b.apply("1-0", delivery(groupKey="shared")) is Change.OPENED
    await a.handle(StreamEntry("2-0", delivery(groupKey="shared")))  # as the consumer does

    store = IncidentStore(redis, PREFIX)
    [incident_id] = await store.open_ids()
    loaded = await store.load(incident_id)
    assert loaded.incident is not None and loaded.incident.notifications == 2
    # The number A reserved and could not use goes to A's next new incident.
    assert await a.apply("3-0", delivery(groupKey="later")) is Change.OPENED
    assert sorted(await store.open_ids(), key=int) == ["1", "2"]


async def test_a_read_is_taken_once(redis: Redis) -> None:
    """A read serves the first batch of its group only: the next batch reads afresh, after the
    first one's commit."""
    intake = replica(redis, "c1")
    intake.preload(*note("once"))
    assert await intake.apply("1-0", delivery(groupKey="once")) is Change.OPENED
    assert intake.preloads_waiting == 0
    assert await intake.apply("2-0", delivery(groupKey="once")) is Change.UPDATED
    loaded = await IncidentStore(redis, PREFIX).load("1")
    assert loaded.incident is not None and loaded.incident.notifications == 2


async def test_a_group_whose_first_notification_is_a_resolve_costs_no_incident_number(
    redis: Redis,
) -> None:
    """Its read reserved a number for the group's first incident, which never opened: the next
    new incident takes it."""
    intake = replica(redis, "c1")
    resolved = delivery("grafana/queue-alert-resolved.json", groupKey="late")
    assert await intake.apply("1-0", resolved) is Change.STALE
    assert await intake.apply("2-0", delivery(groupKey="next")) is Change.OPENED
    assert await IncidentStore(redis, PREFIX).open_ids() == ["1"]


async def _never(group_hash: str, *, reserve: bool) -> GroupLoad:
    raise AssertionError("no read in this test")


def test_kept_ids_go_lowest_first_and_not_after_an_hour() -> None:
    """A kept ID is handed out within the hour; after that the ID sequence may have expired and
    started again (no new group for its retention), so an old ID could come round again."""
    now = [0.0]
    preloads = GroupPreloads(_never, clock=lambda: now[0])
    for incident_id in ("9", "4", None, "not-a-number"):
        preloads.keep_id(incident_id)
    assert preloads.kept_id() == "4"
    now[0] = KEEP_ID_S + 1
    assert preloads.kept_id() is None, "9 was kept too long ago"
    preloads.keep_id("12")
    assert preloads.kept_id() == "12"
    assert preloads.kept_id() is None
