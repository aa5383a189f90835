"""The bot's Redis connections, against a real redis-server (`bot.redis_conn`): a command that
finds every connection in use waits its turn instead of failing, and a command is written at
once, waiting only when the socket cannot take it."""

from __future__ import annotations

import asyncio
import shutil
import signal
import time

import pytest
from redis import Redis as SyncRedis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import MaxConnectionsError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bot import redis_conn
from bot.redis_conn import SentinelTarget, WaitingConnectionPool, build_redis
from tests.conftest import CHANNEL, RunningBot, eventually
from tests.servers import RedisServer


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


async def test_a_crowd_on_the_pool_does_not_cost_the_channel_its_sender(
    running_bot: RunningBot, redis_url: str
) -> None:
    """Every connection of the bot's pool held by slow commands for longer than a lease's life:
    the channel's sender still renews its lease (it has connections of its own)."""
    bot = running_bot.bot
    key = bot.queue.keys.sender_lease(CHANNEL)
    async with Redis.from_url(redis_url, decode_responses=True) as watcher:
        holder = await eventually(lambda: watcher.get(key), what="the channel's sender")
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

            async def renewed() -> bool:
                return int(await watcher.pttl(key)) > before

            await eventually(renewed, what="the lease renewed while the pool is full", timeout=4)
            assert await watcher.get(key) == holder
        finally:
            for task in crowd:
                task.cancel()
            await asyncio.gather(*crowd, return_exceptions=True)


# -- commands written at once (`_PromptWrite`) ---------------------------------------------------


async def test_a_command_is_on_its_way_before_work_queued_ahead_of_it_runs(redis_url: str) -> None:
    """Why it matters: the intake's commit must not wait behind a webhook's answer or a render
    already queued on the loop. Here the queued work looks for the command's effect in Redis,
    holding the loop meanwhile: it sees it only if the command left when it was awaited."""
    client = build_redis(redis_url)
    seen: list[object] = []

    def queued_work() -> None:  # holds the loop, as CPU work does
        with SyncRedis.from_url(redis_url, decode_responses=True) as other:
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and not seen:
                if other.get("prompt") == "sent":
                    seen.append(True)

    try:
        await client.ping()  # connected: the next command finds its connection ready
        asyncio.get_running_loop().call_soon(queued_work)
        await client.set("prompt", "sent")
    finally:
        await client.aclose()
    assert seen, "the command left only after the work queued ahead of it"


async def test_a_value_larger_than_the_sockets_buffers_goes_through_whole(
    redis_url: str,
) -> None:
    """The socket takes part of a 32 MiB command at once: the rest is waited for, as before."""
    value = bytes(range(256)) * (32 * 4096)
    client = build_redis(redis_url)
    try:
        await client.set("big", value)
        assert (await client.strlen("big")) == len(value)
        async with Redis.from_url(redis_url) as raw:
            assert await raw.get("big") == value
    finally:
        await client.aclose()


async def test_a_write_to_a_hung_server_fails_within_the_socket_timeout() -> None:
    """A redis-server that stops reading (hung: SIGSTOP) mid-session: a command larger than the
    kernel's buffers fails with a timeout after the bot's socket timeout (5 s, the default path)
    and the connection is dropped; nothing hangs."""
    server = RedisServer()
    server.start()
    client = build_redis(server.url)
    pool = client.connection_pool
    # The timeout is the bot's; only the retries are dropped (each would wait it again).
    pool.connection_kwargs["retry"] = Retry(NoBackoff(), 0)
    try:
        await client.ping()
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(RedisTimeoutError, match="writing"):
                await asyncio.wait_for(client.set("big", b"x" * (64 << 20)), 30)
        finally:
            server.process.send_signal(signal.SIGCONT)
        assert pool.connection_kwargs["socket_timeout"] == 5
        assert not any(c.is_connected for c in pool._available_connections)
        assert await client.ping(), "a new connection serves once the server is back"
    finally:
        await client.aclose()
        server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)


def test_every_kind_of_connection_the_bot_makes_writes_at_once() -> None:
    """Plain, TLS, Unix socket and Sentinel's connections alike (nothing is connected here)."""
    sentinel = SentinelTarget((("127.0.0.1", 1),), "main")
    for client in (
        build_redis("redis://127.0.0.1:1"),
        build_redis("rediss://127.0.0.1:1"),
        build_redis("unix:///nowhere.sock"),
        build_redis("redis://unused", sentinel),
    ):
        assert issubclass(client.connection_pool.connection_class, redis_conn._PromptWrite)
