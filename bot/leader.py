"""One active replica: campaign for the lead, do the work while leading, stop when it is lost. A
leader that cannot renew keeps working until the TTL it last renewed would run out, then stops; a
free lease is taken at once, so a dead leader is replaced within one TTL."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress

from redis.exceptions import RedisError

from bot.storage.leader import Leadership
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

# The leader's work: run until the event is set, then stop (returning; never raising for it).
Work = Callable[[asyncio.Event], Awaitable[None]]

# How long the work has, once the lead is lost or the process stops, to finish what it is doing.
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
        # Still holding the lease (shutting down, or the work ended): the work finishes what it
        # is doing while the lease is renewed, its commits still the leader's, and only then is
        # the lead given up.
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
        # The lease runs from when Redis renewed it, which is after the renewal was asked for:
        # counting from the asking errs on the side of stopping early, and a renewal that hangs
        # is given up when the lease it would extend runs out.
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
            # Keep working until the lease it last renewed runs out: until then nobody else
            # can lead, and the fenced writes fail on their own if Redis stays away.
            if loop.time() - renewed >= ttl_s:
                log.warning("leader: cannot renew the lease (%r); stepping down", exc)
                return False
    return True


async def _stopped(task: asyncio.Task[None]) -> None:
    """Wait for the work to stop on its own, then cancel what is left of it."""
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
