"""The capacity report's history from a real `prometheus` holding a backfilled week of two ARC
listeners (`tests.support.fakes.arc_week`), through `/query_range` and the startup histogram."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.actions.commands import run_command
from bot.actions.core import Actor
from bot.backends.http import BackendError
from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.backends.metrics.promql import parse_matrix, step_s
from bot.config import Settings
from bot.domain.reading.early_warning import Thresholds
from bot.domain.reading.fleet import OomKill
from bot.storage.fleet import OomKillRecord
from bot.storage.incident_store import IncidentStore
from sandbox.redis_server import free_port
from tests.support.cores import action_core
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING
from tests.support.fakes.arc_week import (
    BURSTS,
    DAY,
    HOUR,
    PENDING_PODS,
    UNSCHEDULABLE_BURSTS,
    expected_p90_s,
    node_kills,
    week,
)
from tests.support.incidents import keep_resolved
from tests.support.servers import Prometheus

ALERT = Thresholds(queued=10, wait_mins=30)


@dataclass(frozen=True)
class Week:
    url: str
    start: datetime
    end: datetime


@pytest.fixture(scope="module")
def seeded() -> Iterator[Week]:
    end = int(time.time()) // HOUR * HOUR
    start = end - 7 * DAY
    prometheus = Prometheus(targets=[])
    try:
        prometheus.backfill(week(start, end))
        prometheus.start()
        yield Week(
            prometheus.url, datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
        )
    finally:
        prometheus.stop()


def metrics(url: str, **queries: str) -> PrometheusMetrics:
    return PrometheusMetrics(
        Settings(prometheus_url=url, prometheus_rate_window="10m", prometheus_queries=queries)
    )


async def test_a_week_of_queueing_at_the_maximum_and_the_queue_time(seeded: Week) -> None:
    backend = metrics(seeded.url)
    try:
        kept = await backend.history(start=seeded.start, end=seeded.end)
    finally:
        await backend.aclose()
    assert kept.note == ""
    found = kept.types
    # The listener recreated mid-week under a new suffix is still one runner type.
    assert sorted(found) == [HEALTHY, QUEUEING]
    queueing, healthy = found[QUEUEING], found[HEALTHY]
    step_h = queueing.step_s / 3600
    # Three 6-hour bursts with 15 queued (and waits of 40 min; the wait's 10-minute rate window
    # trails each burst by up to one step more).
    over = queueing.hours_over(ALERT)
    assert over is not None and 18 - step_h <= over <= 18 + 3 * (10 / 60 + step_h)
    # The bursts, and two 4-hour stretches at the maximum without a queue.
    assert queueing.hours_at_max is not None and abs(queueing.hours_at_max - 26) <= 2 * step_h
    assert queueing.peak_queued == 15
    # The wait alone crosses its threshold in the bursts: its series is minutes, not bucket rates.
    by_wait = queueing.hours_over(Thresholds(wait_mins=30))
    assert by_wait is not None and 18 - step_h <= by_wait <= 18 + 3 * (10 / 60 + step_h)
    assert 30 < max(queueing.wait_mins.values()) <= 60
    assert queueing.wait_p90_mins is not None and queueing.wait_p50_mins is not None
    p90 = expected_p90_s(int(seeded.start.timestamp()), int(seeded.end.timestamp())) / 60
    assert abs(queueing.wait_p90_mins - p90) <= 0.02 * p90, (queueing.wait_p90_mins, p90)
    assert queueing.wait_p50_mins < 5 / 60  # most jobs started within 5 s
    assert healthy.hours_over(ALERT) == 0 and healthy.hours_at_max == 0
    assert healthy.wait_p90_mins is not None and healthy.wait_p90_mins <= 5 / 60
    assert queueing.job_mins == pytest.approx(30) and healthy.job_mins == pytest.approx(30)


async def test_a_weeks_runner_pods_pending_in_pod_minutes_the_longest_and_hours_unschedulable(
    seeded: Week,
) -> None:
    """Three 6-hour bursts with 4 runner pods Pending (kube-state-metrics), the first with no
    node fitting them: what the weekly report says of them, from the reading's own queries."""
    backend = metrics(seeded.url)
    try:
        kept = await backend.history(start=seeded.start, end=seeded.end)
    finally:
        await backend.aclose()
    queueing, healthy = kept.types[QUEUEING], kept.types[HEALTHY]
    assert kept.note == ""
    step_mins = queueing.step_s / 60  # read a step apart: each number within a step
    expected = len(BURSTS) * 6 * 60 * PENDING_PODS
    assert queueing.pending_pod_mins == pytest.approx(expected, rel=0.03)
    assert queueing.pending_longest_mins == pytest.approx(6 * 60, abs=step_mins)
    unschedulable = 6 * len(UNSCHEDULABLE_BURSTS)
    assert queueing.unschedulable_hours == pytest.approx(unschedulable, abs=2 * step_mins / 60)
    # Not known where its pods have no series: nothing said, no zero.
    assert healthy.pending_pod_mins is None and healthy.unschedulable_hours is None
    # The kills ARC's deleted pods leave only on their node, an hour apart while bursting.
    kills = node_kills(seeded.start.timestamp(), seeded.end.timestamp())
    assert kills == 18 and queueing.node_oom_kills == pytest.approx(kills, abs=1)


