"""The App Home's viewers and what each one's Home shows, so a round publishes only what changed,
once: whoever claims (viewer, digest) first."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import cast

from redis.asyncio import Redis

from bot.storage.keys import Keys, Records
from bot.storage.leases import Lease, Leases

# A bound on the viewers kept, the most recent first: a round reads them all.
MAX_VIEWERS = 5000


@dataclass(frozen=True)
class Shown:
    """What one viewer's Home shows: its digests, when published, and Slack's hash of it."""

    state: str
    numbers: str
    at: float
    hash: str = ""

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, raw: str | None) -> Shown | None:
        try:
            return cls(**json.loads(raw or ""))
        except (ValueError, TypeError):
            return None


class HomeViewers(Records):
    keep_s = 86_400

    def __init__(self, redis: Redis, keys: Keys) -> None:
        super().__init__(redis, keys)
        self._leases = Leases(redis)

    async def opened(self, user: str, at: float) -> None:
        """`user` opened the Home at `at`; viewers not seen for `keep_s`, and those past the
        MAX_VIEWERS most recent, are forgotten."""
        k = self.keys
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zadd(k.home_viewers, {user: at})
            pipe.zrangebyscore(k.home_viewers, "-inf", at - self.keep_s)
            pipe.zrange(k.home_viewers, 0, -MAX_VIEWERS - 1)
            _, stale, crowded = await pipe.execute()
        gone = list(dict.fromkeys([*stale, *crowded]))
        async with self._redis.pipeline(transaction=False) as pipe:
            if gone:
                pipe.zrem(k.home_viewers, *gone)
                pipe.hdel(k.home_shown, *gone)
            pipe.expire(k.home_viewers, self.keep_s)
            pipe.expire(k.home_shown, self.keep_s)
            await pipe.execute()

    async def since(self, at: float) -> list[str]:
        found = await self._redis.zrevrangebyscore(self.keys.home_viewers, "+inf", at)
        return cast(list[str], found)

    async def shown(self, users: Sequence[str]) -> dict[str, Shown]:
        if not users:
            return {}
        raws = await self._redis.hmget(self.keys.home_shown, list(users))  # type: ignore[misc]
        found = {user: Shown.load(raw) for user, raw in zip(users, raws, strict=True)}
        return {user: shown for user, shown in found.items() if shown is not None}

    async def record(self, user: str, shown: Shown) -> None:
        await self._redis.hset(self.keys.home_shown, user, shown.dump())  # type: ignore[misc]

    async def unknown(self, user: str) -> None:
        """Slack said the hash of `user`'s Home moved on: what it shows is not known any more."""
        await self._redis.hdel(self.keys.home_shown, user)  # type: ignore[misc]

    async def forget(self, user: str) -> None:
        """Publish nothing more to `user` until they open the Home again."""
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zrem(self.keys.home_viewers, user)
            pipe.hdel(self.keys.home_shown, user)
            await pipe.execute()

    async def claim(self, user: str, digest: str, ttl_ms: int) -> Lease | None:
        """The claim to publish `digest` to `user`, None when another replica has it."""
        return await self._leases.try_acquire(self.keys.home_claim(user, digest), ttl_ms)

    async def release(self, claim: Lease) -> None:
        await self._leases.release(claim)
