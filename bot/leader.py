"""One active replica: campaign for the lead, work while leading, stop when it is lost. A leader
that cannot renew works until the TTL it last renewed runs out; a free lease is taken at once,
so a dead leader is replaced within one TTL. Its periodic jobs are timed by APScheduler and look
only at what is due in Redis, so a new leader carries on where the last one stopped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from redis.exceptions import RedisError

from bot.domain.reading.capacity import Schedule
from bot.storage.leases import Leadership
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

# The leader's work: run until the event is set, then stop (returning; never raising for it).
Work = Callable[[asyncio.Event], Awaitable[None]]

# How long the work has to finish once the lead is lost or the process stops.
STOP_WORK_S = 10.0


async def campaign(
    leadership: Leadership, work: Work, telemetry: Telemetry, stop: asyncio.Event
) -> None:
    """Lead whenever the lease is free, until `stop`; give the lease up on the way out."""
    while not stop.is_set():
        try:
            leads = await leadership.take()
        except RedisError as exc:
            log.warning("leader: cannot reach Redis to campaign (%s)", exc)
            leads = False
        if leads:
            await _lead(leadership, work, telemetry, stop)
        else:
            await _wait_any(leadership.ttl_ms / 5000, stop)
    with suppress(RedisError, OSError):
        await leadership.resign()


async def _lead(
    leadership: Leadership, work: Work, telemetry: Telemetry, stop: asyncio.Event
) -> None:
    log.info("leader: %s leads (lease %s)", leadership.name, leadership.fence.held)
    telemetry.leader.set(1)
    deposed = asyncio.Event()
    task = asyncio.create_task(work(deposed), name="leader-work")
    lost = True  # the lease lost, refused or lapsed: stop writing at once, then stop the work
    try:
        lost = not await _hold(leadership, task, stop)
    finally:
        # Still holding the lease: the work finishes while the lease is renewed, its commits
        # still the leader's, and only then is the lead given up.
        if lost:
            leadership.step_down()
            telemetry.leader.set(0)
        deposed.set()
        renewing = None if lost else asyncio.create_task(_hold(leadership, task, asyncio.Event()))
        await _stopped(task)
        if renewing is not None:
            await asyncio.gather(renewing, return_exceptions=True)
        leadership.step_down()
        telemetry.leader.set(0)
        if not stop.is_set():
            # Its work may have ended on its own (a bug): let another replica try.
            with suppress(RedisError, OSError):
                await leadership.resign()


async def _hold(leadership: Leadership, task: asyncio.Task[None], stop: asyncio.Event) -> bool:
    """Renew the lease until the process stops or the work ends (True), or it is lost (False)."""
    loop = asyncio.get_running_loop()
    ttl_s, name, refused = leadership.ttl_ms / 1000, leadership.name, leadership.fence.refused
    renewed = loop.time()
    while not stop.is_set() and not task.done():
        await _wait_any(ttl_s / 3, stop, refused, task=task)
        if refused.is_set():
            log.warning("leader: %s was refused a write: it no longer leads", name)
            return False
        if stop.is_set() or task.done():
            return True
        # Counted from the asking, before Redis renewed: errs on stopping early; a renewal that
        # hangs is given up when the lease it would extend runs out.
        asked = loop.time()
        left = renewed + ttl_s - asked
        if left <= 0:  # stalled (paused, starved) past it: another may lead by now
            log.warning("leader: %s lost the lease while stalled; stepping down", name)
            return False
        try:
            if not await asyncio.wait_for(leadership.renew(), timeout=left):
                log.warning("leader: %s lost the lease; stepping down", name)
                return False
            renewed = asked
        except (RedisError, TimeoutError) as exc:
            # Until the lease runs out nobody else can lead, and fenced writes fail on their own.
            if loop.time() - renewed >= ttl_s:
                log.warning("leader: cannot renew the lease (%r); stepping down", exc)
                return False
    return True


async def _stopped(task: asyncio.Task[None]) -> None:
    done, _ = await asyncio.wait({task}, timeout=STOP_WORK_S)
    if not done:
        task.cancel()
    (outcome,) = await asyncio.gather(task, return_exceptions=True)
    if isinstance(outcome, Exception):
        log.error("leader: the work failed: %r", outcome)


async def _wait_any(
    seconds: float, *events: asyncio.Event, task: asyncio.Task[None] | None = None
) -> None:
    waits = {asyncio.create_task(event.wait()) for event in events}
    try:
        done = {task} if task is not None else set()
        await asyncio.wait(waits | done, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


Tick = Callable[[], Awaitable[None]]

# A leader busy at the report's minute, or leading from within the hour after it, still posts it.
REPORT_GRACE_S = 3600
# A tenth of the interval: enough to spread the jobs' ticks, too little to be seen.
JITTER = 0.1


def _not_noise(record: logging.LogRecord) -> bool:
    """APScheduler logs a job cancelled at shutdown as "Error running job", and a tick skipped
    while the last run still works (`max_instances=1`: by design, the run under way or the next
    looks at its work) as a warning: neither is one."""
    cancelled = record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError)
    skipped = "maximum number of running instances reached" in record.getMessage()
    return not (cancelled or skipped)


for _logger in ("apscheduler.executors.default", "apscheduler.scheduler"):
    logging.getLogger(_logger).addFilter(_not_noise)


def start(
    ticks: dict[str, Tick], *, every_s: float, weekly: tuple[Schedule, Tick] | None = None
) -> AsyncIOScheduler:
    scheduler = AsyncIOScheduler()
    for name, tick in ticks.items():
        scheduler.add_job(
            _ended_quietly(name, tick),
            IntervalTrigger(seconds=every_s, jitter=every_s * JITTER),
            id=name,
            name=name,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
    if weekly is not None:
        schedule, post = weekly
        # Started within the hour after the report fell due: its first run is that one.
        due = due_since(schedule, datetime.now(UTC), timedelta(seconds=REPORT_GRACE_S))
        scheduler.add_job(
            _ended_quietly("capacity-report", post),
            _weekly_trigger(schedule),
            id="capacity-report",
            name="capacity-report",
            coalesce=True,
            misfire_grace_time=REPORT_GRACE_S,
            **({"next_run_time": due} if due is not None else {}),
        )
    scheduler.start()
    return scheduler


def due_since(schedule: Schedule, now: datetime, grace: timedelta) -> datetime | None:
    """When `schedule` fell due within `grace` before `now`, else None, by the trigger's own
    arithmetic (time zones, hours the clocks repeat or skip)."""
    due = _weekly_trigger(schedule).get_next_fire_time(None, now - grace)
    # As an instant: a time of an hour the clocks repeat compares unequal to every other zone's.
    return due.astimezone(UTC) if due is not None and due <= now else None


def _weekly_trigger(at: Schedule) -> CronTrigger:
    return CronTrigger(day_of_week=at.day, hour=at.hour, minute=at.minute, timezone=at.timezone)


def _ended_quietly(name: str, tick: Tick) -> Tick:
    """A tick cancelled as the process stops loses nothing (ticks only read or fence-commit)."""

    async def run() -> None:
        try:
            await tick()
        except asyncio.CancelledError:
            log.debug("%s: stopped with the process", name)

    return run
