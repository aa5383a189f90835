"""Claims and leases. A `Lease` is held by a random token, then an optional note for whoever finds
it taken; only its holder may renew, keep or release it, so an expired holder never touches the
next."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from redis.asyncio import Redis

from bot.storage.scripts import script


@dataclass(frozen=True)
class Lease:
    key: str
    token: str  # the stored value: the holder's token, then its note if it has one


class Leases:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._release = script(redis, "lease_release")
        self._renew = script(redis, "lease_renew")
        self._keep = script(redis, "lease_keep")

    async def claim_once(self, key: str, ttl_ms: int, value: str = "1") -> bool:
        return bool(await self._redis.set(key, value, nx=True, px=max(ttl_ms, 1)))

    async def try_acquire(self, key: str, ttl_ms: int, *, note: str = "") -> Lease | None:
        token = secrets.token_hex(8)
        lease = Lease(key, f"{token} {note}" if note else token)
        return lease if await self.claim_once(key, ttl_ms, lease.token) else None

    async def holder_note(self, key: str) -> str | None:
        """The note of whoever holds `key` ("" when they left none); None when nobody does."""
        held = await self._redis.get(key)
        return None if held is None else str(held).partition(" ")[2]

    async def renew(self, lease: Lease, ttl_ms: int) -> bool:
        return bool(await self._renew(keys=[lease.key], args=[lease.token, ttl_ms]))

    async def keep(self, lease: Lease, ttl_ms: int, note: str) -> Lease | None:
        """Hold a lease still ours `ttl_ms` longer under a new note (a cooldown), else None."""
        kept = Lease(lease.key, f"{lease.token.partition(' ')[0]} {note}")
        done = await self._keep(keys=[lease.key], args=[lease.token, max(ttl_ms, 1), kept.token])
        return kept if done else None

    async def release(self, lease: Lease) -> None:
        await self._release(keys=[lease.key], args=[lease.token])
