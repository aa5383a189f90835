"""One-off channel messages that are not an incident's (the weekly capacity report), queued as a
`notice:<uid>` member of the channel's posts, so the sender posts it like any post, once.
"""

from __future__ import annotations

import json
import secrets

from redis.asyncio import Redis

from bot.domain.message import Rendered
from bot.storage.incident_store import BAND_EVENT
from bot.storage.keys import Keys
from bot.storage.leases import Leases
from bot.storage.scripts import BAND

KEEP_S = 7 * 86_400  # a notice Slack could not take for a week is not news any more
CLAIM_S = 3 * 86_400


class NoticeStore:
    def __init__(self, redis: Redis, keys: Keys) -> None:
        self._redis = redis
        self._leases = Leases(redis)
        self.keys = keys

    async def claim(self, what: str) -> bool:
        """Whether this is the first claim of `what` (a report's week), also beside 0.25."""
        return await self._leases.claim_once(self.keys.notice_claim(what), CLAIM_S * 1000)

    async def queue(self, channel: str, rendered: Rendered) -> str:
        uid = secrets.token_hex(6)
        k = self.keys
        payload = json.dumps({"text": rendered.text, "blocks": rendered.blocks})
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(k.notice(uid), payload, ex=KEEP_S)
            pipe.incr(k.send_seq)
            _, seq = await pipe.execute()
        async with self._redis.pipeline(transaction=True) as pipe:
            # Past the roots (the storm rule counts those), beside the incidents' event replies.
            pipe.zadd(k.posts(channel), {f"notice:{uid}": BAND_EVENT * BAND + seq})
            pipe.lpush(k.posts_bell(channel), "1")
            pipe.ltrim(k.posts_bell(channel), 0, 0)
            pipe.expire(k.posts_bell(channel), 10)
            await pipe.execute()
        return uid

    async def get(self, uid: str) -> Rendered | None:
        raw = await self._redis.get(self.keys.notice(uid))
        if not raw:
            return None
        data = json.loads(raw)
        return Rendered(str(data["text"]), list(data["blocks"]))

    async def done(self, channel: str, uid: str) -> None:
        """Posted (or never postable): it leaves the queue, its mark and Redis."""
        member = f"notice:{uid}"
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(self.keys.notice(uid))
            pipe.zrem(self.keys.posts(channel), member)
            pipe.hdel(self.keys.in_flight(channel), member)
            await pipe.execute()
