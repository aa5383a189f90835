"""Redis persistence of incidents: state, group index, thread location, outbox, timeline, schedule.

Every replica reads and writes the same keys, so any replica can serve any request. Mutations of
one incident happen under its group's lease (see `bot.leases`) and are written as one `Commit`
(MULTI/EXEC); the thread claim, which must hold even without the lease, is set with NX.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from bot.incidents import Event, Incident
from bot.leases import COMPARE_AND_DELETE
from bot.mrkdwn import Rendered


@dataclass(frozen=True)
class ThreadRef:
    """Where an incident's thread lives in Slack."""

    channel: str
    ts: str


@dataclass(frozen=True)
class Commit:
    """Everything one change of an incident writes, applied in one MULTI/EXEC.

    All or nothing: a retry after a failed write finds either the old state (and redoes the
    change) or the new one with its schedule, events and replies, never half of it.
    """

    incident: Incident
    events: tuple[Event, ...] = ()
    # Thread replies decided on but not yet posted: posted by whichever replica syncs next.
    replies: tuple[Rendered, ...] = ()
    status_due: float | None = None  # schedule the next status post at this time
    stop_status: bool = False
    bind_group: bool = False  # point the incident's alert group at it


_PENDING = "pending:"
# A thread that cannot be posted (the bot is not in the channel) must not hoard status replies.
MAX_OUTBOX = 20
_POP_IF_FIRST = """
if redis.call('lindex', KEYS[1], 0) == ARGV[1] then return redis.call('lpop', KEYS[1]) end
return false
"""


