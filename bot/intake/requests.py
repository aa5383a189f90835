"""The requests stream's consumer: performs what people asked of queuepilot in Slack.

Whichever replica Slack reached answered it at once and appended the request to the stream
(`bot.storage.requests`); here it is performed: the work the entry names (the listener's, given
by the composition root as a table) runs with the Slack body, then the entry is acknowledged and
deleted. Each entry runs in a task of its own, so a slow backend called for one incident never
holds up a click on another; at most `max_in_flight` run at once.

A consumer that dies mid-way leaves its entries pending: another takes them over once they have
been idle for `reclaim_idle_ms`, and the interaction's claim lets that attempt carry on the one
that died (`bot.storage.interactions.attempt`), while a second delivery of the same click still
acts once. Redis failing is waited out; an entry that cannot be read, names no work, fails
`max_attempts` times or was taken over more often than that is dead-lettered with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

from redis.exceptions import RedisError

from bot.backoff import Backoff
from bot.config import Settings
from bot.intake.consumer import DEAD_CONSUMER_IDLE_MS, sleep_or_stop
from bot.storage.interactions import attempt
from bot.storage.requests import Request, RequestStream

log = logging.getLogger(__name__)

# A request's work (its listener's), done with the Slack body the listener was handed.
Perform = Callable[[dict[str, Any]], Awaitable[None]]


# A crowd clicking at once waits here for its turn, not in the Redis pool for a connection.
MAX_IN_FLIGHT = 64


class Requests:
    def __init__(
        self,
        stream: RequestStream,
        works: Mapping[str, Perform],
        *,
        config: Settings,
        consumer: str,
    ) -> None:
        self._stream = stream
        self._works = works
        self._config = config
        self._consumer = consumer  # this process's name in the stream's group
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._stop = asyncio.Event()
        self._take_over_ms: int | None = None
        # Entries under way are kept alive well within the idle time that lets others take over.
        self._upkeep_s = min(config.intake_reclaim_idle_ms / 3000, 5.0)

    async def run(self, stop: asyncio.Event, *, take_over_ms: int | None = None) -> None:
        """Perform requests until `stop` is set, riding out Redis outages with a capped backoff.

        A new leader first takes over what its predecessor left pending once it has been idle
        `take_over_ms` (about a lease's TTL: the predecessor is gone)."""
        self._stop = stop
        self._take_over_ms = take_over_ms
        loop = asyncio.get_running_loop()
        backoff, next_upkeep, next_prune = Backoff(1.0, first=0.05), 0.0, 0.0
        try:
            while not stop.is_set():
                try:
                    if loop.time() >= next_upkeep:
                        await self._upkeep()
                        next_upkeep = loop.time() + self._upkeep_s
                    if loop.time() >= next_prune:
                        next_prune = loop.time() + 60
                        await self._stream.prune_consumers(
                            self._consumer, idle_ms=DEAD_CONSUMER_IDLE_MS
                        )
                    await self._read_more()
                    backoff.reset()
                except RedisError as exc:
                    wait = backoff.next()
                    log.warning("requests: Redis unavailable (%s); retrying in %.2fs", exc, wait)
                    await sleep_or_stop(stop, wait)
                    next_upkeep = 0.0
        finally:
            await self._finish()

    async def _finish(self) -> None:
        """Let requests under way finish briefly, then hand what is left back to the group."""
        if self._in_flight:
            await asyncio.wait(set(self._in_flight.values()), timeout=5)
        left, tasks = list(self._in_flight), set(self._in_flight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with suppress(RedisError):
            await self._stream.hand_back(self._consumer, left)

    async def _upkeep(self) -> None:
        await self._stream.ensure_group()
        if self._take_over_ms is not None:  # a new term: this consumer's own unfinished first
            for entry in await self._stream.read(self._consumer, count=MAX_IN_FLIGHT, own=True):
                if entry.id not in self._in_flight:
                    self._start(entry)
        await self._stream.keep_alive(self._consumer, list(self._in_flight))
        idle_ms = self._take_over_ms or self._config.intake_reclaim_idle_ms
        self._take_over_ms = None
        for entry in await self._stream.reclaim(self._consumer, min_idle_ms=idle_ms):
            if entry.id in self._in_flight:
                continue
            taken = await self._stream.deliveries(entry.id)
            if taken > self._config.intake_max_attempts:
                await self._bury(entry, f"taken over {taken} times without being done")
                continue
            log.info("requests: took over entry %s (%s, delivery %d)", entry.id, entry.work, taken)
            self._start(entry)

    async def _read_more(self) -> None:
        free = MAX_IN_FLIGHT - len(self._in_flight)
        if free <= 0:
            # Not for longer than the upkeep's interval: requests under way are kept alive
            # there, or another replica would take over the slow ones.
            await asyncio.wait(
                set(self._in_flight.values()),
                timeout=self._upkeep_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            return
        block_ms = min(500, int(self._upkeep_s * 1000))  # nor here
        for entry in await self._stream.read(self._consumer, count=free, block_ms=block_ms):
            self._start(entry)

    def _start(self, entry: Request) -> None:
        task = asyncio.create_task(self.perform(entry), name=f"request:{entry.id}")
        self._in_flight[entry.id] = task
        task.add_done_callback(lambda _: self._in_flight.pop(entry.id, None))

    async def perform(self, entry: Request) -> None:
        """Do one entry's work, then acknowledge the entry; never raises."""
        work = self._works.get(entry.work) if entry.body is not None else None
        if work is None:
            await self._bury(entry, entry.problem or f"no work is named {entry.work!r}")
            return
        attempt.set(entry.id)  # in this entry's task only
        if await self._done(entry, work):
            await self._acknowledge(entry)

    async def _done(self, entry: Request, work: Perform) -> bool:
        """Whether the work was done: retried while Redis fails, buried after `max_attempts`
        other failures (a bug must cost one request, never the consumer); False when stopping."""
        assert entry.body is not None
        backoff, errors = Backoff(1.0, first=0.05), 0
        while not self._stop.is_set():
            try:
                await work(entry.body)
                return True
            except RedisError as exc:
                log.warning("requests: entry %s: Redis failed (%s); retrying", entry.id, exc)
            except Exception as exc:
                errors += 1
                log.exception("requests: entry %s (%s) failed (%d)", entry.id, entry.work, errors)
                if errors >= self._config.intake_max_attempts:
                    await self._bury(entry, f"failed {errors} times: {type(exc).__name__}")
                    return False
            await sleep_or_stop(self._stop, backoff.next())
        return False

    async def _acknowledge(self, entry: Request) -> None:
        """Done: the entry leaves the stream. While Redis fails it is acknowledged again, not
        performed again; a consumer stopping meanwhile leaves it to whoever takes it over."""
        backoff = Backoff(1.0, first=0.05)
        while True:
            try:
                await self._stream.ack(entry.id)
                return
            except RedisError as exc:
                if self._stop.is_set():
                    return
                log.warning("requests: entry %s done, not acknowledged (%s)", entry.id, exc)
            await sleep_or_stop(self._stop, backoff.next())

    async def _bury(self, entry: Request, reason: str) -> None:
        log.error("requests: entry %s (%s) dead-lettered: %s", entry.id, entry.work, reason)
        with suppress(RedisError):
            await self._stream.bury(entry, reason)
