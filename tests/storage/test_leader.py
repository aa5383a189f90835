"""The leader's lease and its fencing token, against a real redis-server: one leader at a time,
a successor within one TTL, and a deposed leader's late write refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.leader import campaign
from bot.storage.incident_store import Commit, IncidentStore
from bot.storage.leases import Deposed, Leadership
from bot.telemetry import Telemetry
from tests.support.running import eventually
from tests.support.store import KEYS, PREFIX, gone, incident, opened

TTL_MS = 300


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[list[Redis]]:
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(2)]
    yield clients
    for client in clients:
        await client.aclose()


def lead(redis: Redis, name: str) -> Leadership:
    return Leadership(redis, KEYS, name=name, ttl_ms=TTL_MS)


async def test_one_replica_leads_and_every_replica_sees_which(replicas: list[Redis]) -> None:
    a, b = lead(replicas[0], "a"), lead(replicas[1], "b")
    assert await a.take()
    assert not await b.take()
    assert await a.take(), "the leader keeps the lead when it campaigns again"
    assert await b.role() == {"leads": False, "leader": "a"}
    assert await a.role() == {"leads": True, "leader": "a"}


async def test_a_successor_takes_a_lapsed_lease_with_a_higher_token(replicas: list[Redis]) -> None:
    a, b = lead(replicas[0], "a"), lead(replicas[1], "b")
    assert await a.take()
    first = a.fence.held
    await eventually(lambda: gone(replicas[1], KEYS.leader), what="a's lease lapsed")
    assert await b.take()
    assert b.fence.held is not None and first is not None
    assert int(b.fence.held.split()[0]) > int(first.split()[0])
    assert not await a.renew(), "a lapsed lease is not renewed once another holds it"
    assert a.fence.held is None


async def test_resigning_lets_another_lead_at_once(replicas: list[Redis]) -> None:
    a, b = lead(replicas[0], "a"), lead(replicas[1], "b")
    assert await a.take()
    await a.resign()
    assert await b.take()
    await a.resign()  # no longer its lease: it must not release b's
    assert await b.role() == {"leads": True, "leader": "b"}


async def test_a_deposed_leaders_commit_is_refused_and_changes_nothing(
    replicas: list[Redis],
) -> None:
    """The leader stalls past its TTL (it still believes it leads); a successor leads and
    commits. The stalled one's commit, made on what it read before, is refused by its token."""
    a, b = lead(replicas[0], "a"), lead(replicas[1], "b")
    assert await a.take()
    store_a = IncidentStore(replicas[0], PREFIX, fence=a.fence)
    store_b = IncidentStore(replicas[1], PREFIX, fence=b.fence)
    await opened(store_a, "1")
    stale = await store_a.load("1")

    await eventually(lambda: gone(replicas[1], KEYS.leader), what="a's lease lapsed")
    assert await b.take()
    assert a.fence.held is not None, "a has not noticed yet"
    late = incident("1").model_copy(update={"title": "a stale leader's change"})
    with pytest.raises(Deposed):
        await store_a.commit(Commit(late, version=stale.version))
    assert a.fence.refused.is_set() and a.fence.held is None, "a stops at once, not at renewal"
    current = await store_b.load("1")
    assert current.version == stale.version and current.incident is not None
    assert current.incident.title != "a stale leader's change"
    assert await store_b.commit(Commit(current.incident, version=current.version))


async def test_a_redis_that_lost_its_data_deposes_the_leader(replicas: list[Redis]) -> None:
    """The token sequence starts again from 1 after a flush; the old leader's value (its token
    and name) is no longer the one stored, so its writes are refused even if tokens repeat."""
    a, b = lead(replicas[0], "a"), lead(replicas[1], "b")
    assert await a.take()
    store_a = IncidentStore(replicas[0], PREFIX, fence=a.fence)
    await replicas[0].flushdb()
    assert await b.take()
    with pytest.raises(Deposed):
        await opened(store_a, "1")
    assert not await a.renew()
    assert await b.role() == {"leads": True, "leader": "b"}


async def test_a_replica_that_never_led_cannot_commit(redis: Redis) -> None:
    follower = lead(redis, "f")
    assert await lead(redis, "someone").take()
    assert not await follower.take()
    with pytest.raises(Deposed):
        await opened(IncidentStore(redis, PREFIX, fence=follower.fence), "1")


async def test_a_leader_shutting_down_finishes_its_writes_as_the_leader(redis: Redis) -> None:
    """SIGTERM mid-click: what the work commits while it stops is still the leader's (the lease
    is renewed until the work has stopped, however long past one TTL that is, within the time
    the work is given), and then the lease is given up."""
    leadership = lead(redis, "a")
    store = IncidentStore(redis, PREFIX, fence=leadership.fence)

    async def work(deposed: asyncio.Event) -> None:
        await deposed.wait()
        # The click under way when the process was told to stop: its backend answers later
        # than the lease, as renewed last, would have lasted.
        await asyncio.sleep(TTL_MS / 1000 * 2)
        await opened(store, "1")

    stop = asyncio.Event()
    leading = asyncio.create_task(campaign(leadership, work, Telemetry(), stop))
    await eventually(lambda: leadership.fence.held is not None, what="leading")
    stop.set()
    await asyncio.wait_for(leading, timeout=10)
    assert await store.get("1") is not None, "committed while stopping"
    assert await redis.get(KEYS.leader) is None, "the lease given up"
