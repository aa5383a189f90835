"""The due set against a real redis-server: members claimed once across replicas, a claim
ended only by its holder, a dead holder's member due again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.storage.due_set import DueSet
from tests.support.store import KEYS


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[list[Redis]]:
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(3)]
    await clients[0].flushall()
    yield clients
    for client in clients:
        await client.aclose()


def due_sets(replicas: list[Redis]) -> list[DueSet]:
    return [
        DueSet(r, KEYS.scale_reverts, data_key=KEYS.scale_revert, data_ttl_s=60) for r in replicas
    ]


async def test_replicas_claiming_at_once_take_each_due_member_once(replicas: list[Redis]) -> None:
    sets = due_sets(replicas)
    for n in range(30):
        await sets[0].schedule(f"m{n}", 100.0 + n)
    claimed = await asyncio.gather(*(s.due(125.0, 30, limit=10) for s in sets))
    members = [c.member for claims in claimed for c in claims]
    assert sorted(members) == sorted(f"m{n}" for n in range(26))
    assert await sets[0].pending(125.0) == []
    assert await sets[1].claim("m26", 125.0, 30) is None  # not due yet


async def test_a_claim_ends_only_for_its_holder(replicas: list[Redis]) -> None:
    mine, theirs = due_sets(replicas)[:2]
    await mine.schedule("linux|min", 100.0, data="before")
    claim = await mine.claim("linux|min", 100.0, 30)
    assert claim is not None and await mine.due_at(claim.member) == claim.token
    assert await theirs.claim("linux|min", 120.0, 30) is None

    await theirs.schedule("linux|min", 110.0, data="a new scale-up")  # recorded meanwhile
    assert await mine.due_at(claim.member) == 110.0
    assert not await mine.done(claim)
    assert not await mine.reschedule(claim, 500.0, "stale")
    assert await theirs.due_at("linux|min") == 110.0
    assert await theirs.data("linux|min") == "a new scale-up"


async def test_a_holder_reschedules_or_finishes_with_the_members_data(
    replicas: list[Redis],
) -> None:
    due = due_sets(replicas)[0]
    await due.schedule("a", 100.0, data="one")
    claim = await due.claim("a", 100.0, 30)
    assert claim is not None
    assert await due.reschedule(claim, 200.0, "two")
    assert (await due.due_at("a"), await due.data("a")) == (200.0, "two")
    [again] = await due.due(200.0, 30)
    assert await due.done(again)
    assert (await due.due_at("a"), await due.data("a")) == (None, None)


async def test_a_dead_holders_member_comes_due_when_its_lease_ends(replicas: list[Redis]) -> None:
    dead, alive = due_sets(replicas)[:2]
    await dead.schedule("a", 100.0)
    [claim] = await dead.due(100.0, 30)
    assert await alive.due(129.0, 30) == []
    [taken] = await alive.due(claim.token, 30)
    assert taken.member == "a" and taken.token != claim.token
    assert not await dead.done(claim)


async def test_a_set_with_a_ttl_keeps_it_on_every_schedule(replicas: list[Redis]) -> None:
    due = DueSet(replicas[0], KEYS.silence_watch, keep_s=600)
    await due.schedule("1", 100.0)
    assert 0 < await replicas[0].ttl(KEYS.silence_watch) <= 600
    claim = await due.claim("1", 100.0, 30)
    assert claim is not None
    await replicas[0].persist(KEYS.silence_watch)
    assert await due.reschedule(claim, 150.0)
    assert 0 < await replicas[0].ttl(KEYS.silence_watch) <= 600


async def test_the_next_due_time_is_the_earliest_members(replicas: list[Redis]) -> None:
    due = DueSet(replicas[0], KEYS.edits("C1"))
    assert await due.next_due() is None
    await due.schedule("2", 300.0)
    await due.schedule("1", 200.0)
    assert (await due.pending(100.0), await due.next_due()) == ([], 200.0)
    await due.remove("1")
    assert await due.next_due() == 300.0
