"""Each incident's GitHub issue as linked, and what it was told: one JSON value per incident,
kept as long as the incident (`retention_s`).

Written only by the replica holding the incident's claim in `issue_due`
(`bot.status.alert_issue`), after each call GitHub answered, so a replica that dies mid-way
leaves the progress of every call but the one in flight, which the link names (`trying`).
"""

from __future__ import annotations

from redis.asyncio import Redis

from bot.domain.alert_issue import IssueLink
from bot.storage.keys import Keys


class IssueLinks:
    def __init__(self, redis: Redis, keys: Keys, *, retention_s: int) -> None:
        self._redis = redis
        self._keys = keys
        self._retention_s = retention_s

    async def get(self, incident_id: str) -> IssueLink | None:
        raw = await self._redis.get(self._keys.issue_link(incident_id))
        return IssueLink.model_validate_json(raw) if raw else None

    async def save(self, incident_id: str, link: IssueLink) -> None:
        await self._redis.set(
            self._keys.issue_link(incident_id), link.model_dump_json(), ex=self._retention_s
        )
