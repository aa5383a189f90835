"""The shared fleet reading, against a real Redis: one backend read per interval however many
ask at once, and a backend that hangs costs one timeout, not one per incident or per tick."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.fleet.readings import FleetReadings
from bot.storage.keys import Keys
from tests.support.running import eventually


class CountingMetrics:
    name = "Prometheus"
    live = True

    def __init__(self) -> None:
        self.reads = 0
        self.answer = asyncio.Event()  # cleared by a test: a read under way until it is set
        self.answer.set()

    async def read(self, *, now: datetime) -> FleetSnapshot:
        self.reads += 1
        await self.answer.wait()
        metrics = RunnerTypeMetrics(queued=self.reads)
        return FleetSnapshot(at=now, source="prometheus", runner_types={"gpu": metrics})

    async def aclose(self) -> None:
        return None


async def test_tasks_asking_at_once_share_one_read_per_interval(redis_url: str) -> None:
    # The leader's status tick, early warning and clicks ask at once: one backend read.
    redis = Redis.from_url(redis_url, decode_responses=True)
    metrics = CountingMetrics()
    now = [datetime(2026, 11, 22, 10, tzinfo=UTC)]
    readings = FleetReadings(
        redis,
        Keys("qp"),
        metrics,
        config=Settings(backend_timeout_seconds=5),
        clock=lambda: now[0],
    )
    metrics.answer.clear()
    asking = [asyncio.create_task(readings.latest()) for _ in range(15)]
    # A task that finds the read under way waits for nothing: 14 done while one reads.
    await eventually(
        lambda: metrics.reads == 1 and sum(task.done() for task in asking) == 14,
        what="the others answered while the one read is under way",
    )
    metrics.answer.set()
    await asyncio.gather(*asking)
    # The first read's answer is shared.
    shared = await asyncio.gather(*(readings.latest() for _ in range(3)))
    assert metrics.reads == 1
    assert {r.fleet.runner_types["gpu"].queued for r in shared if r and r.fleet} == {1}
    now[0] += timedelta(seconds=61)
    await asyncio.gather(*(readings.latest() for _ in range(3)))
    assert metrics.reads == 2
    await redis.aclose()


async def test_only_the_leader_reads_the_backend_another_replica_serves_its_reading(
    redis_url: str,
) -> None:
    """Two replicas over one Redis (the chart runs two): a reading paced for one reader has
    one. The other, cold or not, serves what the leader stored and never asks the backend."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    now = [datetime(2026, 11, 22, 10, tzinfo=UTC)]
    config = Settings(backend_timeout_seconds=5)
    leader, other = CountingMetrics(), CountingMetrics()
    leading = [False]

    def replica(metrics: CountingMetrics, leads: Callable[[], bool]) -> FleetReadings:
        return FleetReadings(
            redis, Keys("qp"), metrics, config=config, clock=lambda: now[0], leads=leads
        )

    first, second = replica(leader, lambda: True), replica(other, lambda: leading[0])
    assert await second.latest() is None, "nothing read yet: nothing to serve"
    for _ in range(5):
        seen = [await second.latest(), await first.latest(), await second.latest()]
        now[0] += timedelta(seconds=61)
    assert (leader.reads, other.reads) == (5, 0)
    assert [r.fleet.runner_types["gpu"].queued for r in seen if r and r.fleet] == [4, 5, 5]

    leading[0] = True  # the lease passed to it: it reads from now on
    assert (await second.latest()) is not None and other.reads == 1
    await redis.aclose()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers: a backend that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


async def test_a_hanging_backend_costs_one_timeout_and_is_said(
    redis_url: str, silent_server: str
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    metrics = PrometheusMetrics(Settings(prometheus_url=silent_server, backend_timeout_seconds=1))
    readings = FleetReadings(
        redis,
        Keys("qp"),
        metrics,
        config=Settings(backend_timeout_seconds=1),
        clock=lambda: datetime.now(UTC),
    )
    started = time.monotonic()
    reading = await readings.latest()
    assert time.monotonic() - started < 5  # the timeout and its margin, not forever
    assert reading is not None and reading.fleet is None
    assert "Prometheus did not answer within 1 s" in reading.error
    # Within the interval the failure is served from Redis: no second wait (of 1 s or more).
    started = time.monotonic()
    again = await readings.latest()
    assert time.monotonic() - started < 1 and again is not None and again.error
    await metrics.aclose()
    await redis.aclose()


async def test_the_stored_reading_keeps_what_absence_means_and_an_older_one_stays_readable(
    redis_url: str,
) -> None:
    redis = Redis.from_url(redis_url, decode_responses=True)
    keys = Keys("qp")
    now = datetime(2026, 11, 22, 10, tzinfo=UTC)

    class Hud(CountingMetrics):
        async def read(self, *, now: datetime) -> FleetSnapshot:
            return FleetSnapshot(at=now, source="hud", absent_means_empty=True)

    readings = FleetReadings(
        redis, keys, Hud(), config=Settings(backend_timeout_seconds=5), clock=lambda: now
    )
    await readings.latest()
    # Another replica reads it from Redis: an empty answer still means "nothing queues".
    stored = await readings.stored()
    assert stored is not None and stored.fleet is not None and stored.fleet.absent_means_empty
    # A reading stored by a version before the field: absence is unknown, as it was then.
    older = {"at": now.isoformat(), "source": "hud", "runner_types": {"gpu": {"q": 3}}}
    await redis.set(
        keys.fleet_reading,
        json.dumps({"fleet": older, "tried_at": now.isoformat(), "error": ""}),
    )
    stored = await readings.stored()
    assert stored is not None and stored.fleet is not None
    assert stored.fleet.runner_types["gpu"].queued == 3 and not stored.fleet.absent_means_empty
    await redis.aclose()
