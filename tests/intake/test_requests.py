"""The requests stream's consumer on a real redis-server: whatever an entry holds, it is performed
or dead-lettered with the reason, and the consumer goes on with the next."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from bot.config import Settings
from bot.intake.consumer import Perform, request_loop
from bot.storage.streams import RequestStream, request_fields, request_of
from tests.support.running import eventually

PREFIX = "qp"
NEXT = {"next": True}
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "work": st.sampled_from(["record", "nothing", ""]) | st.text(max_size=20),
        "body": st.sampled_from(['{"a": 1}', "[1]", "null", "{", ""]) | st.text(max_size=40),
        "other": st.text(max_size=10),
    },
).filter(bool)


@asynccontextmanager
async def consuming(
    redis: Redis, works: dict[str, Perform], name: str = "c1"
) -> AsyncIterator[RequestStream]:
    """The consumer running in the background until the block ends."""
    stream = RequestStream(redis, PREFIX)
    config = Settings(intake_reclaim_idle_ms=200, intake_max_attempts=2)
    stop = asyncio.Event()
    consumer = request_loop(stream, works, config=config, consumer=name)
    running = asyncio.create_task(consumer.run(stop))
    try:
        yield stream
    finally:
        # Stopped at once, not after its blocking read: as a replica whose process ends.
        stop.set()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


def recording(into: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Awaitable[None]]:
    async def record(body: dict[str, Any]) -> None:
        into.append(body)

    return record


async def dead_reasons(redis: Redis, stream: RequestStream) -> list[str]:
    return [fields["reason"] for _, fields in await redis.xrange(stream.dead_key)]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(fields=FIELDS)
async def test_any_entry_is_done_or_dead_lettered_and_the_next_is_done(
    redis: Redis, fields: dict[str, str]
) -> None:
    await redis.flushdb()
    done: list[dict[str, Any]] = []
    async with consuming(redis, {"record": recording(done)}) as stream:
        await redis.xadd(stream.key, fields)  # type: ignore[arg-type]
        await stream.append("record", NEXT)
        await eventually(lambda: NEXT in done, what="the entry after it done")

        async def left() -> bool:
            return await stream.backlog() == 0

        await eventually(left, what="both entries out of the stream")
        buried = await dead_reasons(redis, stream)

    read = request_of("0-1", fields)
    if read.work == "record" and read.body is not None:
        assert done == [read.body, NEXT] and buried == []
    else:
        assert done == [NEXT] and len(buried) == 1 and buried[0]


async def test_a_request_that_keeps_failing_is_dead_lettered_and_the_next_done(
    redis: Redis,
) -> None:
    done: list[dict[str, Any]] = []
    tries: list[dict[str, Any]] = []

    async def failing(body: dict[str, Any]) -> None:
        tries.append(body)
        raise ValueError("a bug")

    works = {"fails": failing, "record": recording(done)}
    async with consuming(redis, works) as stream:
        await stream.append("fails", {"n": 1})
        await stream.append("record", NEXT)
        await eventually(lambda: NEXT in done, what="the next request done")

        async def buried() -> list[str]:
            return await dead_reasons(redis, stream)

        reasons = await eventually(buried, what="the failing request dead-lettered")
    assert reasons == ["failed 2 times: ValueError"] and len(tries) == 2


async def test_a_request_taken_by_a_consumer_that_died_is_taken_over_and_done(
    redis: Redis,
) -> None:
    stream = RequestStream(redis, PREFIX)
    await stream.ensure_group()
    await stream.append("record", {"n": 1})
    [taken] = await stream.read("dead", block_ms=100)  # and never acknowledged
    done: list[dict[str, Any]] = []
    async with consuming(redis, {"record": recording(done)}, name="alive"):
        await eventually(lambda: done, what="the request taken over and done")

        async def left() -> bool:
            return await stream.backlog() == 0

        await eventually(left, what="the request out of the stream")
    assert done == [{"n": 1}] and taken.body == {"n": 1}
    assert await redis.xlen(stream.dead_key) == 0


async def test_a_request_given_up_as_the_term_ends_is_handed_back_to_the_next(
    redis: Redis,
) -> None:
    """Redis fails the work until the consumer's term ends: the request is not done, and not
    left to wait out the idle time either; whoever leads next takes it over at once."""
    tries: list[dict[str, Any]] = []

    async def redis_failing(body: dict[str, Any]) -> None:
        tries.append(body)
        raise RedisConnectionError("Redis is gone")

    stream = await ended_while(redis, "fails", redis_failing, lambda: tries)

    [taken] = await stream.reclaim("two", min_idle_ms=30_000)
    assert taken.body == {"n": 1}
    assert await redis.xlen(stream.dead_key) == 0


async def test_a_request_done_as_the_term_ends_is_acknowledged_not_done_again(
    redis: Redis,
) -> None:
    """The term ends (SIGTERM, the lead lost) while a click is being performed: it finishes, and
    is acknowledged then, so the next leader does not perform it a second time."""
    done: list[dict[str, Any]] = []
    started, answered = asyncio.Event(), asyncio.Event()

    async def slow(body: dict[str, Any]) -> None:
        started.set()
        await answered.wait()  # a backend's answer, arriving after the term ended
        done.append(body)

    stream = await ended_while(redis, "slow", slow, started.is_set, then=answered.set)

    assert done == [{"n": 1}]
    assert await stream.reclaim("two", min_idle_ms=0) == [], "nothing left to do again"


async def ended_while(
    redis: Redis,
    work: str,
    perform: Perform,
    during: Callable[[], object],
    then: Callable[[], None] = lambda: None,
) -> RequestStream:
    """One request performed by a consumer whose term ends once `during()` holds (`then` runs
    right after the end is asked); the stream, once the consumer has stopped."""
    stream = RequestStream(redis, PREFIX)
    stop = asyncio.Event()
    config = Settings(intake_reclaim_idle_ms=200, intake_max_attempts=2)
    running = asyncio.create_task(
        request_loop(stream, {work: perform}, config=config, consumer="one").run(stop)
    )
    await stream.append(work, {"n": 1})
    await eventually(during, what="the request under way")
    stop.set()
    then()
    await running
    return stream


async def test_a_click_that_waited_past_its_reply_window_is_dead_lettered_not_done(
    redis: Redis,
) -> None:
    """A click left in the stream by a release that stopped (read by no leader for hours) is not
    performed when a leader comes: its reply could not reach the person, the act would surprise."""
    await redis.flushdb()
    done: list[dict[str, Any]] = []
    stream = RequestStream(redis, PREFIX)
    now_ms = int((await redis.time())[0]) * 1000
    stale = request_fields("record", {"stale": True})
    await redis.xadd(stream.key, stale, id=f"{now_ms - 31 * 60 * 1000}-0")  # type: ignore[arg-type]
    async with consuming(redis, {"record": recording(done)}) as stream:
        await stream.append("record", NEXT)
        await eventually(lambda: NEXT in done, what="the fresh click done")
        assert await dead_reasons(redis, stream) == ["record taken 31 min after it was asked"]
    assert {"stale": True} not in done