async def test_the_history_is_named_for_the_runner_types_the_alerts_use(seeded: Week) -> None:
    """The queueing set serves `linux.2xlarge` (RUNNER_SCALE_SETS), the recreated listener's two
    runner-set names included; the healthy one serves no type the bot knows."""
    config = Settings(
        prometheus_url=seeded.url,
        prometheus_rate_window="10m",
        runner_scale_sets={"linux.2xlarge": QUEUEING},
    )
    backend = PrometheusMetrics(config)
    try:
        kept = await backend.history(start=seeded.start, end=seeded.end)
    finally:
        await backend.aclose()
    assert set(kept.types) == {HEALTHY, "linux.2xlarge"}
    typed = kept.types["linux.2xlarge"]
    assert typed.peak_queued == 15 and typed.wait_p90_mins is not None
    assert typed.job_mins == pytest.approx(30)


async def test_queue_report_over_a_seeded_week_of_incidents_and_prometheus_history(
    seeded: Week, redis: Redis
) -> None:
    store = IncidentStore(redis, "qp")
    for n, day in enumerate((1, 3), 1):  # two of the three bursts alerted
        started = seeded.start + timedelta(days=day, hours=9, minutes=20)
        await keep_resolved(store, n, started, 5.5, QUEUEING, thresholds=(10, 30))
    # The readings saw 3 of its runner pods OOMKilled (one before the week, not reported).
    kills = OomKillRecord(redis, store.keys)
    seen = [(-8, "pull"), (-2, "pull"), (-1, "trunk"), (-1, "")]
    for days, workflow in seen:
        kill = OomKill(QUEUEING, f"{QUEUEING}-x7q2k-runner-k{days}{workflow}", "u1", workflow)
        await kills.record([kill], now=seeded.end + timedelta(days=days))
    backend = metrics(seeded.url)
    core = action_core(redis, store, metrics=backend, clock=lambda: seeded.end)
    try:
        outcome = await run_command(core, Actor("U1", "al"), "report")
    finally:
        await backend.aclose()
    text = outcome.message
    line = next(x for x in text.splitlines() if x.startswith(f"• *{QUEUEING}*"))
    assert "2 incidents · 11 h firing" in line
    assert "over the thresholds" in line and "at the maximum" in line
    assert "queue time p50 4 s, p90 34 min" in line
    # Its runner pods: 4 Pending through each 6-hour burst (72 pod-hours, read a step apart),
    # unschedulable in the first once older than a node takes to come up.
    pods = re.search(
        r"runner pods Pending (\d+) pod-hours, the longest 6 h, ([\d.]+) h unsch", line
    )
    assert pods is not None, line
    assert 70 <= int(pods[1]) <= 74 and 5.8 <= float(pods[2]) <= 6.1, line
    # The nodes' 18 kills, of which the readings caught 3 pods and named the workflows of two.
    assert "18 OOM kills (pull 1, trunk 1)" in line, line
    # Hours at the maximum make the case; the size comes from the history's maximum and peak.
    # 15 queued at the peak, 30-minute jobs: 15 more runners drain it in 30 minutes.
    assert "at its maximum 26 h, 2 incidents, 11.0 h firing: raise maxRunners 20 → 35" in text
    # The queue's 15 jobs through three 6-hour bursts, all at the maximum: 270 job-hours, read a
    # step apart; the raise of 15 runners serves all 15 at every step.
    waited = re.search(r"(\d+) job-hours waited, 100% at the maximum", line)
    assert waited is not None and 265 <= int(waited[1]) <= 275, line
    covered = f"would have covered ~100% of the {waited[1]} job-hours waited, if each runner added"
    assert covered in text, text
    assert f"{waited[1]} job-hours waited in all" in text
    assert "the busiest hour of the week" in text
    # A type with no incident shows only when its history was over the thresholds or at max.
    assert HEALTHY not in text
    assert "from Prometheus's history" in text


