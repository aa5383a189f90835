"""A week of one runner type's jobs, simulated a minute at a time, with the truth known: every
job's wait, and when in the week it was waited. What a backend reads of it is the queue, the
runners and the maximum a step apart, as `TypeHistory` holds them.

The fleet is an ARC scale set: it wants its busy runners, one for each queued job and `MINIMUM`
warm ones on top, up to `MAXIMUM`; a runner wanted registers `BOOT_MINS` later, takes one job
and is gone when it ends. Jobs arrive evenly at a rate set by the UTC hour of the week: a quiet
base, busier weekday office hours (the fleet keeps up, jobs wait for runners to boot), and a
Tuesday afternoon surge beyond what the maximum serves (jobs wait for room).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.domain.reading.capacity import TypeHistory

STEP_S = 300
MAXIMUM = 20
MINIMUM = 2
JOB_MINS = 30
BOOT_MINS = 6
WEEK_MINS = 7 * 24 * 60
# Jobs a minute: the maximum serves MAXIMUM / JOB_MINS = 0.67.
QUIET, OFFICE, SURGE = 0.2, 0.5, 1.2
OFFICE_HOURS = range(9, 17)  # UTC, Monday to Friday
SURGE_DAY, SURGE_HOURS = 1, range(14, 16)  # Tuesday 14:00–16:00 UTC


def rate(minute: int) -> float:
    day, hour = divmod(minute // 60 % (7 * 24), 24)
    if day == SURGE_DAY and hour in SURGE_HOURS:
        return SURGE
    return OFFICE if day < 5 and hour in OFFICE_HOURS else QUIET


@dataclass
class Week:
    """The truth and what a backend reads of it."""

    start: datetime  # a Monday, 00:00 UTC
    waits_mins: list[int] = field(default_factory=list)  # every job's, arrived in the week
    by_hour_mins: list[float] = field(default_factory=lambda: [0.0] * 168)
    history: TypeHistory | None = None

    @property
    def job_hours(self) -> float:
        return sum(self.waits_mins) / 60


def simulated(start: datetime) -> Week:
    """The week from `start` (a Monday, 00:00 UTC); jobs still queued at its end are counted
    for the wait they had by then, as the queue's series counts them."""
    assert start.weekday() == 0 and start.hour == 0 and start.minute == 0, start
    week = Week(start)
    queue: deque[int] = deque()  # the minute each queued job arrived
    ready = 0  # registered runners, idle
    booting: list[int] = []  # the minute each wanted runner registers
    running: list[int] = []  # the minute each busy runner's job ends
    arrived = 0.0
    queued: dict[float, float] = {}
    level: dict[float, float] = {}
    for minute in range(WEEK_MINS):
        running = [end for end in running if end > minute]
        ready += sum(1 for at in booting if at <= minute)
        booting = [at for at in booting if at > minute]
        arrived += rate(minute)
        while arrived >= 1:
            queue.append(minute)
            arrived -= 1
        while ready and queue:
            week.waits_mins.append(minute - queue.popleft())
            running.append(minute + JOB_MINS)
            ready -= 1
        wanted = min(MAXIMUM, len(running) + len(queue) + MINIMUM)
        have = len(running) + ready + len(booting)
        booting += [minute + BOOT_MINS] * max(0, wanted - have)
        # Each job still queued waits this minute: the truth, hour by hour.
        week.by_hour_mins[minute // 60 % 168] += len(queue)
        if minute * 60 % STEP_S == 0:
            at = start.timestamp() + minute * 60
            queued[at] = float(len(queue))
            level[at] = float(len(running) + ready + len(booting))
    week.waits_mins += [WEEK_MINS - at for at in queue]
    maximum = dict.fromkeys(queued, float(MAXIMUM))
    week.history = TypeHistory(
        step_s=STEP_S, queued=queued, level=level, maximum=maximum, job_mins=JOB_MINS
    )
    return week


MONDAY = datetime(2026, 11, 16, tzinfo=UTC)
