"""How queuepilot reaches Redis: one server by URL, or the master a set of Sentinels names (asked
on every new connection, so a retry after a failover reaches the new master). A Redis Cluster is
refused: the commit script touches keys of many hash slots at once."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from redis import Redis as SyncRedis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

SENTINEL_SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
# A reply slower than this is a dead connection (so a webhook answers 503 quickly); a blocking
# wait (a sender's BLPOP on its bell) stays well below it, or every idle round would time out.
SOCKET_TIMEOUT_S = 5.0
LONGEST_BLOCK_S = 2.0
POOL_WAIT_S = 5.0  # how long a command waits for a connection when all are in use


class RedisSetupError(ValueError):
    """A Redis setting or server queuepilot cannot work with; the message says what to do."""


@dataclass(frozen=True)
class SentinelTarget:
    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    password: str | None = None
    sentinel_password: str | None = None


def parse_sentinels(value: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` (the port defaults to 26379) into pairs; IPv6 hosts in brackets."""
    found: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        host, port = part, DEFAULT_SENTINEL_PORT
        if part.startswith("["):
            host, _, rest = part[1:].partition("]")
            if rest:
                if not rest.startswith(":"):
                    raise RedisSetupError(f"sentinel {part!r}: expected [host]:port")
                port = _port(part, rest[1:])
        elif part.count(":") == 1:
            host, _, raw = part.partition(":")
            port = _port(part, raw)
        elif ":" in part:
            raise RedisSetupError(f"sentinel {part!r}: put an IPv6 address in brackets")
        if not host or any(c.isspace() or c in "/@?#" for c in host):
            raise RedisSetupError(f"sentinel {part!r}: not a host name")
        found.append((host, port))
    if not found:
        raise RedisSetupError("no sentinel given: expected host:port[,host:port…]")
    return tuple(found)


def parse_sentinel_url(url: str) -> SentinelTarget:
    """`redis+sentinel://[:password@]host:port[,host:port…]/master[/db]`."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise RedisSetupError(f"REDIS_URL: {exc}") from None
    if parts.scheme != SENTINEL_SCHEME:
        raise RedisSetupError(f"REDIS_URL: expected {SENTINEL_SCHEME}://…")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    password = unquote(userinfo.partition(":")[2]) or None
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise RedisSetupError("REDIS_URL: expected /<master name>[/<db>] after the sentinels")
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit() or int(db) > 15:
        raise RedisSetupError(f"REDIS_URL: database {db!r} is not 0-15")
    try:
        sentinels = parse_sentinels(hosts)
    except RedisSetupError as exc:
        raise RedisSetupError(f"REDIS_URL: {exc}") from None
    return SentinelTarget(sentinels, unquote(path[0]), int(db), password)


def refuse_unusable_url(url: str) -> None:
    """What redis-py refuses only once it connects (a port, an option), found by making its
    connection from `url` without opening it. A Sentinel URL is `parse_sentinel_url`'s."""
    if url.startswith(f"{SENTINEL_SCHEME}://"):
        return
    try:
        ConnectionPool.from_url(url).make_connection()
    except (TypeError, ValueError, RedisError) as exc:
        raise RedisSetupError(str(exc)) from None


class _WaitForConnection:
    """A pool where a command waits for a free connection instead of failing, so a crowd of clicks
    is served; redis-py's `BlockingConnectionPool` costs 25 % of the intake's rate."""

    max_connections: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turns = asyncio.Semaphore(self.max_connections)

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self._turns.locked():
            try:
                await asyncio.wait_for(self._turns.acquire(), POOL_WAIT_S)
            except TimeoutError:
                raise MaxConnectionsError(
                    f"all {self.max_connections} connections stayed in use for {POOL_WAIT_S:g} s"
                ) from None
        else:
            await self._turns.acquire()
        try:
            return await super().get_connection(*args, **kwargs)  # type: ignore[misc]
        except BaseException:
            self._turns.release()
            raise

    async def release(self, connection: Any) -> None:
        try:
            await super().release(connection)  # type: ignore[misc]
        finally:
            self._turns.release()


class WaitingConnectionPool(_WaitForConnection, ConnectionPool): ...


class WaitingSentinelPool(_WaitForConnection, SentinelConnectionPool): ...


def build_redis(
    url: str,
    sentinel: SentinelTarget | None = None,
    *,
    max_connections: int = 100,
    client_name: str = "queuepilot",
) -> Redis:
    """A client that rides out a Redis restart or failover, with short timeouts so a webhook
    answers 503 quickly when Redis is gone."""
    options = {
        "decode_responses": True,
        "socket_connect_timeout": 2,
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_keepalive": True,
        "health_check_interval": 10,
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=3),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError, ConnectionResetError],
        "max_connections": max_connections,
        "client_name": client_name,  # which of the replica's clients, in `CLIENT LIST`
    }
    if sentinel is None:
        if urlsplit(url).scheme == "unix":
            del options["socket_keepalive"]  # TCP's: a socket file's connection refuses it
        return Redis.from_pool(WaitingConnectionPool.from_url(url, **options))
    sentinels = Sentinel(
        list(sentinel.sentinels),
        sentinel_kwargs={
            # A Sentinel that is down is skipped at once, not retried for seconds.
            "retry": Retry(NoBackoff(), 0),
            "socket_timeout": 1,
            "socket_connect_timeout": 1,
            "password": sentinel.sentinel_password,
        },
    )
    return sentinels.master_for(
        sentinel.master,
        redis_class=Redis,
        connection_pool_class=WaitingSentinelPool,
        db=sentinel.db,
        password=sentinel.password,
        **options,
    )


def refuse_cluster(url: str, sentinel: SentinelTarget | None) -> None:
    """Fail at startup, clearly, when pointed at a Redis Cluster node. An unreachable Redis is
    not refused: the bot starts, answers 503 and turns ready when Redis comes."""
    if sentinel is not None:
        return  # Sentinel watches plain masters; a cluster node cannot be one
    try:
        with SyncRedis.from_url(url, socket_connect_timeout=2, socket_timeout=2) as client:
            info = client.info("cluster")
    except (RedisError, OSError, ValueError) as exc:
        log.info("redis: not checked for cluster mode (%s)", type(exc).__name__)
        return
    if str(info.get("cluster_enabled", 0)) == "1":
        raise RedisSetupError(
            "REDIS_URL points at a Redis Cluster node. queuepilot changes an incident, its "
            "channel's send queue and the notification stream in one Lua script, which Cluster "
            "allows only within one hash slot. Use a single Redis, or Sentinel for failover "
            "(REDIS_SENTINELS and REDIS_SENTINEL_MASTER)."
        )


async def wait_bell(redis: Redis, bell: str, timeout_s: float) -> None:
    """Sleep until a committer rings `bell`, or `timeout_s` (at most `LONGEST_BLOCK_S`)."""
    await redis.blpop([bell], timeout=min(max(timeout_s, 0.01), LONGEST_BLOCK_S))  # type: ignore[misc]


def _port(part: str, raw: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise RedisSetupError(f"sentinel {part!r}: port {raw!r} is not 1-65535")
    return int(raw)
