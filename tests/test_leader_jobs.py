"""The replica's periodic jobs as an operator sees them: every tick runs again and again, never
two of one at once, and the weekly report posts once when the replica starts within the hour
after its time, not when the hour has passed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from bot import leader
from bot.domain.reading.capacity import DAYS, Schedule, parse_schedule
from tests.support.running import eventually


def _weekly_at(moment: datetime) -> Schedule:
    return Schedule(DAYS[moment.weekday()], moment.hour, moment.minute, "UTC")


async def test_every_tick_runs_repeatedly_and_never_overlaps_itself(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs = {"status": 0, "silence": 0}
    running = {"status": 0}
    most = {"status": 0}

    async def status() -> None:
        running["status"] += 1
        most["status"] = max(most["status"], running["status"])
        await asyncio.sleep(0.08)  # longer than the interval: the next run must wait for it
        running["status"] -= 1
        runs["status"] += 1

    async def silence() -> None:
        runs["silence"] += 1

    scheduler = leader.start({"status": status, "silence": silence}, every_s=0.02)
    try:
        await eventually(lambda: runs["status"] >= 3 and runs["silence"] >= 3, what="3 runs each")
    finally:
        scheduler.shutdown(wait=False)
    assert most["status"] == 1
    # A tick that fell while the last run worked was skipped by design: no warning says so.
    assert not [r for r in caplog.records if "running instances" in r.getMessage()]


async def test_a_tick_cut_short_by_the_process_stopping_ends_without_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A tick in flight when the event loop stops is cancelled; APScheduler would log that as a
    # failed job with a traceback, at every stop that catches a tick mid-way.
    started = asyncio.Event()

    async def tick() -> None:
        started.set()
        await asyncio.Event().wait()

    scheduler = leader.start({"status-tick": tick}, every_s=0.02)
    await started.wait()
    scheduler.shutdown(wait=False)
    running = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in running:  # as the event loop's end cancels them
        task.cancel()
    await asyncio.wait(running)
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert not any(r.exc_info for r in caplog.records)


async def test_a_replica_started_within_the_hour_after_the_report_posts_it_at_once() -> None:
    posted: list[datetime] = []

    async def post() -> None:
        posted.append(datetime.now(UTC))

    due = datetime.now(UTC) - timedelta(minutes=10)
    weekly = (_weekly_at(due), post)
    scheduler = leader.start({}, every_s=60, weekly=weekly)
    try:
        await eventually(lambda: len(posted) == 1, what="the report posted")
        job = scheduler.get_job("capacity-report")
        assert job.next_run_time - datetime.now(UTC) > timedelta(days=6), "then next week"
    finally:
        scheduler.shutdown(wait=False)


async def test_a_replica_started_after_the_hour_waits_for_next_week() -> None:
    posted: list[datetime] = []

    async def post() -> None:
        posted.append(datetime.now(UTC))

    due = datetime.now(UTC) - timedelta(minutes=90)
    scheduler = leader.start({}, every_s=60, weekly=(_weekly_at(due), post))
    try:
        job = scheduler.get_job("capacity-report")
        assert job.next_run_time - datetime.now(UTC) > timedelta(days=6), "no catch-up run"
        assert [j.id for j in scheduler.get_jobs()] == ["capacity-report"]
    finally:
        scheduler.shutdown(wait=False)


@pytest.mark.parametrize(
    ("schedule", "now", "due"),
    [
        # Monday 09:00 London, asked at 09:05 that Monday (GMT): that morning.
        ("mon 09:00 Europe/London", "2026-11-23T09:05:00+00:00", "2026-11-23T09:00:00+00:00"),
        # Asked a minute before: the Monday before.
        ("mon 09:00 Europe/London", "2026-11-23T08:59:00+00:00", "2026-11-16T09:00:00+00:00"),
        # In summer time 09:00 London is 08:00 UTC.
        ("mon 09:00 Europe/London", "2026-06-29T08:30:00+00:00", "2026-06-29T08:00:00+00:00"),
        # Friday 16:30 in Los Angeles is Saturday 00:30 UTC.
        ("fri 16:30 America/Los_Angeles", "2026-11-28T01:00:00+00:00", "2026-11-28T00:30:00+00:00"),
        ("sun 23:59", "2026-11-25T12:00:00+00:00", "2026-11-22T23:59:00+00:00"),
        # The clocks go back in London at 02:00 BST on 25 October 2026: 01:45 comes twice, first
        # at 00:45 UTC. Asked at 01:10 UTC (01:10 GMT, the hour again) it was due 25 min ago.
        ("sun 01:45 Europe/London", "2026-10-25T01:10:00+00:00", "2026-10-25T00:45:00+00:00"),
        # And in New York on 1 November 2026 (01:30 EDT is 05:30 UTC).
        ("sun 01:30 America/New_York", "2026-11-01T06:10:00+00:00", "2026-11-01T05:30:00+00:00"),
        # Spring forward in London, 29 March 2026: 01:30 does not exist; it is taken as 02:30 BST.
        ("sun 01:30 Europe/London", "2026-03-29T02:00:00+00:00", "2026-03-29T01:30:00+00:00"),
    ],
)
def test_the_time_a_schedule_fell_due_across_time_zones_and_clock_changes(
    schedule: str, now: str, due: str
) -> None:
    parsed = parse_schedule(schedule)
    assert parsed is not None
    at = leader.due_since(parsed, datetime.fromisoformat(now), timedelta(days=7))
    assert at == datetime.fromisoformat(due)


@pytest.mark.parametrize(
    ("now", "posts"),
    [
        ("2026-11-23T09:05:00+00:00", True),  # a deploy five minutes after
        ("2026-11-23T09:59:59+00:00", True),
        ("2026-11-23T10:00:01+00:00", False),  # over an hour after: the week is left alone
        ("2026-11-23T08:59:00+00:00", False),  # before it: the scheduler will fire
        ("2026-11-25T09:05:00+00:00", False),  # a restart on Wednesday
    ],
)
def test_a_replica_starting_within_the_hour_after_the_schedule_posts_it(
    now: str, posts: bool
) -> None:
    schedule = Schedule("mon", 9, 0, "Europe/London")
    at = datetime.fromisoformat(now)
    due = leader.due_since(schedule, at, timedelta(seconds=leader.REPORT_GRACE_S))
    assert (due is not None) is posts


async def test_a_shutdown_as_a_tick_starts_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    """The executor cancels what it has started when it shuts down, a tick that has not taken
    its first step among them; that is a clean stop, not an error to page an operator for.
    Shut down at many moments around the ticks' starts (without the filter, about one in
    ten logged "Error running job")."""

    async def tick() -> None:
        await asyncio.sleep(0)

    for moment in range(1, 30):
        for yields in range(4):
            scheduler = leader.start({"tick": tick}, every_s=0.001)
            await asyncio.sleep(0.001 * moment)
            for _ in range(yields):
                await asyncio.sleep(0)
            scheduler.shutdown(wait=False)
            # The cancelled ticks ended, and their done-callbacks (which log) with them.
            await eventually(_others_done, what="the cancelled ticks ended")
            await asyncio.sleep(0)  # their done-callbacks, scheduled as they ended, run
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def _others_done() -> bool:
    me = asyncio.current_task()
    return all(task.done() for task in asyncio.all_tasks() if task is not me)
