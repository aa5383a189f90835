"""How the trend chart reaches Slack: drawn by Slack from a block, or uploaded as a picture.

`CHART_STYLE=native` (the default) puts a `data_visualization` block in the status replies and the
summary: edited in place with them, no upload and no `files:write`. A workspace that refuses the
block answers `invalid_blocks`; the sender then marks it here, for every replica, and from then
on the block is left out and the tick uploads the picture (with every Nth status and the
summary), as `CHART_STYLE=image` always does. The mark lasts a day, so a workspace that starts
taking the block gets it back without a restart, at the cost of one refused post a day.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis

from bot.domain.message import ChartStyle
from bot.storage.keys import Keys
from bot.storage.leases import Leases

log = logging.getLogger(__name__)

REFUSAL_TTL_S = 86_400


class ChartDelivery:
    def __init__(self, redis: Redis, keys: Keys, configured: ChartStyle) -> None:
        self._redis = redis
        self._leases = Leases(redis)
        self._key = keys.chart_blocks_refused
        self._configured = configured

    async def as_images(self) -> bool:
        """Whether charts go as uploaded pictures now (configured so, or the block refused)."""
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
