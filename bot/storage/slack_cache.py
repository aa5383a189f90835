"""What Slack told us, kept so it is asked once: users' names, messages' permalinks, and whether
the workspace takes chart blocks."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis

from bot.domain.message import ChartStyle
from bot.storage.keys import Keys
from bot.storage.leases import Leases

log = logging.getLogger(__name__)

NAME_KEEP_S = 86_400  # a name that changes shows the new one within a day
UNKNOWN_LINK_KEEP_S = 3600
REFUSAL_TTL_S = 86_400

Message = tuple[str, str]  # (channel, ts)


class UserNames:
    """Timelines, summaries and click answers name people: `users.info` is asked once a day."""

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def get(self, user: str) -> str | None:
        """The name kept for `user` ("" when Slack knew none), None when none is kept."""
        return cast(str | None, await self._redis.get(self._keys.user(user)))

    async def put(self, user: str, name: str) -> None:
        await self._redis.set(self._keys.user(user), name, ex=NAME_KEEP_S)


class PermalinkCache:
    """A message's permalink never changes; "" (none: deleted, say) is kept only an hour."""

    def __init__(self, redis: Redis, keys: Keys, *, keep_s: int) -> None:
        self._redis = redis
        self._keys = keys
        self._keep_s = keep_s

    async def kept(self, messages: Sequence[Message]) -> dict[Message, str]:
        """The links kept ("" where Slack had none); messages never asked about are left out."""
        if not messages:
            return {}
        raws = await self._redis.mget([self._keys.permalink(c, ts) for c, ts in messages])
        return {m: str(raw) for m, raw in zip(messages, raws, strict=True) if raw is not None}

    async def keep(self, channel: str, ts: str, url: str) -> None:
        keep = self._keep_s if url else UNKNOWN_LINK_KEEP_S
        await self._redis.set(self._keys.permalink(channel, ts), url, ex=keep)


class ChartDelivery:
    """A workspace that refuses the chart block (`CHART_STYLE=native`) is marked for a day, and
    meanwhile charts are uploaded as pictures, as `CHART_STYLE=image` always does."""

    def __init__(self, redis: Redis, keys: Keys, configured: ChartStyle) -> None:
        self._redis = redis
        self._leases = Leases(redis)
        self._key = keys.chart_blocks_refused
        self._configured = configured

    async def as_images(self) -> bool:
        if self._configured is ChartStyle.IMAGE:
            return True
        return bool(await self._redis.exists(self._key))

    async def refused(self, error: str) -> None:
        """Slack refused a message for its chart block: pictures from now on, everywhere."""
        if await self._leases.claim_once(self._key, REFUSAL_TTL_S * 1000, error):
            log.warning(
                "Slack refused the chart block (%s): charts are uploaded as pictures for a day "
                "(needs files:write; CHART_STYLE=image makes it permanent)",
                error,
            )
