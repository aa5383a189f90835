"""Every connection of a running bot's Redis pool held by a blocking read, as a crowd of clicks
holds them: what the bot then answers is what a person meets when it is busy, not down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from redis.asyncio import Redis

from bot.storage import connection
from tests.support.running import eventually


@asynccontextmanager
async def every_connection_held(
    client: Redis, url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[None]:
    """Held until the block ends. `url` is a redis-server of the bot's alone: its `CLIENT LIST`
    shows when the pool has opened them all, and the pool's wait is cut to 0.5 s."""
    monkeypatch.setattr(connection, "POOL_WAIT_S", 0.5)
    size = client.connection_pool.max_connections
    holders = [asyncio.create_task(client.blpop([f"held-{n}"], timeout=4)) for n in range(size)]
    try:

        async def held() -> bool:
            listed = await watcher.client_list()
            return sum(c["name"] == "queuepilot" for c in listed) == size

        # The bot's own commands, waiting for a turn behind the reads, keep none free.
        async with Redis.from_url(url) as watcher:
            await eventually(held, what="every connection of the pool opened and held")
        yield
    finally:
        for holder in holders:
            holder.cancel()
        await asyncio.gather(*holders, return_exceptions=True)
