"""Redis leases: short-lived, token-owned keys that let one replica at a time do a piece of work.

A lease is `SET key token NX PX ttl`; only the holder of the token may release it (a Lua
compare-and-delete), so a replica whose lease expired can never release someone else's.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# Delete a key only if it still holds our token; shared with the thread claim in bot.store.
COMPARE_AND_DELETE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


class LeaseBusy(Exception):
    """Another replica holds the lease and did not let go in time; the work is retried later."""


@dataclass(frozen=True)
class Lease:
    key: str
    token: str


class Leases:
    """Acquire and release leases under one key prefix."""

    def __init__(self, redis: Redis, prefix: str) -> None:
        self._redis = redis
        self._prefix = prefix
        self._release = redis.register_script(COMPARE_AND_DELETE)
        self._renew = redis.register_script(_RENEW)

    async def try_acquire(self, name: str, ttl_ms: int) -> Lease | None:
        lease = Lease(f"{self._prefix}:lease:{name}", secrets.token_hex(8))
        acquired = await self._redis.set(lease.key, lease.token, nx=True, px=ttl_ms)
        return lease if acquired else None

    async def release(self, lease: Lease) -> None:
        await self._release(keys=[lease.key], args=[lease.token])

    @asynccontextmanager
    async def hold(
        self, name: str, *, ttl_ms: int = 10_000, wait_s: float = 10.0
    ) -> AsyncIterator[Lease]:
        """Hold `name` for the block, waiting up to `wait_s` for the current holder.

        The lease is renewed while the block runs (it may wait out a Slack `Retry-After`), so
        the TTL only bounds how long a holder that died keeps others out.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while (lease := await self.try_acquire(name, ttl_ms)) is None:
            if loop.time() >= deadline:
                raise LeaseBusy(name)
            await asyncio.sleep(0.02 + random.random() * 0.03)
        renewal = asyncio.create_task(self._keep(lease, ttl_ms))
        try:
            yield lease
        finally:
            renewal.cancel()
            with suppress(asyncio.CancelledError):
                await renewal
            await self.release(lease)

    async def _keep(self, lease: Lease, ttl_ms: int) -> None:
        while True:
            await asyncio.sleep(ttl_ms / 3000)
            with suppress(RedisError):
                if not await self._renew(keys=[lease.key], args=[lease.token, ttl_ms]):
                    # Expired under us (the loop stalled, Redis failed over): another replica
                    # may work on the same group now. The writes that matter are guarded
                    # (claims, compare-and-pop), so this is worth a warning, not a crash.
                    log.warning("lease %s expired while held", lease.key)
                    return
