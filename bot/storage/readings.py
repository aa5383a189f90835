"""The fleet's readings in Redis: the latest, the short history baselines read, and the readings
kept a month for the capacity report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from redis.asyncio import Redis

from bot.storage.keys import Keys


class ReadingStore:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def latest(self) -> str | None:
        raw = await self._redis.get(self._keys.fleet_reading)
        return str(raw) if raw else None

    async def save(self, encoded: str, *, keep_ms: int) -> None:
        await self._redis.set(self._keys.fleet_reading, encoded, px=keep_ms)

    async def remember(self, point: str, *, points: int, keep_ms: int) -> None:
        key = self._keys.fleet_history
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.lpush(key, point)
            pipe.ltrim(key, 0, points - 1)
            pipe.pexpire(key, keep_ms)
            await pipe.execute()

    async def history(self, last: int = 0) -> list[str]:
        """The history's points, newest first: all, or the `last` ones."""
        key = self._keys.fleet_history
        return list(await self._redis.lrange(key, 0, last - 1))  # type: ignore[misc]

    async def keep(self, day: str, slot: str, kept: str, *, keep_s: int) -> None:
        """Keep a reading in its slot of its day, unless one is kept there."""
        key = self._keys.readings_day(day)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(key, slot, kept)
            pipe.expire(key, keep_s)
            await pipe.execute()

    async def kept(self, days: Sequence[str]) -> list[Mapping[str, str]]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for day in days:
                pipe.hgetall(self._keys.readings_day(day))
            return list(await pipe.execute())
