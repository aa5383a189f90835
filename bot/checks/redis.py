"""Redis: reachable with the bot's own client, 6.2 or newer, a master, persistent, never evicting.
Eviction fails: it may delete an open incident or a lease, where `noeviction` refuses writes (the
webhook answers 503, so the sender retries). No persistence only warns: it works until a restart."""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from bot.checks import Finding, fail, ok, warn
from bot.config import Settings
from bot.storage.connection import RedisSetupError, SentinelTarget, refuse_cluster

SUBJECT = "redis"
# XAUTOCLAIM (6.2) takes over what a crashed replica left half-done (`bot.storage.streams`).
MIN_VERSION = (6, 2, 0)
FULL_SHARE = 0.9
NO_PERSISTENCE = (
    "turn on AOF (appendonly yes) or RDB snapshots (save 3600 1 300 100 60 10000); on a managed "
    "Redis, its persistence or backup setting"
)
EVICTION_FIX = (
    "set maxmemory-policy noeviction (CONFIG SET and redis.conf, or the managed Redis's "
    "parameter group); when full, Redis then refuses writes and the webhook answers 503, "
    "so Grafana and Alertmanager send again"
)


async def probe(settings: Settings, redis: Redis) -> list[Finding]:
    sentinel = settings.sentinel()
    findings = [await _sentinels(sentinel)] if sentinel is not None else []
    where = _where(settings.redis_url, sentinel)
    try:
        await redis.ping()
        server = await redis.info("server")
    except (RedisError, OSError) as exc:
        fix = "start Redis, or set REDIS_URL (or REDIS_SENTINELS) to where it runs"
        return [*findings, fail(SUBJECT, f"unreachable at {where}: {_said(exc)}", fix)]
    try:
        await asyncio.to_thread(refuse_cluster, settings.redis_url, sentinel)
    except RedisSetupError as exc:
        return [*findings, fail(SUBJECT, str(exc))]
    version = _version(str(server.get("redis_version", "?")), where)
    role = await _role(redis, settings.wait_replicas)
    return [*findings, version, role, await _persistence(redis), await _memory(redis)]


def _version(version: str, where: str) -> Finding:
    numbers = tuple(int(re.sub(r"\D", "", part) or 0) for part in version.split(".")[:3])
    if numbers < MIN_VERSION:
        said = f"Redis {version} at {where} is too old: queuepilot needs 6.2 or newer (XAUTOCLAIM, "
        said += "with which a replica takes over a crashed one's notifications)"
        return fail(SUBJECT, said, "upgrade Redis to 6.2 or newer (7.x recommended)")
    return ok(SUBJECT, f"Redis {version} at {where}")


async def _role(redis: Redis, wait_replicas: int) -> Finding:
    replication = await redis.info("replication")
    role = replication.get("role", "master")
    if role != "master":
        fix = "point REDIS_URL at the master, or use Sentinel (REDIS_SENTINELS), which finds it"
        return fail(SUBJECT, f"REDIS_URL reaches a {role}, which refuses writes", fix)
    replicas = int(replication.get("connected_slaves", 0))
    if replicas < wait_replicas:
        said = f"REDIS_WAIT_REPLICAS is {wait_replicas}, but {replicas} replica"
        said += f"{'s are' if replicas != 1 else ' is'} connected: accepted notifications are "
        said += "answered without waiting for a copy"
        return warn(SUBJECT, said, "connect the replicas (replicaof), or lower REDIS_WAIT_REPLICAS")
    copies = f", {replicas} replica{'s' if replicas != 1 else ''} connected" if replicas else ""
    return ok(SUBJECT, f"role master{copies}")


async def _persistence(redis: Redis) -> Finding:
    info = await redis.info("persistence")
    if str(info.get("aof_enabled", 0)) == "1":
        fsync = await _config(redis, "appendfsync")
        return ok(SUBJECT, "persistence: AOF" + (f" (appendfsync {fsync})" if fsync else ""))
    save = await _config(redis, "save")
    if save is None:
        said = "persistence unknown: AOF is off and Redis refused CONFIG GET save (a managed Redis "
        said += "or an ACL); without snapshots either, a restart loses accepted notifications and "
        said += "open incidents"
        return warn(SUBJECT, said, "make sure RDB snapshots or AOF are on: " + NO_PERSISTENCE)
    if not save.strip():
        said = "no persistence (AOF off, no RDB snapshots): works, but a restart loses accepted "
        return warn(SUBJECT, said + "notifications and open incidents", NO_PERSISTENCE)
    said = f"persistence: RDB snapshots (save {save}); a crash loses the changes since the last "
    return ok(SUBJECT, said + "one (appendonly yes keeps them)")


