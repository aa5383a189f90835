"""A channel's send queue, filled by the commit script, read by its sender. A post is marked in
flight before Slack is called and cleared when recorded: whoever finds a mark looks the post up
before sending again."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis

from bot.domain.incident.incidents import Incident
from bot.domain.message import Rendered
from bot.storage import incident_store
from bot.storage.connection import wait_bell
from bot.storage.due_set import DueSet
from bot.storage.incident_store import Loaded, ThreadRef
from bot.storage.keys import BAND, Keys, Records, claim_once, dumped, loaded
from bot.storage.leases import Fence, FencedScript

UNDELIVERABLE_MAXLEN = 1000
NOTICE_KEEP_S = 7 * 86_400  # a notice Slack could not take for a week is not news any more
NOTICE_CLAIM_S = 3 * 86_400


@dataclass(frozen=True)
class InFlight:
    """A post the sender started."""

    member: str
    item: str
    since: float

    @classmethod
    def decode(cls, raw: str | None) -> InFlight | None:
        if not raw:
            return None
        # By name: a mark a later release writes with more in it still reads here.
        data = json.loads(raw)
        return cls(str(data["member"]), str(data["item"]), float(data["since"]))


@dataclass(frozen=True)
class HeadReply:
    item: str
    rendered: Rendered
    thread: ThreadRef | None
    uid: str
    edit_ts: str = ""  # the reply it edits in place (a quiet status: the latest status reply)
    extra: dict[str, Any] | None = None
    ts_as: str = ""  # where its ts is recorded once posted, for a later reply to edit

    @property
    def kind(self) -> str:
        return self.item.partition(":")[0]


class SendQueue(Records):
    def __init__(
        self,
        redis: Redis,
        prefix: str,
        *,
        retention_s: int,
        bells: Redis | None = None,
        fence: Fence | None = None,
    ) -> None:
        super().__init__(redis, Keys(prefix))
        # Idle senders block on a client of their own, so the main pool stays free for commands.
        self._bells = bells or redis
        self.retention_s = retention_s
        self._begin = FencedScript(redis, "begin_send", fence)

    async def channels(self) -> list[str]:
        return cast(list[str], await self._redis.smembers(self.keys.send_channels))  # type: ignore[misc]

    async def waiting(self, channel: str) -> int:
        return cast(int, await self._redis.zcard(self.keys.posts(channel)))

    async def next_post(self, channel: str) -> tuple[str | None, InFlight | None]:
        """The most urgent member of the channel's posts, and its in-flight mark if any."""
        k = self.keys
        found = await self._run("next_post", [k.posts(channel), k.in_flight(channel)], [])
        return (found[0], InFlight.decode(found[1])) if found else (None, None)

    async def in_flight(self, channel: str, member: str) -> InFlight | None:
        marker = await self._redis.hget(self.keys.in_flight(channel), member)  # type: ignore[misc]
        return InFlight.decode(marker)

    async def head_item(self, incident_id: str) -> str:
        return cast(str | None, await self._redis.lindex(self.keys.outbox(incident_id), 0)) or ""  # type: ignore[misc]

    async def head_reply(self, incident_id: str, *, in_flight: str = "") -> HeadReply | None:
        """The thread's next reply; a status waits behind the replies queued after it, but not
        the one `in_flight` (it may have been posted)."""
        k = self.keys
        keys = [k.outbox(incident_id), k.outbox_items(incident_id), k.incident(incident_id)]
        item, payload, thread, uid, edit_ts = await self._run("head_reply", keys, [in_flight])
        if not item:
            return None
        data = json.loads(payload) if payload else {"text": "", "blocks": []}
        ref = loaded(ThreadRef, thread)
        status = item.partition(":")[0] in incident_store.STATUS_KINDS
        ts_as = data.get("ts_as") or (incident_store.STATUS_TS if status else "")
        rendered = Rendered(data["text"], data["blocks"])
        return HeadReply(item, rendered, ref, uid or "", edit_ts or "", data.get("extra"), ts_as)

    async def ensure_root_queued(self, channel: str, incident_id: str) -> None:
        """Queue the root of a thread with replies waiting, ahead of them."""
        seq = await self._redis.incr(self.keys.send_seq)
        await self._redis.zadd(self.keys.posts(channel), {f"root:{incident_id}": seq}, nx=True)

    async def begin(self, channel: str, marker: InFlight) -> None:
        """Mark a post in flight; `Deposed` when this replica no longer leads."""
        await self._begin(
            keys=[self.keys.in_flight(channel)],
            args=[dumped(marker), self.retention_s * 1000, marker.member],
        )

    async def end_attempt(self, channel: str, marker: InFlight) -> None:
        """Clear this very mark of an attempt Slack certainly did not act on (a 429)."""
        keys, args = [self.keys.in_flight(channel)], [marker.member, dumped(marker)]
        await self._run("end_attempt", keys, args)

    async def record_root(
        self,
        incident: Incident,
        ts: str,
        digest: str,
        *,
        version: int,
        edit_differs: bool,
        edit_after_ms: int,
    ) -> None:
        k, channel = self.keys, incident.channel
        per_channel = (k.posts, k.in_flight, k.edits, k.edit_after, k.edits_bell)
        keys = [k.incident(incident.id), k.message(channel, ts), *(f(channel) for f in per_channel)]
        thread = dumped(ThreadRef(channel, ts))
        ttl_ms = self.retention_s * 1000
        args = [incident.id, thread, digest, edit_after_ms, ttl_ms, version, int(edit_differs)]
        await self._run("record_root", keys, args)

    async def record_reply(
        self,
        channel: str,
        incident_id: str,
        item: str,
        *,
        ts: str = "",
        ts_as: str = incident_store.STATUS_TS,
    ) -> None:
        """`item` posted (or never to be); `ts`: where, recorded as `ts_as` for a later edit."""
        k = self.keys
        keys = [k.outbox(incident_id), k.outbox_items(incident_id), k.posts(channel)]
        keys += [k.in_flight(channel), k.incident(incident_id)]
        await self._run("record_reply", keys, [incident_id, item, ts, ts_as])

    async def forget(self, channel: str, *members: str, delete: tuple[str, ...] = ()) -> None:
        """Take members off the queue and their marks (and delete the keys `delete`)."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.zrem(self.keys.posts(channel), *members)
            pipe.hdel(self.keys.in_flight(channel), *members)
            if delete:
                pipe.delete(*delete)
            await pipe.execute()

    async def drop_thread(self, channel: str, incident_id: str) -> None:
        """The root can never be posted: its replies have nowhere to go either."""
        members = (f"root:{incident_id}", f"replies:{incident_id}")
        outbox = (self.keys.outbox(incident_id), self.keys.outbox_items(incident_id))
        await self.forget(channel, *members, delete=outbox)

    async def undeliverable(self, incident_id: str, item: str, error: str) -> None:
        key = self.keys.undeliverable
        fields: dict[Any, Any] = {"incident": incident_id, "item": item, "error": error}
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.xadd(key, fields, maxlen=UNDELIVERABLE_MAXLEN, approximate=True)
            pipe.expire(key, self.retention_s)
            await pipe.execute()

    async def wait_bell(self, bell: str, timeout: float) -> None:  # noqa: ASYNC109
        await wait_bell(self._bells, bell, timeout)

    def root_edits(self, channel: str) -> DueSet:
        return DueSet(self._redis, self.keys.edits(channel), keep_s=self.retention_s)

    async def edit_candidate(self, channel: str, incident_id: str) -> tuple[Loaded, int]:
        """The incident as it is now, and when its root may next be edited (ms)."""
        k = self.keys
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hmget(k.incident(incident_id), incident_store.LOADED_FIELDS)
            pipe.hget(k.edit_after(channel), incident_id)
            raw, after = await pipe.execute()
        return incident_store.loaded_from(raw), int(after or 0)

    async def record_edit(
        self,
        channel: str,
        incident_id: str,
        *,
        version: int,
        digest: str,
        next_at_ms: int,
        edited: bool,
    ) -> None:
        k = self.keys
        keys = [k.incident(incident_id), k.edits(channel), k.edit_after(channel)]
        args = [incident_id, version, digest, next_at_ms, int(edited), self.retention_s * 1000]
        await self._run("record_edit", keys, args)


class NoticeStore(Records):
    """One-off channel messages of no incident (the weekly report), queued as `notice:<uid>`
    members of the channel's posts, so the sender posts them like any post, once."""

    async def claim(self, what: str) -> bool:
        """Whether this is the first claim of `what` (a report's week, whichever leader fires)."""
        return await claim_once(self._redis, self.keys.notice_claim(what), NOTICE_CLAIM_S * 1000)

    async def queue(self, channel: str, rendered: Rendered) -> str:
        uid = secrets.token_hex(6)
        k = self.keys
        payload = dumped(rendered)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(k.notice(uid), payload, ex=NOTICE_KEEP_S)
            pipe.incr(k.send_seq)
            _, seq = await pipe.execute()
        async with self._redis.pipeline(transaction=True) as pipe:
            # Past the roots (the storm rule counts those), beside the incidents' event replies.
            pipe.zadd(k.posts(channel), {f"notice:{uid}": incident_store.BAND_EVENT * BAND + seq})
            pipe.lpush(k.posts_bell(channel), "1")
            pipe.ltrim(k.posts_bell(channel), 0, 0)
            pipe.expire(k.posts_bell(channel), 10)
            await pipe.execute()
        return uid

    async def get(self, uid: str) -> Rendered | None:
        return loaded(Rendered, await self._redis.get(self.keys.notice(uid)))

    async def done(self, channel: str, uid: str) -> None:
        """Posted (or never postable): it leaves the queue, its mark and Redis."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.notice(uid))
            pipe.zrem(self.keys.posts(channel), f"notice:{uid}")
            pipe.hdel(self.keys.in_flight(channel), f"notice:{uid}")
            await pipe.execute()
