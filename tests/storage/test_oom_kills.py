"""The record of OOM kills the weekly report reads, against a real redis-server: each (pod, uid)
once whichever replica's reading saw it, a kill first seen unnamed named once a reading can, and
the record bounded in time and count, its keys expiring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.domain.reading.fleet import OOM_KEEP_DAYS, OomKill
from bot.storage.fleet import OomKillRecord
from tests.support.store import KEYS

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
TYPE = "linux.2xlarge"


async def test_each_kill_is_kept_once_and_named_once_a_reading_can(redis: Redis) -> None:
    record, other_replica = OomKillRecord(redis, KEYS), OomKillRecord(redis, KEYS)
    first = [
        OomKill(TYPE, "arc-runner-k7x2p", "u1"),
        OomKill(TYPE, "arc-runner-k7x2p", "u2", "pull"),
    ]
    assert await record.record(first, now=NOW) == {
        ("arc-runner-k7x2p", "u1"): "",
        ("arc-runner-k7x2p", "u2"): "pull",
    }
    later = [
        OomKill(TYPE, "arc-runner-k7x2p", "u1", "trunk"),
        OomKill(TYPE, "arc-runner-k7x2p", "u2"),
    ]
    named = await other_replica.record(later, now=NOW + timedelta(minutes=1))
    assert named == {("arc-runner-k7x2p", "u1"): "trunk", ("arc-runner-k7x2p", "u2"): "pull"}

    kills = await record.since(NOW - timedelta(days=7))
    assert [(k.pod, k.uid, k.workflow, k.at) for k in kills] == [
        ("arc-runner-k7x2p", "u1", "trunk", NOW),  # first seen then, named later
        ("arc-runner-k7x2p", "u2", "pull", NOW),
    ]
    assert {k.runner_type for k in kills} == {TYPE}


async def test_the_record_keeps_eight_days_and_at_most_its_cap(redis: Redis) -> None:
    record = OomKillRecord(redis, KEYS, cap=5)
    old = NOW - timedelta(days=OOM_KEEP_DAYS, minutes=1)
    await record.record([OomKill(TYPE, "old-runner-a", "u0", "pull")], now=old)
    for n in range(7):
        at = NOW - timedelta(minutes=10 - n)
        await record.record([OomKill(TYPE, f"arc-runner-{n}", f"u{n}", "pull")], now=at)

    kept = await record.since(old - timedelta(days=1))
    assert [k.pod for k in kept] == [f"arc-runner-{n}" for n in range(2, 7)], "newest 5 kept"
    assert await redis.hlen(KEYS.oom_kills) == 5
    for key in (KEYS.oom_kills, KEYS.oom_kills_at):
        assert 0 < await redis.ttl(key) <= OOM_KEEP_DAYS * 86400
