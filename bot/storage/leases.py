"""Redis leases: short-lived, token-owned keys that let one replica at a time do a piece of work.

A lease is `SET key token NX PX ttl`; only the holder of the token may renew or release it (Lua
compare-and-set), so a replica whose lease expired can never extend or release someone else's.
Leases pick who works (the sender of a channel); correctness of incident state never rests on
them: commits are fenced by version (`bot.storage.incident_store`), and a sender checks its
lease atomically before every post (`bot.outbound.queue.SendQueue.begin`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from redis.asyncio import Redis

COMPARE_AND_DELETE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


@dataclass(frozen=True)
class Lease:
    key: str
    token: str


class Leases:
    """Acquire, renew and release leases; keys are named by `bot.storage.keys.Keys`, because scripts
    check the same leases (`begin_send.lua`)."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._release = redis.register_script(COMPARE_AND_DELETE)
        self._renew = redis.register_script(_RENEW)

    async def try_acquire(self, key: str, ttl_ms: int) -> Lease | None:
        lease = Lease(key, secrets.token_hex(8))
        acquired = await self._redis.set(lease.key, lease.token, nx=True, px=ttl_ms)
        return lease if acquired else None

    async def renew(self, lease: Lease, ttl_ms: int) -> bool:
        """Extend a lease we still hold; False when it expired (and may be someone else's)."""
        return bool(await self._renew(keys=[lease.key], args=[lease.token, ttl_ms]))

    async def release(self, lease: Lease) -> None:
        await self._release(keys=[lease.key], args=[lease.token])

    async def take_slot(self, key: str, interval_ms: int) -> bool:
        """Whether a paced action may happen now: at most once per interval, on any replica."""
        if interval_ms <= 0:
            return True
        return bool(await self._redis.set(key, "1", nx=True, px=interval_ms))
