"""Redis persistence against a real redis-server: fenced commits, the notification stream,
and the retention of every key (the send queue they fill: tests/outbound/test_send_queue.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.domain.incident.incidents import Event, GroupState, Incident, resolve_manually
from bot.storage.incident_store import ATTEMPTS, MAX_OUTBOX, Commit, IncidentStore, ThreadRef
from bot.storage.state_marker import FoundRoot, StateMarker
from bot.storage.streams import INTAKE_GROUP as GROUP
from bot.storage.streams import NotificationStream
from tests.support.incidents import changed
from tests.support.running import eventually
from tests.support.store import (
    CHANNEL,
    DAY,
    PREFIX,
    T0,
    body,
    delivery,
    idle_at_least,
    incident,
    notification,
    opened,
    reply,
)


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[list[Redis]]:
    """Three connections, as three bot replicas would hold."""
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(3)]
    yield clients
    for client in clients:
        await client.aclose()


# -- incidents and fenced commits -----------------------------------------------------------------


async def test_a_new_incident_is_found_by_its_group_and_its_id(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    new = await opened(store, "7")

    group, group_version, loaded, _, _ = await store.load_group(new.group_hash)
    assert group.incident_id == "7" and group_version == 1
    assert loaded.incident == new and loaded.version == 1
    assert (await store.load("7")).incident == new
    assert await store.open_ids() == ["7"]
    assert await store.recent_ids() == ["7"]


async def test_a_root_found_after_a_loss_is_taken_up_once_by_its_number(redis: Redis) -> None:
    """An incident going on in its root found in Slack keeps that root's number and thread, to
    be edited; a number in use already is refused and the found root dropped, so the group's
    next try opens an incident of its own instead of being refused forever."""
    store = IncidentStore(redis, PREFIX)
    marker = StateMarker(redis, store.keys, retention_s=DAY)
    found = FoundRoot("4", "uid4", CHANNEL, "1700000000.000100")
    goes_on = incident("4")
    await marker.record_loss(
        T0.timestamp(), highest=9, roots={goes_on.group_hash: found}, keep_s=DAY
    )
    *_, next_id, read = await store.load_group(goes_on.group_hash)
    assert (next_id, read) == ("10", found)

    group = GroupState(incident_id="4", last_entry="1-0")
    thread = ThreadRef(CHANNEL, found.ts)
    adopt = Commit(goes_on, group=group, group_hash=goes_on.group_hash, adopts=True, thread=thread)
    assert await store.commit(adopt)
    loaded = await store.load("4")
    assert loaded.thread == thread and loaded.rendered is None, "its root is edited, not posted"
    assert await store.incident_of_message(CHANNEL, found.ts) == "4"
    *_, read = await store.load_group(goes_on.group_hash)
    assert read is None, "taken up once"

    await marker.record_loss(T0.timestamp(), highest=9, roots={"other": found}, keep_s=DAY)
    again = Commit(incident("4"), group=group, group_hash="other", adopts=True, thread=thread)
    assert not await store.commit(again), "number 4 is in use"
    assert (await store.load_group("other"))[4] is None


async def test_a_group_with_a_thread_of_its_own_since_the_loss_never_takes_up_its_old_root(
    redis: Redis,
) -> None:
    """A group that opened an incident after Redis lost the state (its root found before or
    after that) goes on in its own thread: its next incident, past the reopen window, opens
    anew instead of editing the day-old root from before the loss."""
    store = IncidentStore(redis, PREFIX)
    marker = StateMarker(redis, store.keys, retention_s=DAY)
    old = FoundRoot("4", "uid4", CHANNEL, "1700000000.000100")
    new, other = incident("10"), incident("11")
    await marker.record_loss(T0.timestamp(), highest=9, roots={new.group_hash: old}, keep_s=DAY)
    group = GroupState(incident_id="10", last_entry="1-0")
    assert await store.commit(Commit(new, group=group, group_hash=new.group_hash, opens=True))
    assert (await store.load_group(new.group_hash))[4] is None, "found before it opened"

    roots = {new.group_hash: old, other.group_hash: old}
    assert await marker.record_loss(T0.timestamp(), highest=9, roots=roots, keep_s=DAY) == 1
    assert (await store.load_group(new.group_hash))[4] is None, "found after it opened"
    assert (await store.load_group(other.group_hash))[4] == old


async def test_a_commit_computed_from_an_old_version_is_refused_and_writes_nothing(
    redis: Redis,
) -> None:
    """Two writers read version 1; the resolve commits first; the other's commit, computed
    from what is now an older state, must not overwrite the resolve (a replica that stalled
    past its turn, or lost a race)."""
    store = IncidentStore(redis, PREFIX)
    new = await opened(store, "7")
    loaded = await store.load("7")
    resolved = resolve_manually(new, by="U1", name="al", now=T0 + timedelta(minutes=5))
    event = Event(at=T0, kind="resolved", text="Resolved manually", actor="U1")
    assert await store.commit(
        Commit(resolved, version=loaded.version, events=(event,), stop_status=True)
    )

    stale = changed(
        new,
        notifications=99,
    )
    late = Event(at=T0, kind="alerts_changed", text="late")
    refused = await store.commit(
        Commit(stale, version=loaded.version, events=(late,), replies=(reply("late"),))
    )

    assert not refused
    after = await store.load("7")
    assert after.incident == resolved and after.version == 2
    assert [e.kind for e in await store.events("7")] == ["resolved"]
    assert await redis.llen("qp:v2:outbox:7") == 0, "the refused commit queued no reply"
    assert await store.open_ids() == []


async def test_a_change_made_on_fresh_state_keeps_what_another_writer_committed_meanwhile(
    redis: Redis,
) -> None:
    """A timeline line committed while a resolve lands between its read and its commit is made
    again on the resolved incident: the resolve stays, the line is kept once."""
    store = IncidentStore(redis, PREFIX)
    await opened(store, "7")
    made: list[bool] = []

    def line(current: Incident, now: datetime, _: list[Event]) -> tuple[Commit, str]:
        made.append(current.is_open)
        return Commit(current, events=(Event(at=now, kind="early_warning", text="line"),)), "kept"

    async def resolve_first() -> None:
        loaded = await store.load("7")
        assert loaded.incident is not None
        resolved = resolve_manually(loaded.incident, by="U1", name="al", now=T0)
        assert await store.commit(Commit(resolved, version=loaded.version))

    # The resolve lands right after the first read, before that read's commit.
    original_load = store.load
    loads = 0

    async def load(incident_id: str) -> Any:
        nonlocal loads
        loaded = await original_load(incident_id)
        loads += 1
        if loads == 1:
            await resolve_first()
        return loaded

    store.load = load  # type: ignore[method-assign]
    fresh = await store.commit_fresh("7", line, clock=lambda: T0)
    assert fresh.committed is not None and fresh.answer == "kept" and not fresh.busy
    assert made == [True, False], "made again on the resolved incident"
    after = await original_load("7")
    assert after.incident is not None and not after.incident.is_open
    assert [e.text for e in await store.events("7")] == ["line"]


async def test_a_change_on_an_incident_that_never_stops_changing_gives_up_busy(
    redis: Redis,
) -> None:
    """Another write lands between every read and its commit: the change is tried `ATTEMPTS`
    times, nothing of it goes in, and it says it was busy."""
    store = IncidentStore(redis, PREFIX)
    await opened(store, "7")
    original_load = store.load
    loads = 0

    async def load(incident_id: str) -> Any:
        nonlocal loads
        loaded = await original_load(incident_id)
        loads += 1
        touched = loaded.incident.model_copy(update={"updated_at": T0 + timedelta(seconds=loads)})
        assert await store.commit(Commit(touched, version=loaded.version, root=False))
        return loaded

    def line(current: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
        return Commit(current, events=(Event(at=now, kind="early_warning", text="line"),)), None

    store.load = load  # type: ignore[method-assign]
    fresh = await store.commit_fresh("7", line, clock=lambda: T0)
    assert fresh.found and fresh.busy and fresh.committed is None
    assert loads == ATTEMPTS
    assert await store.events("7") == []


async def test_opening_a_group_twice_at_once_opens_one_incident(replicas: list[Redis]) -> None:
    stores = [IncidentStore(r, PREFIX) for r in replicas]
    first, second = incident("1"), incident("2")
    second = second.model_copy(update={"group_hash": first.group_hash})
    results = await asyncio.gather(
        *(
            store.commit(
                Commit(
                    new, version=0, group=GroupState(incident_id=new.id), group_hash=new.group_hash
                )
            )
            for store, new in zip(stores, (first, second), strict=False)
        )
    )
    assert sorted(results) == [False, True], "the group's version fences the second open"


async def test_pending_statuses_are_only_the_due_incidents(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    for incident_id, due in (("1", 100.0), ("2", 200.0), ("3", 300.0)):
        await store.commit(Commit(incident(incident_id), status_due=due))
    assert await store.status_due.pending(250.0) == ["1", "2"]
    assert await store.status_due.due_at("3") == 300.0


async def test_timeline_keeps_the_latest_500_events(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    new = await opened(store)
    version = 1
    for batch in range(6):
        events = tuple(Event(at=T0, kind="status", text=f"{batch}-{i}") for i in range(100))
        assert await store.commit(Commit(new, version=version, events=events, root=False))
        version += 1
    kept = await store.events("1")
    assert len(kept) == 500
    assert (kept[0].text, kept[-1].text) == ("1-0", "5-99")


# -- what a commit queues for the channel's sender -------------------------------------------------


async def test_an_outbox_keeps_only_the_latest_replies(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    new = await opened(store)
    replies = tuple(reply(f"event {i}") for i in range(MAX_OUTBOX + 5))
    assert await store.commit(Commit(new, version=1, replies=replies))
    assert await redis.llen("qp:v2:outbox:1") == MAX_OUTBOX


# -- the notification stream -----------------------------------------------------------------------


async def test_an_entry_applied_by_a_commit_is_acknowledged_with_it(redis: Redis) -> None:
    stream, store = NotificationStream(redis, PREFIX), IncidentStore(redis, PREFIX)
    await stream.ensure_group()
    entry_id = await stream.append(notification(), body(), 0.0)
    [entry] = await stream.read("c1", block_ms=100)
    assert entry.delivery == delivery()

    assert await store.commit(Commit(incident("1"), acks=(entry_id,)))

    assert await stream.backlog() == 0
    assert (await redis.xpending("qp:notifications", GROUP))["pending"] == 0


async def test_an_idle_entry_is_reclaimed_by_another_consumer(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    entry_id = await stream.append(notification(), body(), 0.0)
    await stream.read("dead", block_ms=100)
    await eventually(lambda: idle_at_least(redis, 50, entry_id), what="the entry idle 50 ms")

    [taken] = await stream.reclaim("alive", min_idle_ms=50)

    assert taken.id == entry_id and taken.delivery == delivery()
    assert await stream.deliveries(entry_id) == 2


async def test_a_live_handler_is_not_taken_over(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await stream.append(notification(), body(), 0.0)
    await stream.append(notification(), body(), 0.0)
    [kept, left] = await stream.read("slow", count=2, block_ms=100)
    await stream.hand_back("slow", [kept.id, left.id])  # both idle for ages, as after a stall

    await stream.keep_alive("slow", [kept.id])  # its owner still works on this one

    assert [e.id for e in await stream.reclaim("other", min_idle_ms=60_000)] == [left.id]


async def test_entries_handed_back_at_shutdown_are_taken_over_at_once(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await stream.append(notification(), body(), 0.0)
    [entry] = await stream.read("stopping", block_ms=100)

    await stream.hand_back("stopping", [entry.id])

    [taken] = await stream.reclaim("next", min_idle_ms=30_000)
    assert taken.id == entry.id


async def test_reclaim_walks_a_long_backlog_with_its_cursor(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    ids = [await stream.append(notification(), body(), 0.0) for _ in range(5)]
    await stream.read("dead", count=5, block_ms=100)
    await eventually(lambda: idle_at_least(redis, 10, *ids), what="the entries idle 10 ms")

    first = await stream.reclaim("alive", min_idle_ms=10, count=2)
    second = await stream.reclaim("alive", min_idle_ms=10, count=2)
    third = await stream.reclaim("alive", min_idle_ms=10, count=2)

    assert [e.id for e in first + second + third] == ids


async def test_read_after_redis_lost_everything_recreates_the_group(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await redis.flushall()
    # The webhook's XADD makes the stream.
    entry_id = await stream.append(notification(), body(), 0.0)

    assert await stream.read("c1", block_ms=100) == []  # NOGROUP: the group is made again
    [entry] = await stream.read("c1", block_ms=100)
    assert entry.id == entry_id


async def test_an_unreadable_entry_is_dead_lettered_with_its_reason(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await redis.xadd("qp:notifications", {"d": "{not json"})
    [entry] = await stream.read("c1", block_ms=100)
    assert entry.delivery is None and entry.problem

    await stream.bury(entry, f"unreadable: {entry.problem}")

    assert await stream.backlog() == 0
    [(_, fields)] = await redis.xrange("qp:notifications:dead")
    assert fields["id"] == entry.id and fields["reason"].startswith("unreadable")
    assert fields["d"] == "{not json", "kept for an operator to look at"


async def test_dead_consumers_are_removed_only_when_nothing_is_pending_on_them(
    redis: Redis,
) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await stream.append(notification(), body(), 0.0)
    await stream.read("holding", block_ms=100)
    await redis.xgroup_createconsumer("qp:notifications", GROUP, "empty")

    async def both_idle() -> bool:
        consumers = await redis.xinfo_consumers("qp:notifications", GROUP)
        return all(int(c["idle"]) > 10 for c in consumers)

    await eventually(both_idle, what="both consumers idle 10 ms")

    removed = await stream.prune_consumers("me", idle_ms=10)

    names = {c["name"] for c in await redis.xinfo_consumers("qp:notifications", GROUP)}
    assert removed == 1 and names == {"holding"}


# -- retention ------------------------------------------------------------------------------------


async def test_every_key_a_commit_writes_has_a_retention(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX, retention_s=30 * DAY)
    new = await opened(store)
    event = Event(at=T0, kind="opened", text="opened")
    assert await store.commit(
        Commit(new, version=1, events=(event,), replies=(reply("r"),), status_due=1.0)
    )
    for key in await redis.keys("*"):
        ttl = await redis.ttl(key)
        assert 0 < ttl <= 30 * DAY, f"{key} has TTL {ttl}"


async def test_a_grafana_test_incident_is_kept_an_hour_and_indexed_nowhere(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    test = incident("5", test=True)
    assert test.is_test and not test.is_open

    assert await store.commit(
        Commit(test, version=0, group=GroupState(incident_id="5"), group_hash=test.group_hash)
    )

    assert await store.recent_ids() == [] and await store.open_ids() == []
    for key in ("qp:v2:incident:5", f"qp:v2:group:{test.group_hash}"):
        assert 0 < await redis.ttl(key) <= 3600, key


async def test_resolved_incidents_and_their_keys_expire(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX, retention_s=1)
    new = await opened(store)
    closed = resolve_manually(new, by="U1", name="al", now=T0)
    assert await store.commit(Commit(closed, version=1, stop_status=True))

    async def nothing_left() -> bool:
        return await redis.keys("*") == []

    await eventually(nothing_left, what="every key of the incident expired", timeout=5)
