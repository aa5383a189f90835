"""Claim once and the token lease, against a real redis-server: several replicas at once, and a
holder whose lease ran out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.storage.leases import Leases
from tests.support.running import eventually
from tests.support.store import KEYS, gone


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[list[Redis]]:
    """Three connections, as three bot replicas would hold."""
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(3)]
    yield clients
    for client in clients:
        await client.aclose()


async def test_only_one_of_concurrent_claimers_claims_once(replicas: list[Redis]) -> None:
    claims = [Leases(r) for r in replicas]
    won = await asyncio.gather(*(c.claim_once(KEYS.notice_claim("w1"), 5000) for c in claims))
    assert sorted(won) == [False, False, True]
    assert 0 < await replicas[0].pttl(KEYS.notice_claim("w1")) <= 5000


async def test_a_claim_can_be_made_again_once_it_expired(replicas: list[Redis]) -> None:
    claims = Leases(replicas[0])
    assert await claims.claim_once(KEYS.notice_claim("w2"), 50, "first")
    await eventually(lambda: gone(replicas[1], KEYS.notice_claim("w2")), what="claim expired")
    assert await claims.claim_once(KEYS.notice_claim("w2"), 5000, "second")
    assert await replicas[1].get(KEYS.notice_claim("w2")) == "second"


async def test_only_one_of_concurrent_acquirers_wins(replicas: list[Redis]) -> None:
    leases = [Leases(r) for r in replicas]
    won = await asyncio.gather(
        *(lease.try_acquire(KEYS.action_lock("1", "scale"), 5000) for lease in leases)
    )
    assert sum(lease is not None for lease in won) == 1


async def test_an_expired_holder_can_neither_renew_nor_release_the_new_holders_lease(
    replicas: list[Redis],
) -> None:
    old, new = Leases(replicas[0]), Leases(replicas[1])
    stale = await old.try_acquire(KEYS.action_lock("1", "scale"), 50)
    assert stale is not None
    await eventually(
        lambda: gone(replicas[1], KEYS.action_lock("1", "scale")), what="lease expired"
    )
    current = await new.try_acquire(KEYS.action_lock("1", "scale"), 5000)
    assert current is not None

    assert not await old.renew(stale, 5000)
    assert await old.keep(stale, 5000, "cooling down") is None
    await old.release(stale)

    assert await replicas[2].get(current.key) == current.token
    assert await new.renew(current, 5000)


async def test_a_lease_tells_others_its_note_and_keeps_a_new_one_for_a_cooldown(
    replicas: list[Redis],
) -> None:
    leases, other = Leases(replicas[0]), Leases(replicas[1])
    key = KEYS.action_lock("1", "silence")
    lease = await leases.try_acquire(key, 5000, note="silencing")
    assert lease is not None
    assert await other.try_acquire(key, 5000) is None
    assert await other.holder_note(key) == "silencing"

    kept = await leases.keep(lease, 60_000, "al silenced it")
    assert kept is not None and kept.token.split(" ")[0] == lease.token.split(" ")[0]
    assert await other.holder_note(key) == "al silenced it"
    assert 5000 < await replicas[2].pttl(key) <= 60_000
    await leases.release(kept)
    assert await other.holder_note(key) is None
