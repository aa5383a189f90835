"""The one loop behind every consumer group, on a real redis-server: a lane's entries worked on in
order, lanes side by side, and what a term leaves unfinished handed back, never lost and never
done twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis

from bot.config import Settings
from bot.intake.group_loop import GroupLoop
from bot.storage.streams import Request, RequestStream
from tests.support.running import eventually

PREFIX = "qp"
CONFIG = Settings(intake_reclaim_idle_ms=200, intake_max_attempts=2)


class Worker:
    """A stream's own part: records each batch and acknowledges its entries. While `holding`, a
    batch is retried until the term ends and then given up, as a consumer does while Redis
    fails."""

    def __init__(self, stream: RequestStream) -> None:
        self.stream = stream
        self.batches: list[list[tuple[str, int]]] = []
        self.holding = False
        self.stop = asyncio.Event()

    async def work(self, batch: list[Request]) -> None:
        if self.holding:
            await self.stop.wait()
            return
        self.batches.append([(lane_of(entry), number(entry)) for entry in batch])
        await self.stream.ack(*(entry.id for entry in batch))

    def done(self) -> list[int]:
        return sorted(n for batch in self.batches for _, n in batch)


def lane_of(entry: Request) -> str:
    return str((entry.body or {}).get("lane", entry.id))


def number(entry: Request) -> int:
    return int((entry.body or {})["n"])


@asynccontextmanager
async def term(
    worker: Worker, name: str = "one", take_over_ms: int | None = None, config: Settings = CONFIG
) -> AsyncIterator[None]:
    """The loop running as `name` until the block ends, then its term ended (`stop` set)."""
    worker.stop = asyncio.Event()
    loop = GroupLoop(
        worker.stream,
        worker.work,
        lane=lane_of,
        config=config,
        consumer=name,
        name="test",
        max_in_flight=8,
    )
    running = asyncio.create_task(loop.run(worker.stop, take_over_ms=take_over_ms))
    try:
        yield
    finally:
        worker.stop.set()
        await running


async def pending_on(redis: Redis, stream: RequestStream, count: int) -> bool:
    return int((await redis.xpending(stream.key, stream.group))["pending"]) == count


async def test_a_lanes_entries_are_worked_on_in_order_and_lanes_apart(redis: Redis) -> None:
    stream = RequestStream(redis, PREFIX)
    worker = Worker(stream)
    async with term(worker):
        for n in range(6):
            await stream.append("work", {"lane": "ab"[n % 2], "n": n})
        await eventually(lambda: worker.done() == list(range(6)), what="every entry worked on")

    for batch in worker.batches:
        assert len({lane for lane, _ in batch}) == 1, "a batch holds one lane's entries"
    in_lane = {
        lane: [n for batch in worker.batches for ln, n in batch if ln == lane] for lane in "ab"
    }
    assert in_lane == {"a": [0, 2, 4], "b": [1, 3, 5]}
    assert await stream.backlog() == 0


async def test_what_a_term_gave_up_is_handed_back_for_another_to_take_over_at_once(
    redis: Redis,
) -> None:
    stream = RequestStream(redis, PREFIX)
    worker = Worker(stream)
    worker.holding = True
    async with term(worker):
        # Two in one lane (the second waits behind the first), one in a lane of its own.
        ids = [await stream.append("work", {"lane": lane, "n": n}) for n, lane in enumerate("aab")]
        await eventually(lambda: pending_on(redis, stream, 3), what="all three read")

    taken = await stream.reclaim("two", min_idle_ms=30_000)
    assert sorted(entry.id for entry in taken) == sorted(ids)
    assert worker.batches == []


async def test_the_next_term_does_its_own_unfinished_entries_each_once(redis: Redis) -> None:
    stream = RequestStream(redis, PREFIX)
    worker = Worker(stream)
    worker.holding = True
    async with term(worker):
        for n, lane in enumerate("aab"):
            await stream.append("work", {"lane": lane, "n": n})
        await eventually(lambda: pending_on(redis, stream, 3), what="all three read")

    worker.holding = False
    async with term(worker, take_over_ms=30_000):
        await eventually(lambda: worker.done() == [0, 1, 2], what="the three done")

        async def left() -> bool:
            return await stream.backlog() == 0

        await eventually(left, what="the stream empty")
    assert worker.done() == [0, 1, 2]
    assert await redis.xlen(stream.dead_key) == 0


async def test_an_entry_done_as_the_term_ends_is_not_done_again(redis: Redis) -> None:
    stream = RequestStream(redis, PREFIX)
    worker = Worker(stream)
    work = worker.work

    async def done_then_deposed(batch: list[Request]) -> None:
        await work(batch)
        worker.stop.set()

    worker.work = done_then_deposed  # type: ignore[method-assign]
    async with term(worker):
        await stream.append("work", {"n": 1})
        await eventually(lambda: worker.batches, what="the entry done")

    assert await stream.reclaim("two", min_idle_ms=0) == []
    assert await stream.backlog() == 0 and worker.done() == [1]


async def test_an_idle_loop_waits_on_the_stream_and_its_term_ends_at_once(redis: Redis) -> None:
    """Idle, the loop makes the group once and reads about every 2 s, each read woken by the
    stream: an entry is taken at once, and the end of a term does not wait for the read."""
    stream = RequestStream(redis, PREFIX)
    worker = Worker(stream)
    clock = asyncio.get_running_loop().time
    await redis.config_resetstat()

    async def three_reads() -> bool:
        stats = await redis.info("commandstats")
        return int(stats.get("cmdstat_xreadgroup", {}).get("calls", 0)) >= 3

    started = clock()
    async with term(worker, config=Settings(intake_reclaim_idle_ms=30_000)):
        await eventually(three_reads, what="three reads", timeout=30)
        assert clock() - started >= 3.0, "a read about every 2 s, not a poll every 0.5 s"
        appended = clock()
        await stream.append("work", {"n": 1})
        await eventually(lambda: worker.done() == [1], what="the entry done")
        assert clock() - appended < 0.5
        stats = await redis.info("commandstats")
        ending = clock()
    assert clock() - ending < 0.5
    assert stats["cmdstat_xgroup|create"]["calls"] == 1


async def test_a_term_that_ends_between_reads_reads_nothing_more(redis: Redis) -> None:
    """The term ends while the loop tends the group, before its next read: that read is never
    made, so an entry appended meanwhile is left for the next leader at once, not handed to the
    deposed consumer to sit pending until taken over."""
    stream = RequestStream(redis, PREFIX)
    worker = Worker(stream)
    pruned = stream.prune_consumers

    async def prune_then_end(*args: object, **kwargs: object) -> object:
        result = await pruned(*args, **kwargs)  # type: ignore[arg-type]
        await stream.append("work", {"n": 1})
        worker.stop.set()
        return result

    stream.prune_consumers = prune_then_end  # type: ignore[method-assign]
    async with term(worker):
        await worker.stop.wait()
    assert worker.done() == []
    assert await pending_on(redis, stream, 0), "nothing handed to the deposed consumer"
    assert await redis.xlen(stream.key) == 1
