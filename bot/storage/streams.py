"""The two Redis streams, each worked through by a consumer group: notifications (appended before
the webhook answers 202, acknowledged and deleted by the commit that applies them) and Slack
requests (until the leader performs them). An entry a dead consumer left pending is taken over once
idle; one that can never be done is dead-lettered with the reason."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar, cast

from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError

from bot.domain.alerting.alerts import (
    Notification,
    PayloadError,
    parse_json_body,
    parse_notification,
)
from bot.domain.alerting.delivery import Delivery, delivery_of
from bot.storage.keys import Keys, script

DEAD_LETTER_MAXLEN = 10_000
_IDLE_FOREVER_MS = 2**31
INTAKE_GROUP = "intake"
REQUESTS_GROUP = "requests"
# Bodies up to this size wait in the stream as they came; larger ones as their (capped) facts,
# so a backlog of big bodies costs Redis no more memory than one of facts.
NOTIFICATION_KEPT_BYTES = 16 * 1024
# A click carries its message (at most 50 blocks), a submission its modal: well under this.
REQUEST_MAX_BYTES = 256 * 1024
MAX_WORK = 100


@dataclass(frozen=True)
class StreamEntry:
    id: str
    delivery: Delivery | None
    problem: str = ""  # why `delivery` could not be read back, when it is None
    fields: dict[str, str] | None = None


@dataclass(frozen=True)
class Request:
    id: str
    work: str
    body: dict[str, Any] | None
    problem: str = ""  # why the entry could not be read back, when `body` is None
    fields: dict[str, str] | None = None


E = TypeVar("E", StreamEntry, Request)


class NotReplicated(RedisError):
    """No replica confirmed the entry in time (a failover could lose it): not acknowledged."""


class ConsumerGroup(Generic[E]):
    # The stream's key and its dead letters' (`Keys`' attributes), and its group's name.
    names: tuple[str, str, str]

    def __init__(
        self, redis: Redis, prefix: str, *, wait_replicas: int = 0, wait_ms: int = 1000
    ) -> None:
        self._redis = redis
        keys, (key, dead_key, self.group) = Keys(prefix), self.names
        self.key, self.dead_key = getattr(keys, key), getattr(keys, dead_key)
        self._cursor = "0-0"
        self._wait_replicas = wait_replicas
        self._wait_ms = wait_ms

    def parse(self, entry_id: str, fields: dict[str, str]) -> E:
        raise NotImplementedError

    async def durably(self, call: Callable[..., Awaitable[Any]]) -> Any:
        """What `call()` answers, once `wait_replicas` confirmed it (a `WAIT` in its round trip)."""
        if not self._wait_replicas:
            return await call()
        async with self._redis.pipeline(transaction=False) as pipe:
            await call(client=pipe)
            pipe.execute_command("WAIT", self._wait_replicas, self._wait_ms)
            result, acked = await pipe.execute()
        if int(acked) < self._wait_replicas:
            # With fewer replicas connected than asked for (one is down), refusing would turn a
            # degraded set-up into an outage: the write is as safe as the set-up allows.
            info = await self._redis.info("replication")
            if int(info.get("connected_slaves", 0)) >= self._wait_replicas:
                raise NotReplicated(f"{acked} of {self._wait_replicas} replicas confirmed {result}")
        return result

    async def ensure_group(self) -> None:
        try:
            await self._redis.xgroup_create(self.key, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _regrouped(self, command: Awaitable[Any]) -> Any:
        """What `command` answers; None once the group Redis lost is made again."""
        try:
            return await command
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            await self.ensure_group()
            return None

    async def read(
        self, consumer: str, *, count: int = 10, block_ms: int = 1000, own: bool = False
    ) -> list[E]:
        """New entries, or (`own`) this consumer's unacknowledged ones, from when it led before."""
        block = None if own else block_ms
        read = self._redis.xreadgroup(
            self.group, consumer, {self.key: "0" if own else ">"}, count=count, block=block
        )
        return self._parsed(
            pair for _, entries in await self._regrouped(read) or [] for pair in entries
        )

    async def reclaim(self, consumer: str, *, min_idle_ms: int, count: int = 20) -> list[E]:
        """Entries left idle for `min_idle_ms`, from where the last call stopped, so a long
        backlog is walked through, not re-scanned."""
        reply = await self._regrouped(
            self._redis.xautoclaim(
                self.key, self.group, consumer, min_idle_ms, start_id=self._cursor, count=count
            )
        )
        self._cursor = str((reply and reply[0]) or "0-0")
        return self._parsed(reply[1] if reply else [])

    def _parsed(self, entries: Iterable[tuple[str, dict[str, str]]]) -> list[E]:
        # An entry deleted while pending has no fields left.
        return [self.parse(entry_id, fields) for entry_id, fields in entries if fields]

    async def keep_alive(self, consumer: str, entry_ids: list[str], *, idle: int = 0) -> None:
        """Reset the idle time of entries still worked on, so a slow handler is not taken over
        (`hand_back`: idle for ages, so the next reclaim takes them)."""
        if entry_ids:
            await self._redis.xclaim(
                self.key, self.group, consumer, 0, entry_ids, idle=idle or None, justid=True
            )

    async def hand_back(self, consumer: str, entry_ids: list[str]) -> None:
        await self.keep_alive(consumer, entry_ids, idle=_IDLE_FOREVER_MS)

    async def deliveries(self, entry_id: str) -> int:
        pending = await self._redis.xpending_range(
            self.key, self.group, min=entry_id, max=entry_id, count=1
        )
        return int(pending[0]["times_delivered"]) if pending else 0

    async def ack(self, *entry_ids: str, dead: dict[Any, Any] | None = None) -> None:
        """Done with the entries, `dead` added to the dead letters if given; deleted, so the
        stream is as long as the backlog."""
        async with self._redis.pipeline(transaction=True) as pipe:
            if dead is not None:
                pipe.xadd(self.dead_key, dead, maxlen=DEAD_LETTER_MAXLEN, approximate=True)
            pipe.xack(self.key, self.group, *entry_ids)
            pipe.xdel(self.key, *entry_ids)
            await pipe.execute()

    async def bury(self, entry: E, reason: str) -> None:
        await self.ack(entry.id, dead={"id": entry.id, "reason": reason, **(entry.fields or {})})

    async def backlog(self) -> int:
        return cast(int, await self._redis.xlen(self.key))

    async def prune_consumers(self, own: str, *, idle_ms: int) -> int:
        """Remove dead replicas' consumers with nothing pending."""
        try:
            consumers = await self._redis.xinfo_consumers(self.key, self.group)
        except ResponseError:
            return 0
        removed = 0
        for consumer in consumers:
            name = str(consumer.get("name"))
            idle, pending = int(consumer.get("idle", 0)), int(consumer.get("pending", 0))
            if name != own and pending == 0 and idle > idle_ms:
                await self._redis.xgroup_delconsumer(self.key, self.group, name)
                removed += 1
        return removed


