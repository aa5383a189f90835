"""Links to messages (`chat.getPermalink`), kept for every replica: a message's permalink never
changes, so each is asked of Slack once (`bot.outbound.permalinks` asks). A message Slack has no
link for (deleted, a channel the app left) is remembered as "" for an hour, so it is not asked
again at every look."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis

from bot.storage.keys import Keys

UNKNOWN_KEEP_S = 3600

Message = tuple[str, str]  # (channel, ts)


class PermalinkCache:
    def __init__(self, redis: Redis, keys: Keys, *, keep_s: int) -> None:
        self._redis = redis
        self._keys = keys
        self._keep_s = keep_s

    async def kept(self, messages: Sequence[Message]) -> dict[Message, str]:
        """The links kept of `messages`: a URL, or "" where Slack had none; those never asked
        are left out."""
        if not messages:
            return {}
        raws = await self._redis.mget([self._keys.permalink(c, ts) for c, ts in messages])
        return {m: str(raw) for m, raw in zip(messages, raws, strict=True) if raw is not None}

    async def keep(self, channel: str, ts: str, url: str) -> None:
        """Keep `url` ("" for a message Slack gave no link for, kept only an hour)."""
        keep = self._keep_s if url else UNKNOWN_KEEP_S
        await self._redis.set(self._keys.permalink(channel, ts), url, ex=keep)
