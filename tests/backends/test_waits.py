"""The longest wait as each source can know it: the oldest job still queued where jobs are listed
(the HUD, GitHub, and `JOBS_BACKEND` beside Prometheus), and with ARC's metrics alone the slowest
recent start, said as such and "over N min" when its quantile fell past the top bucket."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.prometheus import (
    PrometheusMetrics,
    bucket_quantile,
)
from bot.config import Settings
from bot.domain.incident.incident_fleet import is_drained
from bot.domain.incident.incidents import DrainRule
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.fleet.readings import FleetReadings, JobsWatch
from bot.render.numbers import wait_of
from bot.storage.fleet import JobArrivals
from bot.storage.keys import Keys
from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.arc_exporter import BUCKETS, ArcFleet
from tests.support.fakes.github_api import FakeGithub
from tests.support.running import eventually

GPU, CPU = "linux.g5.4xlarge.nvidia.gpu", "linux.2xlarge"
GPU_SET, CPU_SET = "linux-g5-4xlarge-nvidia-gpu", "linux-2xlarge"  # as ARC installs name them
INF = math.inf


# -- the startup histogram's quantile -----------------------------------------------------------


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        # Every start within the first bucket: interpolated from 0, as Prometheus does.
        ({10: 100, 60: 100, INF: 100}, (9.9, False)),
        # p99 of 100 starts: the 99th is in (60, 3600], three quarters of the way.
        ({60: 96, 3600: 100, INF: 100}, (60 + 3540 * 0.75, False)),
        # Two of 100 waited past the top bucket: the p99 is over an hour, not "60 min".
        ({60: 50, 3600: 98, INF: 100}, (3600, True)),
        ({3600: 0, INF: 3}, (3600, True)),
        # Counts that went backwards mid-scrape are made monotonic, as Prometheus makes them.
        ({10: 5, 20: 4, INF: 5}, (9.9, False)),
        # Nothing started, no +Inf bucket, or only +Inf: no number (Prometheus: NaN).
        ({10: 0, INF: 0}, None),
        ({10: 5, 20: 5}, None),
        ({INF: 5}, None),
        ({}, None),
    ],
)
def test_the_quantile_is_prometheus_s_but_says_over_past_the_top_bucket(
    buckets: dict[float, float], expected: tuple[float, bool] | None
) -> None:
    found = bucket_quantile(0.99, buckets)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found[1] == expected[1]
        assert found[0] == pytest.approx(expected[0])


@given(
    st.lists(st.integers(0, 7200), min_size=1, max_size=60),
    st.floats(0.01, 1.0),
)
def test_the_quantile_lies_in_the_bucket_its_rank_falls_in(waits: list[int], q: float) -> None:
    """Over ARC's own buckets: an answer "over" exactly when more than 1 - q of the starts
    waited past the top bound; otherwise within the bucket of the `q`-th start."""
    bounds = [*BUCKETS, INF]
    buckets = {b: float(sum(1 for w in waits if w <= b)) for b in bounds}
    found = bucket_quantile(q, buckets)
    assert found is not None
    seconds, over = found
    rank = q * len(waits)
    assert over == (buckets[BUCKETS[-1]] < rank)
    if over:
        assert seconds == BUCKETS[-1]
    else:
        i = next(n for n, b in enumerate(bounds) if buckets[b] >= rank)
        low = bounds[i - 1] if i else 0
        assert low <= seconds <= bounds[i]


# -- Prometheus: ARC's metrics alone ------------------------------------------------------------


@pytest.fixture(scope="module")
def arc_fleet() -> Iterator[ArcFleet]:
    fleet = ArcFleet(names=(GPU_SET, CPU_SET))
    try:
        yield fleet
    finally:
        fleet.stop()


async def read(
    url: str, at: datetime | None = None, queries: dict[str, str] | None = None
) -> FleetSnapshot:
    config = Settings(
        prometheus_url=url, prometheus_rate_window="30s", prometheus_queries=queries or {}
    )
    metrics = PrometheusMetrics(config)
    try:
        return await metrics.read(now=at or datetime.now(UTC))
    finally:
        await metrics.aclose()


async def test_a_start_past_arcs_top_bucket_reads_over_60_min_never_60(
    arc_fleet: ArcFleet,
) -> None:
    """ARC's startup buckets end at 3600 s: Prometheus's own quantile would say 60 minutes for
    a job that waited 114."""

    async def scraped() -> RunnerTypeMetrics | None:
        arc_fleet.queueing.start(waited_s=114 * 60, count=5)  # observed in whole seconds
        gpu = (await read(arc_fleet.prometheus.url)).runner_types.get(GPU_SET)
        return gpu if gpu is not None and gpu.wait_over else None

    gpu = await eventually(scraped, what="the 114-minute starts scraped", timeout=30)
    assert (gpu.longest_wait_mins, gpu.wait_over, gpu.wait_of_starts) == (60, True, True)
    said = wait_of(gpu)
    assert said == "slowest recent start over 60 min"
    # An operator's own query answers minutes per type: a plain wait, neither start nor "over".
    query = f'label_replace(vector(114), "name", "{GPU_SET}", "", "")'
    own = (await read(arc_fleet.prometheus.url, queries={"longest_wait_mins": query})).runner_types
    assert (own[GPU_SET].longest_wait_mins, own[GPU_SET].wait_over) == (114, None)
    assert own[GPU_SET].wait_of_starts is None


async def test_a_queue_with_no_start_in_the_rate_window_reads_the_last_hours_starts() -> None:
    """Jobs queue on the GPU type and none started within the 30 s rate window: its wait is the
    slowest start of the last hour, not "not known". The CPU type, queueing nothing, gets no such
    wait: an old start must not hold up its drain."""
    fleet = ArcFleet(names=(GPU_SET, CPU_SET))
    gpu_set, cpu_set = fleet.queueing, fleet.healthy
    for listener in (gpu_set, cpu_set):
        listener.start(waited_s=10)  # ARC's histogram appears with its first start
    try:

        async def gpu_read() -> tuple[datetime, RunnerTypeMetrics | None]:
            at = datetime.now(UTC)
            return at, (await read(fleet.prometheus.url, at=at)).runner_types.get(GPU_SET)

        async def counted() -> bool:  # the counters scraped twice: a rate, of no start yet
            gpu = (await gpu_read())[1]
            return gpu is not None and gpu.started_per_min is not None

        async def started() -> datetime | None:
            at, gpu = await gpu_read()
            return at if gpu is not None and gpu.longest_wait_mins is not None else None

        await eventually(counted, what="the first starts scraped", timeout=30)
        gpu_set.start(waited_s=300, count=5)
        cpu_set.start(waited_s=600, count=5)
        at = await eventually(started, what="the later starts scraped", timeout=30)
        later = (await read(fleet.prometheus.url, at=at + timedelta(minutes=2))).runner_types
    finally:
        fleet.stop()
    gpu, cpu = later[GPU_SET], later[CPU_SET]
    assert gpu.queued == 43 and gpu.longest_wait_mins == pytest.approx(5, abs=0.1)
    said = wait_of(gpu)
    assert said == "slowest recent start 5 min"
    assert cpu.queued == 0 and cpu.longest_wait_mins is None


async def test_jobs_from_github_give_the_prometheus_reading_the_oldest_jobs_age(
    arc_fleet: ArcFleet, redis_url: str
) -> None:
    """`JOBS_BACKEND=github` beside `prometheus`: the GPU type's wait is its oldest queued
    job's age (114 min, from its creation), the CPU type, with nothing queued in a listing that
    covered every repository, has none; the other numbers stay ARC's."""

    async def both_scraped() -> datetime | None:
        at = datetime.now(UTC).replace(microsecond=0)
        types = (await read(arc_fleet.prometheus.url, at=at)).runner_types
        return at if {GPU_SET, CPU_SET} <= set(types) else None

    # The readings below are taken at one fixed instant: one that comes after Prometheus's first
    # scrape of both listeners, as a query at an earlier instant never sees a later sample.
    now = await eventually(both_scraped, what="both listeners scraped", timeout=30)
    fake = FakeGithub()
    server: RunningServer = serve_in_thread(fake.app)
    fake.base_url = server.url
    created = (now - timedelta(minutes=114)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fake.run("pytorch/pytorch", 11, "queued", [FakeGithub.job(102, [GPU], "queued", created)])
    redis = Redis.from_url(redis_url, decode_responses=True)
    github = GithubMetrics(
        Settings(github_token="ghp-test", github_api_url=server.url, github_repos="pytorch/pytorch")
    )
    prometheus = PrometheusMetrics(
        Settings(prometheus_url=arc_fleet.prometheus.url, prometheus_rate_window="30s")
    )
    watch = JobsWatch(github, JobArrivals(redis, Keys("qp")), timeout_s=5)
    # Read anew every time at the one instant (0: no interval; no setting may be 0).
    every_time = Settings.model_construct(metrics_interval_seconds=0, backend_timeout_seconds=5)
    readings = FleetReadings(
        redis, Keys("qp"), prometheus, config=every_time, clock=lambda: now, jobs=watch
    )
    try:

        async def read_both() -> FleetSnapshot | None:
            reading = await readings.latest()
            fleet = reading.fleet if reading else None
            ready = fleet is not None and {GPU_SET, CPU_SET} <= set(fleet.runner_types)
            return fleet if ready else None

        fleet = await eventually(read_both, what="both scale sets read")
        gpu, cpu = fleet.runner_types[GPU_SET], fleet.runner_types[CPU_SET]
        assert gpu.longest_wait_mins == pytest.approx(114)
        assert (gpu.wait_over, gpu.wait_of_starts) == (None, None)
        assert wait_of(gpu) == "longest wait 114 min"
        assert cpu.longest_wait_mins is None
        assert gpu.registered == 120  # still ARC's
        # The stored reading, as every replica reads it back, says the same.
        stored = await readings.stored()
        assert stored is not None and stored.fleet is not None
        assert stored.fleet.runner_types[GPU_SET].longest_wait_mins == pytest.approx(114)
    finally:
        await readings.aclose()
        await redis.aclose()
        server.stop()


# -- what the waits decide ----------------------------------------------------------------------


def test_a_wait_over_a_bound_is_never_drained_below_a_limit() -> None:
    config = DrainRule(max_queued=0, max_wait_mins=90)
    now = datetime(2026, 11, 25, 12, tzinfo=UTC)

    def view(**metrics: object) -> FleetSnapshot:
        types = {GPU: RunnerTypeMetrics(queued=0, **metrics)}  # type: ignore[arg-type]
        return FleetSnapshot(at=now, source="prometheus", runner_types=types)

    assert is_drained(view(longest_wait_mins=45), config)
    # "Over 60 min" may be two hours: nobody knows it is under 90.
    assert not is_drained(view(longest_wait_mins=60, wait_over=True), config)
