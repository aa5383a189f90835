"""The one loop behind both streams the leader consumes (notifications, Slack requests). At the
end of a term it hands back what it did not finish, so the next term takes it over at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Generic

from redis.exceptions import RedisError

from bot.config import Settings
from bot.pacing import Backoff
from bot.storage.connection import LONGEST_BLOCK_S
from bot.storage.leases import Deposed
from bot.storage.streams import ConsumerGroup, E

log = logging.getLogger(__name__)

# A consumer idle this long with nothing pending has left (its replica is gone).
DEAD_CONSUMER_IDLE_MS = 600_000
PRUNE_EVERY_S = 60.0
# How long a term's last batches may take before they are cancelled and handed back.
FINISH_S = 5.0


@dataclass(eq=False)
class GroupLoop(Generic[E]):
    """`work` works on a batch of one lane's entries and never raises; `failed` counts failures
    by kind (redis, error, dead_lettered)."""

    group: ConsumerGroup[E]
    work: Callable[[list[E]], Awaitable[None]]
    _: KW_ONLY
    lane: Callable[[E], str]
    config: Settings
    consumer: str  # this process's name in the stream's group
    name: str
    max_in_flight: int
    gather_s: float = 0.0  # how long a loop under load waits before reading on (see `_read_more`)
    failed: Callable[[str], object] = lambda kind: None
    # Entry ID -> the task of its lane; entries waiting for their lane's task.
    _in_flight: dict[str, asyncio.Task[None]] = field(default_factory=dict, init=False)
    _lanes: dict[str, asyncio.Task[None]] = field(default_factory=dict, init=False)
    _queued: dict[str, list[E]] = field(default_factory=dict, init=False)
    stop: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _take_over_ms: int | None = field(default=None, init=False)
    _parked: int = field(default=0, init=False)  # entries whose lanes wait outside (`parked`)
    _room: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    @property
    def _upkeep_s(self) -> float:
        # Well within the idle time after which others take an entry over.
        return min(self.config.intake_reclaim_idle_ms / 3000, 5.0)

    async def run(self, stop: asyncio.Event, *, take_over_ms: int | None = None) -> None:
        """Consume until `stop` is set. A new leader takes over what its predecessor left once
        idle `take_over_ms` (about a lease's TTL), not `reclaim_idle_ms`."""
        self.stop = stop
        self._take_over_ms = take_over_ms
        loop = asyncio.get_running_loop()
        backoff, next_upkeep, next_prune = Backoff(1.0, first=0.05), 0.0, 0.0
        regroup = True  # at the start, and after Redis failed (it may have lost the group)
        try:
            while not stop.is_set():
                try:
                    if loop.time() >= next_upkeep:
                        await self._upkeep(regroup)
                        regroup, next_upkeep = False, loop.time() + self._upkeep_s
                    if loop.time() >= next_prune:
                        next_prune = loop.time() + PRUNE_EVERY_S
                        await self.group.prune_consumers(
                            self.consumer, idle_ms=DEAD_CONSUMER_IDLE_MS
                        )
                    await self._read_more(until=next_upkeep)
                    backoff.reset()
                except RedisError as exc:
                    wait = backoff.next()
                    log.warning(
                        "%s: Redis unavailable (%s); retrying in %.2fs", self.name, exc, wait
                    )
                    await sleep_or_stop(stop, wait)
                    regroup, next_upkeep = True, 0.0
        finally:
            await self._finish()

    async def bury(self, entry: E, reason: str) -> None:
        log.error("%s: entry %s dead-lettered: %s", self.name, entry.id, reason)
        self.failed("dead_lettered")
        with suppress(RedisError):
            await self.group.bury(entry, reason)

    async def retried(
        self, call: Callable[[], Awaitable[object]], what: str, entry: E | None
    ) -> bool:
        """Whether `call()` was done: tried once even as the term ends (work done then is still
        acknowledged, not performed again by the next leader), retried while Redis fails; after
        `intake_max_attempts` other failures `entry` is dead-lettered."""
        backoff, errors = Backoff(1.0, first=0.02), 0
        while True:
            try:
                await call()
                return True
            except Deposed:
                return False  # this term is over: the next one carries the entry on
            except RedisError as exc:
                self.failed("redis")
                log.warning("%s: %s: Redis failed (%s); retrying", self.name, what, exc)
            except Exception as exc:
                if entry is None:
                    log.exception("%s: %s failed; one by one", self.name, what)
                    return False
                errors += 1
                self.failed("error")
                log.exception("%s: %s failed (%d)", self.name, what, errors)
                if errors >= self.config.intake_max_attempts:
                    await self.bury(entry, f"failed {errors} times: {type(exc).__name__}")
                    return False
            if self.stop.is_set():
                return False
            await sleep_or_stop(self.stop, backoff.next())

    async def _finish(self) -> None:
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
            await self.group.hand_back(self.consumer, left)

    @asynccontextmanager
    async def parked(self, entries: int) -> AsyncIterator[None]:
        """While a lane waits on something outside the loop (the read of Slack's history after a
        possible loss), its `entries` leave the budget, up to as many again as it holds: a storm
        of new groups waiting must not keep the known groups' notifications from being read."""
        self._parked += entries
        self._room.set()
        try:
            yield
        finally:
            self._parked -= entries

    async def _upkeep(self, regroup: bool) -> None:
        if regroup:  # else a read or a reclaim that finds the group gone makes it again
            await self.group.ensure_group()
        if self._take_over_ms is not None:  # a new term: this consumer's own unfinished first
            for entry in await self.group.read(self.consumer, count=self.max_in_flight, own=True):
                if entry.id not in self._in_flight:
                    self._start(entry)
        await self.group.keep_alive(self.consumer, list(self._in_flight))
        idle_ms = self._take_over_ms or self.config.intake_reclaim_idle_ms
        self._take_over_ms = None
        for entry in await self.group.reclaim(self.consumer, min_idle_ms=idle_ms):
            if entry.id in self._in_flight:
                continue
            taken = await self.group.deliveries(entry.id)
            if taken > self.config.intake_max_attempts:
                await self.bury(entry, f"taken over {taken} times without being done")
                continue
            log.info("%s: took over entry %s (delivery %d)", self.name, entry.id, taken)
            self._start(entry)

    async def _read_more(self, *, until: float) -> None:
        """Read when there is room, else wait for a lane to end; neither past the next upkeep
        (`until`, the loop's time), which keeps the entries under way alive."""
        budget = self.max_in_flight + min(self._parked, self.max_in_flight)
        free = budget - len(self._in_flight)
        if free <= 0:
            self._room.clear()
            room = asyncio.create_task(self._room.wait())
            await asyncio.wait(
                {*self._lanes.values(), room}, timeout=self._upkeep_s, return_when="FIRST_COMPLETED"
            )
            room.cancel()
            return
        wait_s = min(until - asyncio.get_running_loop().time(), LONGEST_BLOCK_S)
        entries = await self._read(free, block_ms=max(int(wait_s * 1000), 1))
        for entry in entries:
            self._start(entry)
        if entries:
            # Under load (several entries, fewer than asked for) the next ones gather a moment to
            # share a batch, so a flood costs fewer commits.
            await asyncio.sleep(self.gather_s if 1 < len(entries) < free else 0)

    async def _read(self, count: int, *, block_ms: int) -> list[E]:
        """New entries, the read woken by the stream; given up at once when the term ends, so a
        deposed leader's read takes nothing more (what Redis handed it meanwhile stays pending,
        taken over once idle as anything a dead consumer left)."""
        if self.stop.is_set():
            return []
        read = asyncio.ensure_future(self.group.read(self.consumer, count=count, block_ms=block_ms))
        ended = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({read, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            if not read.done():
                # Not awaited: redis-py at times swallows a cancel that lands as a read begins,
                # and the read then blocks on to its end (up to LONGEST_BLOCK_S past the term's).
                read.cancel()
                read.add_done_callback(_left)
        return read.result() if read.done() else []

    def _start(self, entry: E) -> None:
        lane = self.lane(entry)
        self._queued.setdefault(lane, []).append(entry)
        if (task := self._lanes.get(lane)) is None:
            task = asyncio.create_task(self._drain(lane), name=f"{self.name}:{lane}")
            self._lanes[lane] = task
        self._in_flight[entry.id] = task

    async def _drain(self, lane: str) -> None:
        """Batch after batch until none waits or the term ended (what is left is handed back)."""
        try:
            while not self.stop.is_set() and (batch := self._queued.pop(lane, [])):
                await self.work(batch)
                if not self.stop.is_set():
                    for entry in batch:
                        self._in_flight.pop(entry.id, None)
        finally:
            task = self._lanes.pop(lane, None)
            if not self.stop.is_set():  # `work` raised after all: its entries are taken over
                for entry_id in [i for i, t in self._in_flight.items() if t is task]:
                    del self._in_flight[entry_id]


def _left(read: asyncio.Future[Any]) -> None:
    """A read the term's end left: what it ended with is nobody's to handle."""
    if not read.cancelled():
        read.exception()


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
