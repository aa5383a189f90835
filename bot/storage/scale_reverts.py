"""Scale-ups from Slack still to be put back (`bot.actions.scale_reverts`): each one's record (JSON,
under `scale-revert:<id>`) rides along as the data of its member in the `scale-reverts` due set,
scored by when to look at it next.
"""

from __future__ import annotations

from redis.asyncio import Redis

from bot.storage.due_set import DueSet
from bot.storage.keys import Keys

RECORD_TTL_S = 90 * 86_400  # a safety net only: the sweep always ends a record it can read


def scale_revert_records(redis: Redis, keys: Keys) -> DueSet:
    """Record id -> when to look at it next, each record's JSON its data."""
    return DueSet(redis, keys.scale_reverts, data_key=keys.scale_revert, data_ttl_s=RECORD_TTL_S)