class IncidentStore:
    def __init__(self, redis: Redis, prefix: str, *, retention_s: int = 30 * 86_400) -> None:
        self._redis = redis
        self._p = prefix
        self._retention_s = retention_s
        self._release_claim = redis.register_script(COMPARE_AND_DELETE)
        self._pop_if_first = redis.register_script(_POP_IF_FIRST)

    # -- incidents -------------------------------------------------------------------------

    async def next_id(self) -> str:
        """Short sequential IDs, because people type them: `/queue ack 12`."""
        return str(await self._redis.incr(f"{self._p}:incident-seq"))

    async def get(self, incident_id: str) -> Incident | None:
        raw = await self._redis.get(f"{self._p}:incident:{incident_id}")
        return Incident.model_validate_json(raw) if raw else None

    async def commit(self, change: Commit) -> None:
        incident = change.incident
        opened = incident.opened_at.timestamp()
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(f"{self._p}:incident:{incident.id}", incident.model_dump_json())
            pipe.zadd(f"{self._p}:incidents", {incident.id: opened})
            if incident.is_open and not incident.is_test:
                pipe.zadd(f"{self._p}:open", {incident.id: opened})
            else:
                pipe.zrem(f"{self._p}:open", incident.id)
            if change.bind_group:
                pipe.set(f"{self._p}:group:{incident.group_hash}", incident.id)
            if change.status_due is not None:
                pipe.zadd(f"{self._p}:status-due", {incident.id: change.status_due})
            if change.stop_status:
                pipe.zrem(f"{self._p}:status-due", incident.id)
            for event in change.events:
                pipe.rpush(f"{self._p}:timeline:{incident.id}", event.model_dump_json())
            pipe.ltrim(f"{self._p}:timeline:{incident.id}", -500, -1)
            for reply in change.replies:
                pipe.rpush(f"{self._p}:outbox:{incident.id}", _encode(reply))
            pipe.ltrim(f"{self._p}:outbox:{incident.id}", -MAX_OUTBOX, -1)
            self._retain(pipe, incident)
            await pipe.execute()

    def _retain(self, pipe: Pipeline, incident: Incident) -> None:
        """Keep an open incident; let a resolved one go `retention_s` after its last change."""
        keys = [
            f"{self._p}:{kind}:{incident.id}"
            for kind in ("incident", "timeline", "outbox", "thread", "rendered")
        ]
        for key in keys:
            if incident.is_open:
                pipe.persist(key)
            else:
                pipe.expire(key, self._retention_s)
        horizon = incident.updated_at.timestamp() - self._retention_s
        pipe.zremrangebyscore(f"{self._p}:incidents", "-inf", horizon)

    async def open_ids(self) -> list[str]:
        """Open incidents, most recently opened first."""
        return cast(list[str], await self._redis.zrevrange(f"{self._p}:open", 0, -1))

    async def recent_ids(self, limit: int = 20) -> list[str]:
        return cast(list[str], await self._redis.zrevrange(f"{self._p}:incidents", 0, limit - 1))

    # -- alert groups ----------------------------------------------------------------------

    async def incident_of_group(self, group_hash: str) -> str | None:
        return cast(str | None, await self._redis.get(f"{self._p}:group:{group_hash}"))

    # -- the Slack thread ------------------------------------------------------------------

    async def thread(self, incident_id: str) -> ThreadRef | None:
        raw = await self._redis.get(f"{self._p}:thread:{incident_id}")
        if not raw or raw.startswith(_PENDING):
            return None
        data = json.loads(raw)
        return ThreadRef(channel=data["channel"], ts=data["ts"])

    async def claim_thread(self, incident_id: str, token: str, *, ttl_ms: int) -> bool:
        """Claim the right to post the root message; only one replica ever wins it.

        The claim expires (unless replaced by the posted thread's location) so that a replica
        that died between claiming and posting does not leave the incident without a thread.
        """
        key = f"{self._p}:thread:{incident_id}"
        return bool(await self._redis.set(key, _PENDING + token, nx=True, px=ttl_ms))

    async def release_thread_claim(self, incident_id: str, token: str) -> None:
        """Give the claim back after a post that surely failed, so the next try need not wait."""
        key = f"{self._p}:thread:{incident_id}"
        await self._release_claim(keys=[key], args=[_PENDING + token])

    async def set_thread(self, incident_id: str, ref: ThreadRef) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(f"{self._p}:thread:{incident_id}", json.dumps(ref.__dict__))
            pipe.set(f"{self._p}:message:{ref.channel}:{ref.ts}", incident_id)
            await pipe.execute()

    async def incident_of_message(self, channel: str, ts: str) -> str | None:
        return cast(str | None, await self._redis.get(f"{self._p}:message:{channel}:{ts}"))

    async def take_edit_slot(self, incident_id: str, interval_ms: int) -> bool:
        """Whether the root may be edited now: at most one edit per interval, on any replica."""
        if interval_ms <= 0:
            return True
        key = f"{self._p}:edit-slot:{incident_id}"
        return bool(await self._redis.set(key, "1", nx=True, px=interval_ms))

    async def rendered_digest(self, incident_id: str) -> str | None:
        return cast(str | None, await self._redis.get(f"{self._p}:rendered:{incident_id}"))

    async def set_rendered_digest(self, incident_id: str, digest: str) -> None:
        await self._redis.set(f"{self._p}:rendered:{incident_id}", digest)

    async def mark_unsynced(self, incident_id: str) -> None:
        """Remember that Slack lags this incident's state, for the status tick to repair."""
        await self._redis.sadd(f"{self._p}:unsynced", incident_id)  # type: ignore[misc]

    async def mark_synced(self, incident_id: str) -> None:
        await self._redis.srem(f"{self._p}:unsynced", incident_id)  # type: ignore[misc]

    async def unsynced_ids(self, limit: int = 20) -> list[str]:
        return cast(list[str], await self._redis.srandmember(f"{self._p}:unsynced", limit))

    # -- outbox and timeline ---------------------------------------------------------------

    async def next_reply(self, incident_id: str) -> Rendered | None:
        raw = await self._redis.lindex(f"{self._p}:outbox:{incident_id}", 0)  # type: ignore[misc]
        if raw is None:
            return None
        data = json.loads(raw)
        return Rendered(text=data["text"], blocks=data["blocks"])

    async def pop_reply(self, incident_id: str, item: Rendered) -> None:
        """Remove `item` once posted, only if it is still first (another replica may have)."""
        await self._pop_if_first(keys=[f"{self._p}:outbox:{incident_id}"], args=[_encode(item)])

    async def events(self, incident_id: str) -> list[Event]:
        raw = await self._redis.lrange(f"{self._p}:timeline:{incident_id}", 0, -1)  # type: ignore[misc]
        return [Event.model_validate_json(item) for item in raw]

    # -- periodic status -------------------------------------------------------------------

    async def schedule_status(self, incident_id: str, due: float) -> None:
        await self._redis.zadd(f"{self._p}:status-due", {incident_id: due})

    async def unschedule_status(self, incident_id: str) -> None:
        await self._redis.zrem(f"{self._p}:status-due", incident_id)

    async def status_due_at(self, incident_id: str) -> float | None:
        return cast(float | None, await self._redis.zscore(f"{self._p}:status-due", incident_id))

    async def due_status(self, now: float, *, limit: int = 20) -> list[str]:
        key = f"{self._p}:status-due"
        return cast(
            list[str], await self._redis.zrangebyscore(key, "-inf", now, start=0, num=limit)
        )


def _encode(reply: Rendered) -> str:
    """Deterministic, so the compare-and-pop recognises a reply it read back."""
    return json.dumps({"text": reply.text, "blocks": reply.blocks}, sort_keys=True)