class NotificationStream(ConsumerGroup[StreamEntry]):
    names = ("stream", "dead_letters", INTAKE_GROUP)

    def __init__(
        self, redis: Redis, prefix: str, *, wait_replicas: int = 0, wait_ms: int = 1000
    ) -> None:
        super().__init__(redis, prefix, wait_replicas=wait_replicas, wait_ms=wait_ms)
        self._waiting: list[tuple[dict[Any, Any], asyncio.Future[str]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._append = script(redis, "append")

    async def append(self, notification: Notification, body: bytes, received_at: float) -> str:
        """The entry ID once Redis (and `wait_replicas`) has it. Appends arriving together go in
        one script call (2,833 accepted/s, not 2,301)."""
        fields: dict[str, Any] = {"at": repr(received_at)}
        if len(body) <= NOTIFICATION_KEPT_BYTES:
            fields.update(source=notification.source, body=body)
        else:
            fields["d"] = delivery_of(notification).model_dump_json()
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.append((fields, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="stream-append")
        return await future

    async def _flush(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            args: list[Any] = []
            for fields, _ in batch:
                args += [len(fields), *(x for pair in fields.items() for x in pair)]
            try:
                added = await self.durably(partial(self._append, keys=[self.key], args=args))
            except Exception as exc:  # each waiting webhook answers for itself (a 503)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            except BaseException:  # cancelled (shutting down): no caller is left hanging
                for _, future in [*batch, *self._waiting]:
                    future.cancel()
                raise
            for (_, future), entry_id in zip(batch, added, strict=True):
                if not future.done():  # its request may have gone (the client hung up)
                    future.set_result(str(entry_id))

    def parse(self, entry_id: str, fields: dict[str, str]) -> StreamEntry:
        try:
            if "d" in fields:
                delivery = Delivery.model_validate_json(fields["d"])
            else:
                delivery = _delivery(fields.get("source", ""), fields.get("body", ""))
        except (PayloadError, ValidationError, ValueError) as exc:
            return StreamEntry(entry_id, None, problem=str(exc)[:500], fields=fields)
        return StreamEntry(entry_id, delivery, fields=fields)


_RECENT: OrderedDict[bytes, Delivery] = OrderedDict()
RECENT = 256


def _delivery(source: str, body: str) -> Delivery:
    """A body repeated (an HA pair, a retry, a flood) is worked out once and its entries share a
    delivery the consumer folds as repeats; kept by digest, so memory holds deliveries only."""
    key = hashlib.blake2b(f"{source}\0{body}".encode(), digest_size=16).digest()
    if (known := _RECENT.get(key)) is not None:
        _RECENT.move_to_end(key)
        return known
    if source not in ("grafana", "alertmanager"):
        raise PayloadError(f"unknown source {source!r}")
    delivery = delivery_of(parse_notification(source, parse_json_body(body.encode())))
    _RECENT[key] = delivery
    if len(_RECENT) > RECENT:
        _RECENT.popitem(last=False)
    return delivery


class RequestRefused(ValueError):
    """A body that cannot wait in the stream (too large, or not JSON)."""


class RequestStream(ConsumerGroup[Request]):
    names = ("requests", "request_dead_letters", REQUESTS_GROUP)

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
    if len(encoded) > REQUEST_MAX_BYTES:
        raise RequestRefused(f"{len(encoded)} bytes, over {REQUEST_MAX_BYTES}")
    return {"work": work, "body": encoded}


def request_of(entry_id: str, fields: dict[str, str]) -> Request:
    """The request an entry holds, or one saying why it cannot be read (never raises)."""
    work, raw, body = fields.get("work", ""), fields.get("body"), None
    if not 0 < len(work) <= MAX_WORK:
        problem = "it names no work"
    elif raw is None or len(raw) > REQUEST_MAX_BYTES:
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