async def test_without_prometheus_the_report_still_answers_and_says_why(redis: Redis) -> None:
    store = IncidentStore(redis, "qp")
    await keep_resolved(store, 1, datetime.now(UTC) - timedelta(days=1), 3, QUEUEING)
    backend = metrics(f"http://127.0.0.1:{free_port()}")
    core = action_core(redis, store, metrics=backend, clock=lambda: datetime.now(UTC))
    try:
        outcome = await run_command(core, Actor("U1", "al"), "report")
    finally:
        await backend.aclose()
    assert outcome.ok
    assert f"• *{QUEUEING}*: 1 incident · 3 h firing" in outcome.message
    assert "Prometheus could not say: Prometheus is unreachable" in outcome.message


async def test_a_query_prometheus_refuses_leaves_its_numbers_out_and_says_so(
    seeded: Week, redis: Redis
) -> None:
    store = IncidentStore(redis, "qp")
    backend = metrics(seeded.url, maximum="max by (name) (gha_max_runners")  # unbalanced
    try:
        kept = await backend.history(start=seeded.start, end=seeded.end)
        core = action_core(redis, store, metrics=backend, clock=lambda: seeded.end)
        outcome = await run_command(core, Actor("U1", "al"), "report")
    finally:
        await backend.aclose()
    assert kept.note == "Prometheus could not answer for the maximum"
    assert kept.types[QUEUEING].hours_at_max is None and kept.types[QUEUEING].peak_queued == 15
    assert "from Prometheus's history (Prometheus could not answer for the maximum)." in (
        outcome.message
    )


def test_the_step_keeps_every_series_under_prometheus_limit() -> None:
    end = datetime(2026, 11, 24, tzinfo=UTC)
    for days in (1, 7, 30, 90):
        step = step_s(end - timedelta(days=days), end)
        assert step % 60 == 0 and days * DAY / step <= 2000


JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(
    st.fixed_dictionaries(
        {"status": st.sampled_from(["success", "error"]), "data": JSON},
        optional={"error": JSON},
    )
    | st.fixed_dictionaries(
        {
            "status": st.just("success"),
            "data": st.fixed_dictionaries(
                {"resultType": st.just("matrix"), "result": st.lists(JSON, max_size=4)}
            ),
        }
    )
)
def test_any_answer_is_series_or_a_backend_error(body: dict[str, Any]) -> None:
    try:
        series = parse_matrix(body)
    except BackendError:
        return
    for labels, samples in series:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        assert all(isinstance(at, float) and isinstance(v, float) for at, v in samples.items())


@pytest.fixture(scope="module")
def same_target() -> Iterator[Week]:
    """The queueing type's listener recreated mid-week under a new runner-set suffix but scraped
    at the same address (a Service, or a pod address given again): one target served two names
    in the week, and its job counters started again from zero."""
    end = int(time.time()) // HOUR * HOUR
    start = end - 7 * DAY
    prometheus = Prometheus(targets=[])
    try:
        prometheus.backfill(week(start, end).replace("10.0.0.7:8080", "10.0.0.1:8080"))
        prometheus.start()
        yield Week(
            prometheus.url, datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
        )
    finally:
        prometheus.stop()


async def test_a_listener_recreated_at_the_same_address_keeps_its_queue_time(
    same_target: Week,
) -> None:
    backend = metrics(same_target.url)
    try:
        kept = await backend.history(start=same_target.start, end=same_target.end)
    finally:
        await backend.aclose()
    # The window's numbers join every target the week knew: one target, two names, a counter
    # that started again. (The longest-wait series joins each step's own gauges as the live
    # reading does; a backfill has no staleness markers, so its overlap is not judged here.)
    unanswered = [n for n in ("queue time p50", "queue time p90", "job duration") if n in kept.note]
    assert not unanswered, kept.note
    queueing = kept.types[QUEUEING]
    p90 = expected_p90_s(int(same_target.start.timestamp()), int(same_target.end.timestamp()))
    assert queueing.wait_p90_mins is not None
    assert abs(queueing.wait_p90_mins - p90 / 60) <= 0.02 * p90 / 60
    assert queueing.job_mins == pytest.approx(30, rel=0.02)
