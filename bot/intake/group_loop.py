"""Working through a consumer group's stream: the one loop behind every stream the leader consumes
(notifications, `bot.intake.consumer`; Slack requests, `bot.intake.requests`).

The loop reads new entries, keeps those under way from looking idle, takes over what other
consumers left idle (burying an entry taken over too often), prunes consumers that left, waits out
Redis failing, and at the end of a term hands back what it did not finish. The stream's own part
says two things: which lane an entry takes, and how a batch is worked on. The entries of one lane
are worked on in order by one task, those waiting together as one batch; lanes run side by side,
at most `max_in_flight` entries at once. Notifications take their alert group's lane and are
applied together; each request takes a lane of its own.

An entry stays this consumer's until its batch was worked on. A batch worked on after the term
ended (`stop` set) may have been given up, so its entries are handed back with those still
waiting: the next term, this replica's or another's, takes them over at once. Handing back one
that was done after all changes nothing (it is no longer pending).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Generic

from redis.exceptions import RedisError

from bot.backoff import Backoff
from bot.config import Settings
from bot.storage.consumer_group import ConsumerGroup, E

log = logging.getLogger(__name__)

# A consumer idle this long with nothing pending has left (its replica is gone).
DEAD_CONSUMER_IDLE_MS = 600_000
PRUNE_EVERY_S = 60.0
# How long a term's last batches may take before they are cancelled and handed back.
FINISH_S = 5.0


class GroupLoop(Generic[E]):
    def __init__(
        self,
        group: ConsumerGroup[E],
        work: Callable[[list[E]], Awaitable[None]],
        *,
        lane: Callable[[E], str],
        config: Settings,
        consumer: str,
        name: str,
        max_in_flight: int,
        gather_s: float = 0.0,
        buried: Callable[[], object] = lambda: None,
    ) -> None:
        """`work` works on a batch of one lane's entries and never raises; `gather_s` is how long
        a loop under load waits before reading on, so more of a lane's entries share a batch;
        `buried` is told of every entry dead-lettered."""
        self._group = group
        self._work = work
        self._lane = lane
        self._config = config
        self._consumer = consumer  # this process's name in the stream's group
        self._name = name
        self._max_in_flight = max_in_flight
        self._gather_s = gather_s
        self._buried = buried
        # Entry ID -> the task of its lane; entries waiting for their lane's task.
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._lanes: dict[str, asyncio.Task[None]] = {}
        self._queued: dict[str, list[E]] = {}
        self._stop = asyncio.Event()
        self._take_over_ms: int | None = None
        # Entries under way are kept alive well within the idle time that lets others take over.
        self._upkeep_s = min(config.intake_reclaim_idle_ms / 3000, 5.0)

    async def run(self, stop: asyncio.Event, *, take_over_ms: int | None = None) -> None:
        """Consume until `stop` is set, riding out Redis outages with a capped backoff.

        A new leader first takes over what its predecessor left pending once it has been idle
        `take_over_ms` (about a lease's TTL: the predecessor is gone), not `reclaim_idle_ms`."""
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
                        next_prune = loop.time() + PRUNE_EVERY_S
                        await self._group.prune_consumers(
                            self._consumer, idle_ms=DEAD_CONSUMER_IDLE_MS
                        )
                    await self._read_more()
                    backoff.reset()
                except RedisError as exc:
                    wait = backoff.next()
                    log.warning(
                        "%s: Redis unavailable (%s); retrying in %.2fs", self._name, exc, wait
                    )
                    await sleep_or_stop(stop, wait)
                    next_upkeep = 0.0
        finally:
            await self._finish()

    async def bury(self, entry: E, reason: str) -> None:
        """Dead-letter an entry that can never be done, with the reason."""
        log.error("%s: entry %s dead-lettered: %s", self._name, entry.id, reason)
        self._buried()
        with suppress(RedisError):
            await self._group.bury(entry, reason)

    async def _finish(self) -> None:
        """Let the batches under way finish briefly, then hand what is left back to the group."""
        if self._lanes:
            await asyncio.wait(set(self._lanes.values()), timeout=FINISH_S)
        tasks = set(self._lanes.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        left = list(self._in_flight)
        # A replica that leads again later starts afresh from what is pending in the stream.
        self._in_flight.clear()
        self._queued.clear()
        with suppress(RedisError):
            await self._group.hand_back(self._consumer, left)

    async def _upkeep(self) -> None:
        await self._group.ensure_group()
        if self._take_over_ms is not None:  # a new term: this consumer's own unfinished first
            own = await self._group.read(self._consumer, count=self._max_in_flight, own=True)
            for entry in own:
                if entry.id not in self._in_flight:
                    self._start(entry)
        await self._group.keep_alive(self._consumer, list(self._in_flight))
        idle_ms = self._take_over_ms or self._config.intake_reclaim_idle_ms
        self._take_over_ms = None
        for entry in await self._group.reclaim(self._consumer, min_idle_ms=idle_ms):
            if entry.id in self._in_flight:
                continue
            taken = await self._group.deliveries(entry.id)
            if taken > self._config.intake_max_attempts:
                await self.bury(entry, f"taken over {taken} times without being done")
                continue
            log.info("%s: took over entry %s (delivery %d)", self._name, entry.id, taken)
            self._start(entry)

    async def _read_more(self) -> None:
        free = self._max_in_flight - len(self._in_flight)
        if free <= 0:
            # Not for longer than the upkeep's interval: entries under way are kept alive
            # there, or another replica would take over the slow ones.
            if self._lanes:
                await asyncio.wait(
                    set(self._lanes.values()),
                    timeout=self._upkeep_s,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            else:  # entries in flight with no lane left to end them: never spin the loop
                await asyncio.sleep(self._upkeep_s)
            return
        block_ms = min(500, int(self._upkeep_s * 1000))  # nor here
        entries = await self._group.read(self._consumer, count=free, block_ms=block_ms)
        for entry in entries:
            self._start(entry)
        if entries:
            # The entries' tasks go first, before this loop sends its next read: a new alert's
            # commit is the chain from the alert to Slack, and Redis answers it sooner while
            # it is still awake from the append. Under load (several entries, fewer than
            # asked for) the next ones gather for a moment, to share their lane's batch; a
            # lone entry is never held up, and a backlog (the read was full) is read on at once.
            await asyncio.sleep(self._gather_s if 1 < len(entries) < free else 0)

    def _start(self, entry: E) -> None:
        """Queue the entry for its lane's task, starting one if the lane has none running."""
        lane = self._lane(entry)
        self._queued.setdefault(lane, []).append(entry)
        task = self._lanes.get(lane)
        if task is None:
            task = asyncio.create_task(self._drain(lane), name=f"{self._name}:{lane}")
            self._lanes[lane] = task
        self._in_flight[entry.id] = task

    async def _drain(self, lane: str) -> None:
        """Work on the lane's entries, batch after batch, until none is waiting or the term
        ended; what is left then stays in flight, to be handed back."""
        try:
            while not self._stop.is_set() and (batch := self._queued.pop(lane, [])):
                await self._work(batch)
                if not self._stop.is_set():
                    for entry in batch:
                        self._in_flight.pop(entry.id, None)
        finally:
            self._lanes.pop(lane, None)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Wait `seconds`, or less when `stop` is set meanwhile (a consumer between retries)."""
    with suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
