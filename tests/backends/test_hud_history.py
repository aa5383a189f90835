"""The capacity report's history from the `hud` backend: HUD's `queue_times_historical` query
(each machine type's longest wait, hour by hour) from a local HUD that runs the query's SQL over
its own table, and `/queue report` reading it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.actions.commands import run_command
from bot.actions.core import Actor
from bot.backends.http import BackendError
from bot.backends.metrics.hud import HudMetrics, history_rows
from bot.config import Settings
from bot.domain.reading.early_warning import Thresholds
from bot.storage.incident_store import IncidentStore
from sandbox.serve import RunningServer, serve_in_thread
from tests.support.cores import action_core
from tests.support.fakes.hud_api import FakeHud
from tests.support.incidents import keep_resolved

END = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
START = END - timedelta(days=7)
GPU, CPU = "linux.g5.4xlarge.nvidia.gpu", "linux.2xlarge"


def table() -> list[dict[str, Any]]:
    """A sample every 10 minutes for a week: the GPU queue's longest wait is 45 min from 09:00
    to 15:00 on two days (12 hours), 30 s otherwise; the 2xlarge's 30 s, but its samples at
    03:00 come from fewer than 5 jobs (the query leaves those hours out)."""
    rows = []
    at = START - timedelta(hours=2)  # before the window: not in the answer
    while at < END + timedelta(hours=1):
        day, hour = (at - START).days, at.hour
        slow = day in (2, 5) and 9 <= hour < 15
        rows.append(
            {"time": at, "machine_type": GPU, "avg_queue_s": 2700 if slow else 30, "count": 20}
        )
        rows.append(
            {"time": at, "machine_type": CPU, "avg_queue_s": 30, "count": 2 if hour == 3 else 40}
        )
        at += timedelta(minutes=10)
    return rows


@pytest.fixture
def hud() -> Iterator[tuple[FakeHud, RunningServer]]:
    fake = FakeHud(history=table())
    server = serve_in_thread(fake.app)
    try:
        yield fake, server
    finally:
        server.stop()


def backend(server: RunningServer) -> HudMetrics:
    return HudMetrics(Settings(hud_url=server.url, hud_token="hud-bot-token"))


async def test_a_week_of_hourly_longest_waits(hud: tuple[FakeHud, RunningServer]) -> None:
    fake, server = hud
    metrics = backend(server)
    try:
        kept = await metrics.history(start=START, end=END)
    finally:
        await metrics.aclose()
    # Asked as HUD's own pages ask: hourly buckets of the window, times in UTC.
    assert fake.asked[-1] == (
        "queue_times_historical",
        {
            "granularity": "hour",
            "startTime": "2026-11-17T09:00:00.000",
            "stopTime": "2026-11-24T09:00:00.000",
        },
    )
    gpu, cpu = kept.types[GPU], kept.types[CPU]
    assert kept.note == "" and gpu.step_s == 3600
    assert len(gpu.wait_mins) == 7 * 24  # every hour of the window, none outside it
    assert len(cpu.wait_mins) == 7 * 23  # the 03:00 hours had too few jobs
    assert gpu.hours_over(Thresholds(wait_mins=30)) == 12
    assert cpu.hours_over(Thresholds(wait_mins=30)) == 0
    # HUD keeps no queue sizes or maximums: those stay unknown, not zero.
    assert gpu.hours_over(Thresholds(queued=10)) is None
    assert gpu.hours_at_max is None and gpu.wait_p50_mins is None


async def test_queue_report_from_the_huds_history(
    hud: tuple[FakeHud, RunningServer], redis: Redis
) -> None:
    _, server = hud
    store = IncidentStore(redis, "qp")
    # The one alert of the week: its rule states its thresholds (10 queued, a 30-minute wait),
    # and the GPU's history shows the hours over them, alerted or not.
    started = START + timedelta(days=2, hours=9, minutes=30)
    await keep_resolved(store, 1, started, 5, GPU, thresholds=(10, 30))
    metrics = backend(server)
    core = action_core(redis, store, metrics=metrics, clock=lambda: END)
    try:
        outcome = await run_command(core, Actor("U1", "al"), "report")
    finally:
        await metrics.aclose()
    text = outcome.message
    line = next(x for x in text.splitlines() if x.startswith(f"• *{GPU}*"))
    assert line.startswith(f"• *{GPU}*: 1 incident · 5 h firing · 12 h over the thresholds")
    # HUD keeps no queue times per job and no maximums: not shown, and the footer says what
    # its history gave.
    assert "queue time" not in line and "at the maximum" not in line
    assert "hours over the alert's thresholds from the HUD's history" in text
    assert CPU not in text  # never over the thresholds


async def test_a_hud_that_refuses_leaves_the_report_its_incidents_and_says_why(
    redis: Redis,
) -> None:
    server = serve_in_thread(FakeHud(history=table()).app)
    store = IncidentStore(redis, "qp")
    await keep_resolved(store, 1, START + timedelta(days=2, hours=9), 5, GPU)
    metrics = HudMetrics(
        Settings(hud_url=server.url, hud_token="wrong-token")
    )  # Vercel's challenge
    core = action_core(redis, store, metrics=metrics, clock=lambda: END)
    try:
        with pytest.raises(BackendError, match="403"):
            await metrics.history(start=START, end=END)
        outcome = await run_command(core, Actor("U1", "al"), "report")
    finally:
        await metrics.aclose()
        server.stop()
    assert outcome.ok and f"• *{GPU}*: 1 incident · 5 h firing" in outcome.message
    assert "the HUD could not say: The HUD answered 403" in outcome.message


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["granularity_bucket", "avg_queue_s", "machine_type", "x"]),
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=25),
            max_size=4,
        ),
        max_size=6,
    )
    | st.none()
    | st.text(max_size=5)
)
def test_any_history_rows_give_waits_or_a_count_of_left_out_rows(rows: Any) -> None:
    try:
        types, skipped = history_rows(rows)
    except BackendError:
        assert not isinstance(rows, list)
        return
    assert skipped + sum(len(t.wait_mins) for t in types.values()) <= len(rows)
    for history in types.values():
        assert all(w >= 0 for w in history.wait_mins.values())
