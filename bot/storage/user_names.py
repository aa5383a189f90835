"""Slack users' display names, kept a day for every replica.

Timelines, summaries and click answers name people; asking `users.info` each time would spend a
Slack call on every click, and a name that changes shows the new one within a day.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from bot.storage.keys import Keys

KEEP_S = 86_400


class UserNames:
    def __init__(self, redis: Redis, keys: Keys, *, keep_s: int = KEEP_S) -> None:
        self._redis = redis
        self._keys = keys
        self._keep_s = keep_s

    async def get(self, user: str) -> str | None:
        """The name kept for `user` ("" when Slack knew none), None when none is kept."""
        return cast(str | None, await self._redis.get(self._keys.user(user)))

    async def put(self, user: str, name: str) -> None:
        """Keep `name` ("" for a user Slack knows no name of, so it is not asked again)."""
        await self._redis.set(self._keys.user(user), name, ex=self._keep_s)
