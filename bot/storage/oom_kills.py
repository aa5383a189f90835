"""Runner pods' OOM kills over days, for the weekly report: written from each reading, once per
(pod, uid) (ARC recreates a failed runner's pod under its name, so the uid tells kills apart),
each with its runner type, workflow and when it was first seen. Kept `KEEP_DAYS`, at most `CAP`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.domain.fleet import KEEP_DAYS, OomKill, Pod
from bot.storage.keys import Keys
from bot.storage.scripts import script

CAP = 10_000  # up to about 5 MB (long pod and workflow names): a runner killed every 70 s all week


def field_of(pod: str, uid: str) -> str:
    return f"{pod}/{uid}"


class OomKillRecord:
    def __init__(self, redis: Redis, keys: Keys, *, cap: int = CAP) -> None:
        self._redis = redis
        self._keys = keys
        self._cap = cap
        self._record = script(redis, "record_oom_kills")

    async def record(self, kills: Sequence[OomKill], *, now: datetime) -> dict[Pod, str]:
        """Record the kills not recorded before; each kill's workflow as recorded (a kill named
        at an earlier reading keeps its name once its job is no longer listed)."""
        if not kills:
            return {}
        oldest = now - timedelta(days=KEEP_DAYS)
        args: list[str | int] = [int(now.timestamp()), int(oldest.timestamp()), self._cap]
        args.append(KEEP_DAYS * 86400)
        for kill in kills:
            args += [field_of(kill.pod, kill.uid), kill.runner_type, kill.workflow]
        keys = [self._keys.oom_kills, self._keys.oom_kills_at]
        stored = await self._record(keys=keys, args=args)
        return {
            (kill.pod, kill.uid): workflow for kill, workflow in zip(kills, stored, strict=True)
        }

    async def since(self, moment: datetime) -> list[OomKill]:
        """The kills first seen from `moment` on, oldest first."""
        fields = await self._redis.zrangebyscore(
            self._keys.oom_kills_at, int(moment.timestamp()), "+inf"
        )
        if not fields:
            return []
        kills = await self._redis.hmget(self._keys.oom_kills, fields)
        found = [_kill(field, raw) for field, raw in zip(fields, kills, strict=True)]
        return [kill for kill in found if kill is not None]


def _kill(field: str, raw: str | None) -> OomKill | None:
    try:
        data = json.loads(raw) if raw is not None else None
        pod, _, uid = field.rpartition("/")
        at = datetime.fromtimestamp(float(data["at"]), UTC)
        return OomKill(str(data["t"]), pod, uid, str(data["w"]), at)
    except (ValueError, KeyError, TypeError):
        return None
