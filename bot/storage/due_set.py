"""A due set: work that comes due at a time, claimed under a lease as it is done.

Members of a Redis sorted set are scored by when they are due. The leader's tick claims a due
member by moving its score to the end of a lease, atomically (`lua/due_claim.lua`): it is not due
while worked on, and if the leader dies mid-way the lease runs out and the member comes due again
for the next. The lease's end is the claim's token: the claim is ended (`done`, `reschedule`)
only while the score is still that token (`lua/due_finish.lua`), so whoever scheduled the member
meanwhile (another of the leader's tasks: a new scale-up, a commit that set the next status)
keeps their due time. The claim also stays for replicas of 0.25 during a rollout, which claim
the same sets: without it the two would both post a status, or put a scale-up back, twice.

A member may carry data under a key of its own (a scale-up's record): written with its due time
and dropped with it, in the same script. The status schedule, the silence watch and the scale
reverts are each one of these.

A set with one reader needs no claims: a channel's root edits are read only by the channel's
sender, whose lease makes its replica the one reader, through `pending`, `next_due`, `schedule`
and `remove` (the scripts that commit a change or record a post queue its edit with the rest).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from bot.storage.scripts import script


@dataclass(frozen=True)
class Claim:
    """A member taken until `token`, its lease's end (and its score while the claim holds)."""

    member: str
    token: float


class DueSet:
    def __init__(
        self,
        redis: Redis,
        key: str,
        *,
        keep_s: int | None = None,
        data_key: Callable[[str], str] | None = None,
        data_ttl_s: int = 0,
    ) -> None:
        """`keep_s`: the set's TTL, refreshed by every schedule (None: the set's TTL is someone
        else's to keep). `data_key`: where a member's data lives, if members carry any."""
        self._redis = redis
        self.key = key
        self._keep_s = keep_s
        self._data_key = data_key
        self._data_ttl_s = data_ttl_s
        self._claim = script(redis, "due_claim")
        self._finish = script(redis, "due_finish")

    async def schedule(self, member: str, at: float, data: str | None = None) -> None:
        """Due at `at` (whoever holds a claim on it loses it), with its data if given."""
        async with self._redis.pipeline(transaction=True) as pipe:
            if data is not None:
                pipe.set(self._data_of(member), data, ex=self._data_ttl_s)
            pipe.zadd(self.key, {member: at})
            if self._keep_s is not None:
                pipe.expire(self.key, self._keep_s)
            await pipe.execute()

    async def due_at(self, member: str) -> float | None:
        return cast(float | None, await self._redis.zscore(self.key, member))

    async def data(self, member: str) -> str | None:
        return cast(str | None, await self._redis.get(self._data_of(member)))

    async def pending(self, now: float, *, limit: int = 100) -> list[str]:
        """The members due at `now`, unclaimed: for a look before claiming (nothing is taken)."""
        return cast(
            list[str], await self._redis.zrangebyscore(self.key, "-inf", now, start=0, num=limit)
        )

    async def next_due(self) -> float | None:
        """When the earliest member comes due (a claimed one: when its lease ends); None when
        the set is empty. What a reader sleeps until when nothing is due yet."""
        first = await self._redis.zrange(self.key, 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    async def due(
        self, now: float, lease_s: float, *, limit: int = 100, members: list[str] | None = None
    ) -> list[Claim]:
        """Claim for `lease_s` up to `limit` members due at `now` (of `members`, when given), in
        one step: two replicas asking at once never get the same member."""
        if members is not None and not members:
            return []  # none asked for: not "the first due ones"
        # A fraction of a second of noise keeps two replicas' lease ends (the tokens) apart.
        token = now + lease_s + secrets.randbelow(1_000_000) / 1_000_000
        claimed = await self._claim(
            keys=[self.key], args=[now, repr(token), limit, *(members or ())]
        )
        return [Claim(str(member), token) for member in claimed]

    async def claim(self, member: str, now: float, lease_s: float) -> Claim | None:
        """Claim one member if it is due: work that takes long claims each as it gets to it."""
        claimed = await self.due(now, lease_s, limit=1, members=[member])
        return claimed[0] if claimed else None

    async def holds(self, claim: Claim) -> bool:
        """Whether the claim is still ours (nobody scheduled the member since)."""
        return await self.due_at(claim.member) == claim.token

    async def reschedule(self, claim: Claim, at: float, data: str | None = None) -> bool:
        """Due again at `at` (with its data, if given), while the claim is ours; whether it was."""
        args = [repr(at), "" if self._keep_s is None else self._keep_s, data or ""]
        return await self._end(claim, [*args, self._data_ttl_s])

    async def done(self, claim: Claim) -> bool:
        """Not due any more (its data gone too), while the claim is ours; whether it was."""
        return await self._end(claim, ["done"])

    async def remove(self, member: str) -> None:
        """Not due any more, whoever holds it."""
        await self._redis.zrem(self.key, member)

    async def _end(self, claim: Claim, args: list[str | int]) -> bool:
        keys = [self.key, self._data_of(claim.member) if self._data_key else self.key]
        return bool(await self._finish(keys=keys, args=[claim.member, repr(claim.token), *args]))

    def _data_of(self, member: str) -> str:
        if self._data_key is None:
            raise TypeError(f"{self.key}: its members carry no data")
        return self._data_key(member)
