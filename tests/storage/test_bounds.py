"""What keeps memory flat for weeks, against a real redis-server: a busy channel's edit-after
times and the App Home's viewers stay at their bound, the entries in use survive, and every key
they live in carries a TTL; the retention setting takes a span as short as a soak needs."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from bot.config import Settings
from bot.outbound.send import STRUCK_KEPT, strike
from bot.storage.home import MAX_VIEWERS, HomeViewers, Shown
from bot.storage.send_queue import SendQueue
from tests.support.store import CHANNEL, DAY, KEYS, PREFIX, incident

EDIT_AFTER_KEPT = 64  # prelude.lua


async def test_a_busy_channels_edit_after_times_keep_only_those_still_ahead(redis: Redis) -> None:
    queue = SendQueue(redis, PREFIX, retention_s=DAY)
    now_ms = int(time.time() * 1000)
    for n in range(3 * EDIT_AFTER_KEPT):  # roots edited long ago, each once
        await queue.record_edit(
            CHANNEL, str(n), version=1, digest="d", next_at_ms=now_ms - 60_000, edited=True
        )
    await queue.record_edit(
        CHANNEL, "hot", version=1, digest="d", next_at_ms=now_ms + 60_000, edited=True
    )

    kept = await redis.hgetall(KEYS.edit_after(CHANNEL))
    assert len(kept) <= EDIT_AFTER_KEPT + 1
    assert kept["hot"] == str(now_ms + 60_000), "a root still waiting keeps its time"
    assert 0 < await redis.ttl(KEYS.edit_after(CHANNEL)) <= DAY


async def test_home_viewers_past_the_bound_are_forgotten_with_what_their_home_shows(
    redis: Redis,
) -> None:
    viewers, now = HomeViewers(redis, KEYS), time.time()
    async with redis.pipeline(transaction=False) as pipe:  # a full house, within the last hour
        pipe.zadd(KEYS.home_viewers, {f"U{n}": now - 3600 + n / 10 for n in range(MAX_VIEWERS)})
        pipe.hset(KEYS.home_shown, mapping={f"U{n}": "{}" for n in range(MAX_VIEWERS)})
        await pipe.execute()
    await viewers.record("U4999", Shown("s", "n", now))
    await viewers.opened("U4999", now)  # the latest viewer opens it again
    await viewers.opened("Unew", now)

    assert await redis.zcard(KEYS.home_viewers) == MAX_VIEWERS
    assert await redis.hlen(KEYS.home_shown) <= MAX_VIEWERS
    assert "Unew" in await viewers.since(now) and "U4999" in await viewers.since(now)
    assert await redis.zscore(KEYS.home_viewers, "U0") is None, "the longest unseen goes"
    assert await redis.hexists(KEYS.home_shown, "U0") == 0
    assert (await viewers.shown(["U4999"]))["U4999"].state == "s"
    assert await redis.ttl(KEYS.home_viewers) > 0 and await redis.ttl(KEYS.home_shown) > 0


def test_a_senders_failure_counts_stay_bounded_and_the_latest_survive() -> None:
    strikes: dict[str, int] = {}
    hot = strike(strikes, "hot")
    for n in range(3 * STRUCK_KEPT):
        strike(strikes, f"once/{n}")
        if n % 100 == 0:
            hot = strike(strikes, "hot")
    assert len(strikes) == STRUCK_KEPT
    assert strike(strikes, "hot") == hot + 1 > 2, "the item failing again kept its count"
    assert "once/0" not in strikes


def test_the_retention_takes_a_span_shorter_than_a_day() -> None:
    base = {"slack_bot_token": "xoxb-1", "slack_signing_secret": "s", "slack_channel": "C0SOAK"}
    assert Settings(**base, incident_retention_days="10m").incident_retention_days * 86_400 == 600
    assert Settings(**base, incident_retention_days="30").incident_retention_days == 30


async def test_a_root_recorded_after_its_incident_expired_leaves_no_key_for_ever(
    redis: Redis,
) -> None:
    queue = SendQueue(redis, PREFIX, retention_s=DAY)
    gone = incident("7")  # never stored, as if it expired while its root was on its way
    await queue.record_root(
        gone, "1700000000.000100", "d", version=1, edit_differs=False, edit_after_ms=0
    )
    await queue.record_edit(CHANNEL, "8", version=1, digest="d", next_at_ms=0, edited=False)

    for key in (KEYS.incident("7"), KEYS.message(CHANNEL, "1700000000.000100"), KEYS.incident("8")):
        assert 0 < await redis.ttl(key) <= DAY, key
