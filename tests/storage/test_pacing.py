"""Slack's app-wide pacing against a real redis-server: a 429's hold seen by every replica, a slot
taken once per interval however many compete, and a deadline that refuses with the time to wait.
Each assertion is a bound that load can only make safer (a slot is never taken early), never a
timing that load could break."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from bot.storage.pacing import Pacing, Turn
from tests.support.store import KEYS

EDIT = "chat.update"
CLOCKS_S = 0.01


@pytest.fixture
async def replicas(redis_url: str) -> AsyncIterator[list[Redis]]:
    """Two connections, as two bot replicas would hold."""
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(2)]
    yield clients
    for client in clients:
        await client.aclose()


def pacings(replicas: list[Redis]) -> list[Pacing]:
    return [Pacing(r, KEYS) for r in replicas]


async def test_a_hold_recorded_by_one_replica_holds_the_method_for_the_other(
    replicas: list[Redis],
) -> None:
    one, other = pacings(replicas)
    await one.hold("chat.postMessage", 30)

    assert 25 < await other.held_for("chat.postMessage") <= 30
    assert await other.held_for(EDIT) == 0, "other methods are not held"
    turn = await other.wait_for_slot("chat.postMessage", 0, within_s=1)
    assert not turn.taken and 25 < turn.retry_after_s <= 30


async def test_a_short_hold_is_waited_out_before_the_slot_is_taken(replicas: list[Redis]) -> None:
    one, other = pacings(replicas)
    await one.hold(EDIT, 0.3)

    assert await other.wait_for_slot(EDIT, 5000, within_s=30) == Turn(taken=True)
    assert await one.held_for(EDIT) == 0, "taken only once the hold had ended"


async def test_competing_replicas_take_a_slot_once_per_interval(replicas: list[Redis]) -> None:
    one, other = pacings(replicas)
    started = time.monotonic()

    turns = await asyncio.gather(
        one.wait_for_slot(EDIT, 1000, within_s=0), other.wait_for_slot(EDIT, 1000, within_s=0)
    )
    assert sorted(turn.taken for turn in turns) == [False, True], "one slot, one taker"
    [refused] = [turn for turn in turns if not turn.taken]
    assert 0 < refused.retry_after_s <= 1, "told when the slot frees"

    # The one refused waits its turn: it gets the next slot, never before the interval ends.
    turns = await asyncio.gather(
        one.wait_for_slot(EDIT, 300, within_s=30), other.wait_for_slot(EDIT, 300, within_s=30)
    )
    assert all(turn.taken for turn in turns)
    # Redis expires a key by its own clock, to the millisecond.
    assert time.monotonic() - started >= 1.3 - CLOCKS_S, "the slot of 1 s, then one of 300 ms"


async def test_a_slot_that_would_come_after_the_deadline_is_refused_with_its_wait(
    replicas: list[Redis],
) -> None:
    one, other = pacings(replicas)
    assert (await one.wait_for_slot(EDIT, 60_000)).taken

    turn = await other.wait_for_slot(EDIT, 60_000, within_s=2)

    assert not turn.taken
    assert 50 < turn.retry_after_s <= 60, "the slot's own time left, as a 429 would say"
    assert await replicas[0].pttl(KEYS.slot(EDIT)) > 0, "refused at once, not after waiting"


async def test_a_method_without_a_slot_is_paced_by_holds_alone(replicas: list[Redis]) -> None:
    [pacing, _] = pacings(replicas)
    assert all([(await pacing.wait_for_slot("chat.getPermalink", 0)).taken for _ in range(3)])
    assert await replicas[0].exists(KEYS.slot("chat.getPermalink")) == 0
