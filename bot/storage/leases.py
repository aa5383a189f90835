"""Claims and leases: how a replica takes something for itself in Redis, written once.

- `claim_once(key, ttl)` is `SET key value NX PX ttl`: the first caller gets True and every other
  one False until the key expires. A report's week, a reading's warnings, a click.
- A `Lease` is a claim held by a random token: only the holder of the token may renew it, keep it
  a while longer under a new note (a cooldown), or release it (Lua compare-and-set), so a replica
  whose lease expired can never extend or release someone else's. The stored value is the token,
  then (when given) a note for whoever finds it taken: "<token> <what the holder is doing>".

Leases pick who works (the sender of a channel, one action on an incident, the pass over an
alert's issue); correctness of incident state never rests on them: commits are fenced by version
(`bot.storage.incident_store`), and a sender checks its lease atomically before every post
(`bot.storage.send_queue.SendQueue.begin`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from redis.asyncio import Redis

from bot.storage.scripts import script


@dataclass(frozen=True)
class Lease:
    key: str
    token: str  # the stored value: the holder's token, then its note if it has one

    @property
    def note(self) -> str:
        return self.token.partition(" ")[2]


class Leases:
    """Claim once; acquire, renew, keep and release leases. Keys are named by
    `bot.storage.keys.Keys`, because scripts check the same leases (`begin_send.lua`)."""

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._release = script(redis, "lease_release")
        self._renew = script(redis, "lease_renew")
        self._keep = script(redis, "lease_keep")

    async def claim_once(self, key: str, ttl_ms: int, value: str = "1") -> bool:
        """Whether this call claimed `key` first: True once until it expires, False meanwhile."""
        return bool(await self._redis.set(key, value, nx=True, px=max(ttl_ms, 1)))

    async def try_acquire(self, key: str, ttl_ms: int, *, note: str = "") -> Lease | None:
        """The lease of `key` for `ttl_ms`, or None while someone else holds it. `note` is what
        others are told (`holder_note`)."""
        token = secrets.token_hex(8)
        lease = Lease(key, f"{token} {note}" if note else token)
        return lease if await self.claim_once(key, ttl_ms, lease.token) else None

    async def holder_note(self, key: str) -> str | None:
        """The note of whoever holds `key` ("" when they left none); None when nobody does."""
        held = await self._redis.get(key)
        return None if held is None else str(held).partition(" ")[2]

    async def renew(self, lease: Lease, ttl_ms: int) -> bool:
        """Extend a lease we still hold; False when it expired (and may be someone else's)."""
        return bool(await self._renew(keys=[lease.key], args=[lease.token, ttl_ms]))

    async def keep(self, lease: Lease, ttl_ms: int, note: str) -> Lease | None:
        """Hold a lease we still hold `ttl_ms` longer, telling others `note` (a cooldown): the
        lease as kept, or None when it was no longer ours."""
        kept = Lease(lease.key, f"{lease.token.partition(' ')[0]} {note}")
        done = await self._keep(keys=[lease.key], args=[lease.token, max(ttl_ms, 1), kept.token])
        return kept if done else None

    async def release(self, lease: Lease) -> None:
        await self._release(keys=[lease.key], args=[lease.token])
