"""Members of a sorted set scored by when they are due, each claimed under a lease: a claim moves
the score to the lease's end (due again if the leader dies) and ends only while that is still the
score, so whoever rescheduled meanwhile keeps their time. Not fenced: a leader that stalled in a
backend call must not find its successor doing the same at once."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from logging import Logger
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.storage.keys import Keys, script


@dataclass(frozen=True)
class Claim:
    member: str
    token: float  # the lease's end: the member's score while the claim holds


@dataclass(eq=False)
class DueSet:
    redis: Redis
    key: str
    _: KW_ONLY
    keep_s: int | None = None  # the set's TTL, refreshed by every schedule (None: kept elsewhere)
    data_key: Callable[[str], str] | None = None
    data_ttl_s: int = 0

    def __post_init__(self) -> None:
        self._claim = script(self.redis, "due_claim")
        self._finish = script(self.redis, "due_finish")

    async def schedule(self, member: str, at: float, data: str | None = None) -> None:
        """Due at `at` (whoever holds a claim on it loses it), with its data if given."""
        async with self.redis.pipeline(transaction=True) as pipe:
            if data is not None:
                pipe.set(self._data_of(member), data, ex=self.data_ttl_s)
            pipe.zadd(self.key, {member: at})
            if self.keep_s is not None:
                pipe.expire(self.key, self.keep_s)
            await pipe.execute()

    async def due_at(self, member: str) -> float | None:
        return cast(float | None, await self.redis.zscore(self.key, member))

    async def data(self, member: str) -> str | None:
        return cast(str | None, await self.redis.get(self._data_of(member)))

    async def pending(self, now: float, *, limit: int = 100) -> list[str]:
        """The members due at `now`, unclaimed."""
        return cast(
            list[str], await self.redis.zrangebyscore(self.key, "-inf", now, start=0, num=limit)
        )

    async def next_due(self) -> float | None:
        """When the earliest member comes due (a claimed one: when its lease ends)."""
        first = await self.redis.zrange(self.key, 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    async def due(
        self, now: float, lease_s: float, *, limit: int = 100, members: list[str] | None = None
    ) -> list[Claim]:
        """Claim for `lease_s` up to `limit` members due at `now` (of `members`, when given)."""
        if members is not None and not members:
            return []  # none asked for: not "the first due ones"
        # A fraction of a second of noise keeps the token apart from a due time scheduled
        # meanwhile (a clock that stands still in a test would make them equal).
        token = now + lease_s + secrets.randbelow(1_000_000) / 1_000_000
        claimed = await self._claim(
            keys=[self.key], args=[now, repr(token), limit, *(members or ())]
        )
        return [Claim(str(member), token) for member in claimed]

    async def claim(self, member: str, now: float, lease_s: float) -> Claim | None:
        """Claim one member if it is due (long work claims each as it gets to it)."""
        claimed = await self.due(now, lease_s, limit=1, members=[member])
        return claimed[0] if claimed else None

    async def reschedule(self, claim: Claim, at: float, data: str | None = None) -> bool:
        """Due again at `at` (with its data, if given), while the claim is ours."""
        args = [repr(at), "" if self.keep_s is None else self.keep_s, data or ""]
        return await self._end(claim, [*args, self.data_ttl_s])

    async def keep(self, claim: Claim, data: str) -> bool:
        """Its data now, the claim still ours (a step kept before it is acted on)."""
        return await self.reschedule(claim, claim.token, data)

    async def done(self, claim: Claim) -> bool:
        """Not due any more (its data gone too), while the claim is ours."""
        return await self._end(claim, ["done"])

    async def remove(self, member: str) -> None:
        await self.redis.zrem(self.key, member)

    async def _end(self, claim: Claim, args: list[str | int]) -> bool:
        keys = [self.key, self._data_of(claim.member) if self.data_key else self.key]
        return bool(await self._finish(keys=keys, args=[claim.member, repr(claim.token), *args]))

    def _data_of(self, member: str) -> str:
        if self.data_key is None:
            raise TypeError(f"{self.key}: its members carry no data")
        return self.data_key(member)


async def sweep(
    due: DueSet, now: float, look: Callable[[str], Awaitable[object]], log: Logger, what: str
) -> None:
    """`look` at each member due at `now`. Never raises: a failed look is logged under `what`,
    and looked at again when its claim lapses."""
    try:
        members = await due.pending(now)
    except RedisError as exc:
        log.warning("%s: Redis unavailable: %s", what, exc)
        return
    for member in members:
        try:
            await look(member)
        except RedisError as exc:
            log.warning("%s: %s: Redis: %s; retrying", what, member, exc)
        except Exception:
            log.exception("%s: %s failed", what, member)


SCALE_REVERT_TTL_S = 90 * 86_400  # a safety net only: the sweep always ends a record it can read


def scale_revert_records(redis: Redis, keys: Keys) -> DueSet:
    """Scale-ups from Slack to put back (`bot.actions.scale_reverts`), each record its data."""
    return DueSet(
        redis, keys.scale_reverts, data_key=keys.scale_revert, data_ttl_s=SCALE_REVERT_TTL_S
    )


def put_back_follows(redis: Redis, keys: Keys) -> DueSet:
    """Put-backs whose runners are read again (`bot.actions.scale_reverts`), each its data."""
    return DueSet(
        redis, keys.put_back_follows, data_key=keys.put_back_follow, data_ttl_s=SCALE_REVERT_TTL_S
    )
