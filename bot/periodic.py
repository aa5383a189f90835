"""The leader's periodic jobs, timed by APScheduler: an interval trigger per job with a little
jitter, no overlapping runs, coalesced misses; the weekly report on a cron trigger. Every job looks
only at what is due in Redis, so a new leader carries on where the last one stopped."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.domain.capacity import Schedule

log = logging.getLogger(__name__)

Tick = Callable[[], Awaitable[None]]

# A leader busy at the report's minute, or leading from within the hour after it, still posts it.
REPORT_GRACE_S = 3600
# A tenth of the interval: enough to spread the jobs' ticks, too little to be seen.
JITTER = 0.1


def _not_a_cancel(record: logging.LogRecord) -> bool:
    """APScheduler logs a job cancelled at shutdown (before `_ended_quietly` sees it) as "Error
    running job" with a traceback: a clean shutdown logs no error."""
    return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


logging.getLogger("apscheduler.executors.default").addFilter(_not_a_cancel)


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
    """When `schedule` fell due within `grace` before `now`, else None; by the trigger's own
    arithmetic (time zones, an hour the clocks repeat or skip), the one the scheduler runs."""
    due = _weekly_trigger(schedule).get_next_fire_time(None, now - grace)
    # As an instant: a time of an hour the clocks repeat compares unequal to every other zone's.
    return due.astimezone(UTC) if due is not None and due <= now else None


def _weekly_trigger(schedule: Schedule) -> CronTrigger:
    return CronTrigger(
        day_of_week=schedule.day,
        hour=schedule.hour,
        minute=schedule.minute,
        timezone=schedule.timezone,
    )


def _ended_quietly(name: str, tick: Tick) -> Tick:
    """A tick cancelled as the process stops loses nothing (ticks only read or fence-commit):
    not a failure to log."""

    async def run() -> None:
        try:
            await tick()
        except asyncio.CancelledError:
            log.debug("%s: stopped with the process", name)

    return run
