"""The Redis connection pool under a crowd, against a real redis-server: a command that finds
every connection in use waits its turn instead of failing (`bot.storage.connection`)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import ConnectionPool, Redis
from redis.exceptions import MaxConnectionsError

from bot.storage import connection as redis_conn
from bot.storage.connection import WaitingConnectionPool, build_redis
from bot.storage.early_warning import WarningStore
from bot.storage.send_queue import SendQueue
from tests.support.running import RunningBot, eventually
from tests.support.servers import require_binary, wait_until
from tests.support.slack import CHANNEL


async def crowd(client: Redis, size: int) -> list[object]:
    """`size` commands at once, each holding its connection for a moment (a blocking read)."""
    return await asyncio.gather(
        *(client.blpop(["nothing-here"], timeout=0.2) for _ in range(size)),
        return_exceptions=True,
    )


async def test_a_crowd_larger_than_the_pool_waits_its_turn(redis_url: str) -> None:
    client = Redis.from_pool(WaitingConnectionPool.from_url(redis_url, max_connections=3))
    try:
        results = await crowd(client, 12)
    finally:
        await client.aclose()
    assert results == [None] * 12, "every command answered, none refused"


async def test_redis_pys_own_pool_refuses_the_same_crowd(redis_url: str) -> None:
    """Why the waiting pool exists: the same crowd on redis-py's pool is refused at once."""
    client = Redis.from_pool(ConnectionPool.from_url(redis_url, max_connections=3))
    try:
        results = await crowd(client, 12)
    finally:
        await client.aclose()
    assert any(isinstance(r, MaxConnectionsError) for r in results)


async def test_the_bots_client_waits_for_a_connection(redis_url: str) -> None:
    client = build_redis(redis_url)
    try:
        results = await crowd(client, client.connection_pool.max_connections + 50)
    finally:
        await client.aclose()
    assert all(r is None for r in results)


async def test_a_connection_that_never_comes_back_ends_the_wait_with_an_error(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_conn, "POOL_WAIT_S", 0.1)
    client = Redis.from_pool(WaitingConnectionPool.from_url(redis_url, max_connections=1))
    try:
        held = asyncio.create_task(client.blpop(["nothing-here"], timeout=1))
        async with Redis.from_url(redis_url) as watcher:  # the one connection is now taken

            async def blocked() -> bool:
                return any(c["cmd"] == "blpop" for c in await watcher.client_list())

            await eventually(blocked, what="the blocking read holding the connection")
        with pytest.raises(MaxConnectionsError, match="stayed in use"):
            await client.get("key")
        assert await held is None
        assert await client.get("key") is None, "the connection came back: the pool serves again"
    finally:
        await client.aclose()


async def test_a_crowd_on_the_pool_does_not_cost_the_leader_its_lead(
    running_bot: RunningBot, redis_url: str
) -> None:
    """Every connection of the bot's pool held by slow commands for longer than a lease's life:
    the leader still renews its lease (it has connections of its own)."""
    bot = running_bot.bot
    key = bot.queue.keys.leader
    async with Redis.from_url(redis_url, decode_responses=True) as watcher:
        holder = await eventually(lambda: watcher.get(key), what="the leader")
        size = bot.redis.connection_pool.max_connections
        crowd = [
            asyncio.create_task(bot.redis.blpop(["nothing-here"], timeout=8)) for _ in range(size)
        ]
        try:

            async def pool_taken() -> bool:
                clients = await watcher.client_list()
                return sum(c["cmd"] == "blpop" for c in clients) >= size

            await eventually(pool_taken, what="every connection of the pool held")
            before = await watcher.pttl(key)
            lapsed = []

            async def renewed() -> bool:
                left = int(await watcher.pttl(key))
                if left == -2:
                    lapsed.append(left)
                return left > before

            # A loaded machine may renew late; what matters is that it renews before the lease
            # runs out, which a leader waiting on the crowd (8 s) would not.
            await eventually(renewed, what="the lease renewed while the pool is full", timeout=15)
            assert not lapsed, "the lease ran out while the pool was full"
            assert await watcher.get(key) == holder
        finally:
            for task in crowd:
                task.cancel()
            await asyncio.gather(*crowd, return_exceptions=True)


async def test_an_idle_senders_waits_end_quietly_within_the_socket_timeout(redis_url: str) -> None:
    """A channel with nothing to send waits on its doorbells with the bot's own client. A wait
    as long as the socket timeout was cut off as a Redis timeout every idle round: logged as a
    failure and backed off for up to 30 s, so the next post after a quiet spell waited."""
    bells = build_redis(redis_url, client_name="queuepilot-bells")
    queue = SendQueue(bells, "qp-idle", retention_s=60, bells=bells)
    warnings = WarningStore(bells, queue.keys, bells=bells)
    try:
        # The waits the senders ask for: a status edit's second, an early warning's five.
        await queue.wait_bell(queue.keys.posts_bell(CHANNEL), 1.0)
        await warnings.wait_for_edits(CHANNEL, redis_conn.SOCKET_TIMEOUT_S)
        await queue.wait_bell(queue.keys.edits_bell(CHANNEL), redis_conn.SOCKET_TIMEOUT_S + 1)
    finally:
        await bells.aclose()


@pytest.fixture
def redis_socket(tmp_path: Path) -> Iterator[Path]:
    """A redis-server listening on a socket file only."""
    socket = tmp_path / "redis.sock"
    command = [require_binary("redis-server"), "--port", "0", "--unixsocket", str(socket)]
    command += ["--save", "", "--dir", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(socket.exists, what="redis-server's socket")
        yield socket
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_the_bots_client_reaches_redis_over_a_unix_socket(redis_socket: Path) -> None:
    """REDIS_URL=unix://… as the settings' reference offers it."""
    client = build_redis(f"unix://{redis_socket}?db=1")
    try:
        assert await client.set("reached", "yes") and await client.get("reached") == "yes"
    finally:
        await client.aclose()
