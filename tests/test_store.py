"""Redis persistence against a real redis-server: leases, incidents, the notification stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from bot.alert_facts import facts_of
from bot.alerts import parse_notification
from bot.incidents import Event, Incident, open_incident, resolve_manually
from bot.leases import LeaseBusy, Leases
from bot.mrkdwn import Rendered
from bot.store import MAX_OUTBOX, Commit, IncidentStore, ThreadRef
from bot.stream import GROUP, NotificationStream
from tests.conftest import eventually, fixture_json

PREFIX = "qp"
T0 = datetime(2025, 12, 1, 2, 30, tzinfo=UTC)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[list[Redis]]:
    """Three connections, as three bot replicas would hold."""
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(3)]
    yield clients
    for client in clients:
        await client.aclose()


def incident(incident_id: str, *, opened_at: datetime = T0) -> Incident:
    notification = parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
    return open_incident(
        notification,
        facts_of(notification),
        incident_id=incident_id,
        group_hash=f"g{incident_id}",
        entry_id="1-0",
        now=opened_at,
    )


# -- leases ---------------------------------------------------------------------------------------


async def test_only_one_of_concurrent_acquirers_wins(replicas: list[Redis]) -> None:
    leases = [Leases(client, PREFIX) for client in replicas]

    won = await asyncio.gather(*(lease.try_acquire("status:7", 10_000) for lease in leases * 3))

    assert len([lease for lease in won if lease is not None]) == 1


async def test_a_holder_whose_lease_expired_cannot_release_the_new_holders_lease(
    replicas: list[Redis],
) -> None:
    slow, fast = Leases(replicas[0], PREFIX), Leases(replicas[1], PREFIX)
    stale = await slow.try_acquire("status:7", 50)
    assert stale is not None
    await eventually(
        lambda: fast.try_acquire("status:7", 10_000), timeout=3, what="lease expiry and takeover"
    )

    await slow.release(stale)

    assert await fast.try_acquire("status:7", 10_000) is None
    assert await replicas[2].exists(stale.key) == 1


async def test_hold_waits_for_the_holder_to_release(replicas: list[Redis]) -> None:
    holder, waiter = Leases(replicas[0], PREFIX), Leases(replicas[1], PREFIX)
    held = await holder.try_acquire("group:g7", 10_000)
    assert held is not None
    entered = asyncio.Event()

    async def second() -> None:
        async with waiter.hold("group:g7", wait_s=5):
            entered.set()

    task = asyncio.create_task(second())
    done, _ = await asyncio.wait({task}, timeout=0.2)
    assert not done and not entered.is_set()

    await holder.release(held)
    await asyncio.wait_for(task, timeout=3)

    assert entered.is_set()
    assert await holder.try_acquire("group:g7", 1000) is not None  # released after the block


async def test_hold_gives_up_with_lease_busy_after_wait_s(replicas: list[Redis]) -> None:
    holder, waiter = Leases(replicas[0], PREFIX), Leases(replicas[1], PREFIX)
    held = await holder.try_acquire("group:g7", 10_000)
    assert held is not None
    started = time.monotonic()

    with pytest.raises(LeaseBusy):
        async with waiter.hold("group:g7", wait_s=0.3):
            pytest.fail("entered a lease someone else holds")

    assert 0.3 <= time.monotonic() - started < 2
    assert await replicas[2].get(held.key) == held.token


async def test_hold_releases_when_the_work_fails(redis: Redis) -> None:
    leases = Leases(redis, PREFIX)

    with pytest.raises(RuntimeError):
        async with leases.hold("group:g7"):
            raise RuntimeError("slack is down")

    assert await leases.try_acquire("group:g7", 1000) is not None


async def test_concurrent_holders_of_one_name_never_overlap(replicas: list[Redis]) -> None:
    leases = [Leases(client, PREFIX) for client in replicas]
    active = 0
    most = 0
    finished = 0

    async def work(lease: Leases) -> None:
        nonlocal active, most, finished
        async with lease.hold("group:g7", wait_s=10):
            active += 1
            most = max(most, active)
            await asyncio.sleep(0.01)
            active -= 1
            finished += 1

    await asyncio.gather(*(work(leases[i % 3]) for i in range(12)))

    assert finished == 12
    assert most == 1


# -- incident store -------------------------------------------------------------------------------


async def test_claim_thread_is_won_once(replicas: list[Redis]) -> None:
    one, two = IncidentStore(replicas[0], PREFIX), IncidentStore(replicas[1], PREFIX)

    claims = await asyncio.gather(
        one.claim_thread("7", "token-a", ttl_ms=10_000),
        two.claim_thread("7", "token-b", ttl_ms=10_000),
    )

    assert sorted(claims) == [False, True]
    assert await one.thread("7") is None  # claimed, not yet posted


async def test_release_thread_claim_needs_the_claimers_token(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    assert await store.claim_thread("7", "token-a", ttl_ms=10_000)

    await store.release_thread_claim("7", "token-b")
    assert not await store.claim_thread("7", "token-c", ttl_ms=10_000)

    await store.release_thread_claim("7", "token-a")
    assert await store.claim_thread("7", "token-c", ttl_ms=10_000)


async def test_releasing_a_claim_never_forgets_a_posted_thread(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    assert await store.claim_thread("7", "token-a", ttl_ms=10_000)
    await store.set_thread("7", ThreadRef("C0QUEUE", "1700000000.000100"))

    await store.release_thread_claim("7", "token-a")

    assert await store.thread("7") == ThreadRef("C0QUEUE", "1700000000.000100")
    assert not await store.claim_thread("7", "token-b", ttl_ms=10_000)


async def test_set_thread_finds_the_thread_and_the_incident_of_its_root(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)

    await store.set_thread("7", ThreadRef("C0QUEUE", "1700000000.000100"))

    assert await store.thread("7") == ThreadRef("C0QUEUE", "1700000000.000100")
    assert await store.incident_of_message("C0QUEUE", "1700000000.000100") == "7"
    assert await store.incident_of_message("C0QUEUE", "1700000000.000200") is None
    assert await store.thread("8") is None


async def test_next_id_is_short_and_sequential(replicas: list[Redis]) -> None:
    stores = [IncidentStore(client, PREFIX) for client in replicas]

    ids = await asyncio.gather(*(store.next_id() for store in stores * 2))

    assert sorted(ids, key=int) == ["1", "2", "3", "4", "5", "6"]


async def test_an_incident_survives_the_round_trip(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    original = incident("7")

    await store.commit(Commit(original))

    assert await store.get("7") == original
    assert await store.get("8") is None


async def test_open_ids_lists_open_incidents_most_recent_first(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    for number in range(1, 5):
        await store.commit(Commit(incident(str(number), opened_at=T0 + timedelta(minutes=number))))
    closed = await store.get("3")
    assert closed is not None

    await store.commit(Commit(resolve_manually(closed, by="U0ALICE", now=T0 + timedelta(hours=1))))

    assert await store.open_ids() == ["4", "2", "1"]
    assert await store.recent_ids() == ["4", "3", "2", "1"]


async def test_due_status_returns_only_due_incidents(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    await store.schedule_status("1", 100.0)
    await store.schedule_status("2", 200.0)
    await store.schedule_status("3", 300.0)

    assert await store.due_status(250.0) == ["1", "2"]
    assert await store.due_status(50.0) == []

    await store.unschedule_status("1")

    assert await store.due_status(250.0) == ["2"]
    assert await store.status_due_at("1") is None
    assert await store.status_due_at("3") == 300.0


async def test_outbox_is_first_in_first_out(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    first = Rendered(
        "status update", [{"type": "section", "text": {"type": "mrkdwn", "text": "a"}}]
    )
    second = Rendered("summary", [])
    await store.commit(Commit(incident("7"), replies=(first, second)))

    assert await store.next_reply("7") == first
    assert await store.next_reply("7") == first  # peeking does not consume
    await store.pop_reply("7", first)
    assert await store.next_reply("7") == second
    await store.pop_reply("7", first)  # a replica that posted `first` late removes nothing
    assert await store.next_reply("7") == second
    await store.pop_reply("7", second)
    assert await store.next_reply("7") is None
    assert await store.next_reply("8") is None


async def test_outbox_keeps_only_the_latest_replies(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    for n in range(MAX_OUTBOX + 5):
        await store.commit(Commit(incident("7"), replies=(Rendered(f"status {n}", []),)))

    first = await store.next_reply("7")
    assert first is not None and first.text == "status 5"


async def test_a_commit_writes_state_binding_schedule_events_and_replies(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    opened = incident("7")
    event = Event(at=T0, kind="opened", text="Alert fired")
    reply = Rendered("summary", [])
    await store.commit(
        Commit(opened, events=(event,), replies=(reply,), status_due=123.0, bind_group=True)
    )

    assert await store.get(opened.id) == opened
    assert await store.incident_of_group(opened.group_hash) == opened.id
    assert await store.status_due_at(opened.id) == 123.0
    assert await store.events(opened.id) == [event]
    assert await store.next_reply(opened.id) == reply

    await store.commit(Commit(opened, stop_status=True))
    assert await store.status_due_at(opened.id) is None


async def test_timeline_keeps_the_latest_500_events(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX)
    events = tuple(Event(at=T0, kind="notified", text=f"event {n}") for n in range(510))
    await store.commit(Commit(incident("7"), events=events))

    events = await store.events("7")

    assert len(events) == 500
    assert events[0].text == "event 10"
    assert events[-1].text == "event 509"


# -- notification stream --------------------------------------------------------------------------


async def test_an_unacknowledged_entry_is_reclaimed_by_another_consumer(
    replicas: list[Redis],
) -> None:
    a, b = NotificationStream(replicas[0], PREFIX), NotificationStream(replicas[1], PREFIX)
    await a.ensure_group()
    entry_id = await a.append("grafana", '{"status": "firing"}', 1700000000.5)

    [taken] = await a.read("replica-a", block_ms=100)
    assert (taken.id, taken.source, taken.body) == (entry_id, "grafana", '{"status": "firing"}')
    assert taken.received_at == 1700000000.5
    assert await b.read("replica-b", block_ms=50) == []  # not handed out twice
    assert await b.reclaim("replica-b", min_idle_ms=60_000) == []  # not idle long enough

    reclaimed = await eventually(
        lambda: b.reclaim("replica-b", min_idle_ms=50), timeout=3, what="reclaim after idle"
    )

    assert [e.id for e in reclaimed] == [entry_id]
    assert await b.deliveries(entry_id) == 2


async def test_ack_removes_the_entry_from_the_backlog(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await stream.append("alertmanager", "{}", 1.0)
    [entry] = await stream.read("replica-a", block_ms=100)
    assert await stream.backlog() == 1

    await stream.ack(entry.id)

    assert await stream.backlog() == 0
    assert await stream.deliveries(entry.id) == 0
    assert await stream.reclaim("replica-b", min_idle_ms=0) == []


async def test_read_after_redis_lost_everything_recreates_the_group(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await stream.append("grafana", "before", 1.0)
    await redis.flushall()

    assert await stream.read("replica-a", block_ms=50) == []
    assert await stream.reclaim("replica-a", min_idle_ms=0) == []

    entry_id = await stream.append("grafana", "after", 2.0)
    assert [e.id for e in await stream.read("replica-a", block_ms=100)] == [entry_id]
    groups = await redis.xinfo_groups(stream.key)
    assert [g["name"] for g in groups] == [GROUP]


async def test_bury_moves_the_entry_to_the_dead_letter_stream(redis: Redis) -> None:
    stream = NotificationStream(redis, PREFIX)
    await stream.ensure_group()
    await stream.append("grafana", "not json", 1.0)
    [entry] = await stream.read("replica-a", block_ms=100)

    await stream.bury(entry, "invalid JSON")

    assert await stream.backlog() == 0
    assert await stream.reclaim("replica-b", min_idle_ms=0) == []
    [(_, dead)] = await redis.xrange(stream.dead_key)
    assert dead == {
        "id": entry.id,
        "source": "grafana",
        "body": "not json",
        "reason": "invalid JSON",
    }


async def test_resolved_incidents_expire_and_open_ones_are_kept(redis: Redis) -> None:
    store = IncidentStore(redis, PREFIX, retention_s=3600)
    opened = incident("7")
    await store.commit(Commit(opened, events=(Event(at=T0, kind="opened", text="fired"),)))
    assert await redis.ttl(f"{PREFIX}:incident:7") == -1
    assert await redis.ttl(f"{PREFIX}:timeline:7") == -1

    resolved = resolve_manually(opened, by="U1", now=T0)
    await store.commit(Commit(resolved))
    assert 0 < await redis.ttl(f"{PREFIX}:incident:7") <= 3600
    assert 0 < await redis.ttl(f"{PREFIX}:timeline:7") <= 3600

    await store.commit(Commit(opened))  # reopened: kept again
    assert await redis.ttl(f"{PREFIX}:timeline:7") == -1
