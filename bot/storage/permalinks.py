"""Links to messages (`chat.getPermalink`), kept for every replica: a message's permalink never
changes, and the App Home links every open incident's thread each time it is published, so each
is asked of Slack once. A message Slack has no link for (deleted, a channel the app left) is
remembered as "" for an hour, so it is not asked again every round."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from bot.storage.keys import Keys

UNKNOWN_KEEP_S = 3600


class Permalinks:
    def __init__(self, redis: Redis, keys: Keys, *, keep_s: int) -> None:
        self._redis = redis
        self._keys = keys
        self._keep_s = keep_s

    async def get_many(self, messages: Sequence[tuple[str, str]]) -> list[str | None]:
        """The link kept for each (channel, ts): a URL, "" when Slack had none, None if unasked."""
        if not messages:
            return []
        raws = await self._redis.mget([self._keys.permalink(c, ts) for c, ts in messages])
        return [None if raw is None else str(raw) for raw in raws]

    async def put(self, channel: str, ts: str, url: str) -> None:
        """Keep `url` ("" for a message Slack gave no link for, kept only an hour)."""
        keep = self._keep_s if url else UNKNOWN_KEEP_S
        await self._redis.set(self._keys.permalink(channel, ts), url, ex=keep)