async def _memory(redis: Redis) -> Finding:
    info = await redis.info("memory")
    limit = int(info.get("maxmemory", 0) or 0)
    policy = str(info.get("maxmemory_policy", "noeviction"))
    if not limit:
        return ok(SUBJECT, f"memory: no maxmemory, {info.get('used_memory_human', '?')} used")
    if policy != "noeviction":
        said = f"maxmemory-policy {policy} with maxmemory {info.get('maxmemory_human', limit)}: "
        said += "Redis may evict open incidents, accepted notifications and the leases that keep "
        said += "two replicas from posting twice"
        return fail(SUBJECT, said, EVICTION_FIX)
    share = int(info.get("used_memory", 0) or 0) / limit
    if share >= FULL_SHARE:
        said = f"memory {share:.0%} of maxmemory used: when full, writes are refused and webhooks "
        fix = "raise maxmemory, or shorten INCIDENT_RETENTION_DAYS"
        return warn(SUBJECT, said + "answer 503", fix)
    return ok(SUBJECT, f"memory: noeviction, {share:.0%} of maxmemory used")


async def _config(redis: Redis, name: str) -> str | None:
    """None where Redis refuses CONFIG (managed services, ACLs)."""
    try:
        answer: Any = await redis.config_get(name)
    except ResponseError:
        return None
    value = answer.get(name) if isinstance(answer, dict) else None
    return None if value is None else str(value)


async def _sentinels(target: SentinelTarget) -> Finding:
    """Each Sentinel asked for the master, as the bot's client asks on every connection."""
    answers = await asyncio.gather(
        *(_master_of(host, port, target) for host, port in target.sentinels)
    )
    named = {address for address, _ in answers if address}
    problems = [problem for _, problem in answers if problem]
    if not named:
        fix = "check REDIS_SENTINELS, REDIS_SENTINEL_MASTER and REDIS_SENTINEL_PASSWORD"
        return fail(SUBJECT, f"no Sentinel names a master {target.master!r}: {problems[0]}", fix)
    if len(named) > 1:
        said = f"the Sentinels disagree on master {target.master!r}: {', '.join(sorted(named))}"
        fix = "wait for the failover to settle; if it lasts, check the Sentinels' quorum"
        return fail(SUBJECT, said, fix)
    master, count = named.pop(), len(target.sentinels)
    if problems:
        said = f"{count - len(problems)} of {count} Sentinels name {master} as master "
        said += f"{target.master!r}; the others: {problems[0]}"
        return warn(SUBJECT, said, "a failover needs a quorum of Sentinels: bring the others back")
    return ok(SUBJECT, f"all {count} Sentinels name {master} as master {target.master!r}")


async def _master_of(host: str, port: int, target: SentinelTarget) -> tuple[str, str]:
    # One try: a Sentinel that is down says so at once, not after seconds of backoff.
    client = Redis(
        host=host,
        port=port,
        password=target.sentinel_password,
        socket_timeout=2,
        socket_connect_timeout=2,
        decode_responses=True,
        retry=Retry(NoBackoff(), 0),
    )
    try:
        address = await client.execute_command("SENTINEL", "get-master-addr-by-name", target.master)
    except (RedisError, OSError) as exc:
        return "", f"{host}:{port}: {_said(exc)}"
    finally:
        await client.aclose()
    if not address:
        return "", f"{host}:{port} knows no master {target.master!r}"
    return f"{address[0]}:{address[1]}", ""


def _where(url: str, sentinel: SentinelTarget | None) -> str:
    if sentinel is not None:
        return f"master {sentinel.master!r} (database {sentinel.db}) via Sentinel"
    try:
        parts = urlsplit(url)
        return f"{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path or ''}"
    except ValueError:
        return "REDIS_URL"


def _said(exc: BaseException) -> str:
    return str(exc).strip() or type(exc).__name__
