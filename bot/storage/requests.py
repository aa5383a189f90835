"""The Slack requests stream: what people asked in Slack, waiting until the leader performs it. A
stream of its own: 0.26 replicas read the notification stream, and would dead-letter an entry they
do not understand."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from bot.storage.consumer_group import ConsumerGroup
from bot.storage.keys import Keys

GROUP = "requests"
# A click carries the message it was made in (at most 50 blocks, each within Slack's sizes) and
# a submission its modal: well under this. A larger body is not one Slack sent.
MAX_BODY_BYTES = 256 * 1024
MAX_WORK = 100


@dataclass(frozen=True)
class Request:
    id: str
    work: str
    body: dict[str, Any] | None
    problem: str = ""  # why the entry could not be read back, when `body` is None
    fields: dict[str, str] | None = None


class RequestRefused(ValueError):
    """A body that cannot wait in the stream (too large, or not JSON)."""


class RequestStream(ConsumerGroup[Request]):
    def __init__(
        self, redis: Redis, prefix: str, *, wait_replicas: int = 0, wait_ms: int = 1000
    ) -> None:
        keys = Keys(prefix)
        super().__init__(
            redis, keys.requests, keys.request_dead_letters, GROUP, wait_replicas, wait_ms
        )

    async def append(self, work: str, body: dict[str, Any]) -> str:
        fields = request_fields(work, body)

        def add(client: Any = self._redis) -> Any:  # in `durably`'s pipeline when it waits
            return client.xadd(self.key, fields)

        return str(await self.durably(add))

    def parse(self, entry_id: str, fields: dict[str, str]) -> Request:
        return request_of(entry_id, fields)


def request_fields(work: str, body: dict[str, Any]) -> dict[str, str]:
    try:
        # ASCII: a lone surrogate (JSON may carry one) is escaped, never refused by the encoder.
        encoded = json.dumps(body, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise RequestRefused(f"not JSON ({type(exc).__name__})") from exc
    if len(encoded) > MAX_BODY_BYTES:
        raise RequestRefused(f"{len(encoded)} bytes, over {MAX_BODY_BYTES}")
    return {"work": work, "body": encoded}


def request_of(entry_id: str, fields: dict[str, str]) -> Request:
    """The request an entry holds, or one saying why it cannot be read (never raises)."""
    work, raw, body = fields.get("work", ""), fields.get("body"), None
    if not 0 < len(work) <= MAX_WORK:
        problem = "it names no work"
    elif raw is None or len(raw) > MAX_BODY_BYTES:
        problem = "no body, or one over the size limit"
    else:
        try:
            body = json.loads(raw)
            problem = "" if isinstance(body, dict) else "the body is not a JSON object"
        except (ValueError, RecursionError) as exc:
            problem = f"the body is not JSON: {exc}"
    if problem:
        return Request(entry_id, work[:MAX_WORK], None, problem=problem[:500], fields=fields)
    return Request(entry_id, work, body, fields=fields)
