"""The display-name cache against a real redis-server: one replica's lookup serves every other."""

from __future__ import annotations

from redis.asyncio import Redis

from bot.storage.slack_cache import UserNames
from tests.support.store import KEYS


async def test_a_name_is_kept_a_day_for_every_replica(redis_url: str) -> None:
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(2)]
    one, other = (UserNames(client, KEYS) for client in clients)
    try:
        await one.put("U0ALICE", "alice")
        await one.put("U0NOBODY", "")

        assert await other.get("U0ALICE") == "alice"
        assert await other.get("U0NOBODY") == "", "a user without a name is not asked again"
        assert await other.get("U0BOB") is None
        assert 0 < await clients[1].ttl(KEYS.user("U0ALICE")) <= 86_400
    finally:
        for client in clients:
            await client.aclose()
