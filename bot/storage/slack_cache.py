"""What Slack told us, kept so it is asked once: users' names, messages' permalinks, and whether
the workspace takes chart blocks."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis

from bot.domain.message import ChartStyle
from bot.storage.keys import Keys, Records, claim_once

log = logging.getLogger(__name__)

NAME_KEEP_S = 86_400  # a name that changes shows the new one within a day
UNKNOWN_LINK_KEEP_S = 3600
REFUSAL_TTL_S = 86_400

Message = tuple[str, str]  # (channel, ts)


class UserNames(Records):
    """Timelines, summaries and click answers name people: `users.info` is asked once a day."""

    async def get(self, user: str) -> str | None:
        """The name kept for `user` ("" when Slack knew none), None when none is kept."""
        return cast(str | None, await self._redis.get(self.keys.user(user)))

    async def put(self, user: str, name: str) -> None:
        await self._redis.set(self.keys.user(user), name, ex=NAME_KEEP_S)


class PermalinkCache(Records):
    """A message's permalink never changes; "" (none: deleted, say) is kept only an hour."""

    def __init__(self, redis: Redis, keys: Keys, *, keep_s: int) -> None:
        super().__init__(redis, keys)
        self._keep_s = keep_s

    async def kept(self, messages: Sequence[Message]) -> dict[Message, str]:
        """The links kept ("" where Slack had none); messages never asked about are left out."""
        if not messages:
            return {}
        raws = await self._redis.mget([self.keys.permalink(c, ts) for c, ts in messages])
        return {m: str(raw) for m, raw in zip(messages, raws, strict=True) if raw is not None}

    async def keep(self, channel: str, ts: str, url: str) -> None:
        keep = self._keep_s if url else UNKNOWN_LINK_KEEP_S
        await self._redis.set(self.keys.permalink(channel, ts), url, ex=keep)


class ChartDelivery:
    """A workspace that refuses the chart block is marked for a day: charts are uploaded as
    pictures meanwhile, as `CHART_STYLE=image` always does."""

    def __init__(self, redis: Redis, keys: Keys, configured: ChartStyle) -> None:
        self._redis = redis
        self._key = keys.chart_blocks_refused
        self._configured = configured

    async def as_images(self) -> bool:
        if self._configured is ChartStyle.IMAGE:
            return True
        return bool(await self._redis.exists(self._key))

    async def refused(self, error: str) -> None:
        """Slack refused a message for its chart block: pictures from now on, everywhere."""
        if await claim_once(self._redis, self._key, REFUSAL_TTL_S * 1000, error):
            log.warning(
                "Slack refused the chart block (%s): charts are uploaded as pictures for a day "
                "(needs files:write; CHART_STYLE=image makes it permanent)",
                error,
            )
