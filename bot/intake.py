"""The stream consumer: an accepted notification becomes an incident change, then a Slack thread.

Each replica runs one consumer in the shared group. An entry is acknowledged only once the
incident reflects it; failures that may pass (Slack 429/5xx, a busy group lease) leave the entry
pending, and after `reclaim_idle_ms` any replica takes it over. Entries that can never succeed,
or failed `max_attempts` times, go to a dead-letter stream instead of blocking the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta

from redis.exceptions import RedisError

from bot.alert_facts import facts_of
from bot.alerts import AlertFacts, Notification, PayloadError, parse_json_body, parse_notification
from bot.incidents import (
    Change,
    Event,
    Incident,
    apply_notification,
    entry_order,
    is_reopenable,
    open_incident,
)
from bot.leases import LeaseBusy, Leases
from bot.messages import render_event, render_summary
from bot.slack import SlackError
from bot.store import Commit, IncidentStore
from bot.stream import NotificationStream, StreamEntry
from bot.telemetry import Telemetry
from bot.threads import Threads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IntakeConfig:
    consumer: str
    status_interval_s: int = 600
    reopen_window_s: int = 3600
    reclaim_idle_ms: int = 30_000
    max_attempts: int = 10
    max_in_flight: int = 16


def group_hash(notification: Notification) -> str:
    """A fixed-length key for an alert group; group keys can be long and hold any character."""
    raw = f"{notification.source}\0{notification.group_key}".encode()
    return hashlib.sha256(raw).hexdigest()[:24]


class Intake:
    def __init__(
        self,
        stream: NotificationStream,
        store: IncidentStore,
        leases: Leases,
        threads: Threads,
        telemetry: Telemetry,
        *,
        config: IntakeConfig,
        clock: Callable[[], datetime],
    ) -> None:
        self._stream = stream
        self._store = store
        self._leases = leases
        self._threads = threads
        self._telemetry = telemetry
        self._config = config
        self._clock = clock
        self._in_flight: dict[str, asyncio.Task[None]] = {}

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set, riding out Redis outages with a capped backoff.

        Entries are handled concurrently (up to `max_in_flight`), so a group whose lease is
        busy, or a Slack `Retry-After`, holds up only its own notifications.
        """
        backoff = 0.1
        loop = asyncio.get_running_loop()
        next_reclaim = 0.0
        try:
            while not stop.is_set():
                try:
                    if loop.time() >= next_reclaim:
                        await self._stream.ensure_group()
                        await self._reclaim()
                        next_reclaim = loop.time() + min(self._config.reclaim_idle_ms / 2000, 5.0)
                    await self._read_more()
                    backoff = 0.1
                except RedisError as exc:
                    log.warning("intake: Redis unavailable (%s); retrying in %.1fs", exc, backoff)
                    await _sleep_or_stop(stop, backoff)
                    backoff = min(backoff * 2, 2.0)
                    next_reclaim = 0.0
                except Exception:
                    log.exception("intake: unexpected failure; retrying in %.1fs", backoff)
                    await _sleep_or_stop(stop, backoff)
                    backoff = min(backoff * 2, 2.0)
        finally:
            await asyncio.gather(*self._in_flight.values(), return_exceptions=True)

    async def _read_more(self) -> None:
        free = self._config.max_in_flight - len(self._in_flight)
        if free <= 0:
            await asyncio.wait(self._in_flight.values(), return_when=asyncio.FIRST_COMPLETED)
            return
        for entry in await self._stream.read(self._config.consumer, count=free, block_ms=500):
            self._start(entry)
        self._telemetry.intake_backlog.set(await self._stream.backlog())

    def _start(self, entry: StreamEntry) -> None:
        task = asyncio.create_task(self.handle(entry), name=f"intake:{entry.id}")
        self._in_flight[entry.id] = task
        task.add_done_callback(lambda _: self._in_flight.pop(entry.id, None))

    async def _reclaim(self) -> None:
        entries = await self._stream.reclaim(
            self._config.consumer, min_idle_ms=self._config.reclaim_idle_ms
        )
        for entry in entries:
            if entry.id in self._in_flight:
                continue  # idle only because its handler waits (a lease, a Retry-After)
            attempts = await self._stream.deliveries(entry.id)
            if attempts > self._config.max_attempts:
                log.error("intake: entry %s failed %d times; dead-lettered", entry.id, attempts)
                self._telemetry.intake_failures.labels("dead_lettered").inc()
                await self._stream.bury(entry, f"failed {attempts} times")
                continue
            log.info("intake: took over entry %s (delivery %d)", entry.id, attempts)
            self._start(entry)

    async def handle(self, entry: StreamEntry) -> None:
        """Process one entry; acknowledge it unless a later attempt may do better. Never raises."""
        try:
            if await self._handle(entry):
                await self._stream.ack(entry.id)
        except RedisError as exc:
            self._telemetry.intake_failures.labels("redis").inc()
            log.warning("intake: entry %s: Redis failed (%s); will retry", entry.id, exc)
        except Exception:
            # A bug must cost one notification (retried, then dead-lettered), never the consumer.
            self._telemetry.intake_failures.labels("error").inc()
            log.exception("intake: entry %s failed unexpectedly; will retry", entry.id)

    async def _handle(self, entry: StreamEntry) -> bool:
        """Whether the entry is done with (and can be acknowledged)."""
        try:
            await self.process(entry)
        except PayloadError as exc:
            # Validated before it was accepted, so only a newer/older parser disagreeing gets here.
            self._telemetry.intake_failures.labels("invalid").inc()
            await self._stream.bury(entry, str(exc))
            return False
        except SlackError as exc:
            if exc.retryable:
                self._telemetry.intake_failures.labels("slack_retryable").inc()
                log.warning("intake: entry %s: Slack %s; will retry", entry.id, exc)
                return False
            self._telemetry.intake_failures.labels("slack_permanent").inc()
            log.error("intake: entry %s: Slack refused %s; incident state kept", entry.id, exc)
        except LeaseBusy:
            self._telemetry.intake_failures.labels("busy").inc()
            log.warning("intake: entry %s: its alert group stayed busy; will retry", entry.id)
            return False
        return True

    async def process(self, entry: StreamEntry) -> None:
        notification = parse_notification(entry.source, parse_json_body(entry.body.encode()))
        facts = facts_of(notification)
        key = group_hash(notification)
        async with self._leases.hold(f"group:{key}"):
            incident = await self._apply(notification, facts, key, entry.id)
            if incident is not None:
                await self._threads.sync(incident)

    async def _apply(
        self, notification: Notification, facts: AlertFacts, key: str, entry_id: str
    ) -> Incident | None:
        now = self._clock()
        current_id = await self._store.incident_of_group(key)
        current = await self._store.get(current_id) if current_id else None
        window = timedelta(seconds=self._config.reopen_window_s)
        if current is not None and (current.is_open or is_reopenable(current, now, window)):
            return await self._update(current, notification, facts, entry_id, now)
        if current is not None and entry_order(entry_id) <= entry_order(current.last_entry_id):
            return current  # an old delivery of the group's previous life
        if notification.status == "resolved":
            log.info("intake: resolved notification for a group with no open incident; ignored")
            return None
        return await self._open(notification, facts, key, entry_id, now)

    async def _open(
        self,
        notification: Notification,
        facts: AlertFacts,
        key: str,
        entry_id: str,
        now: datetime,
    ) -> Incident:
        incident = open_incident(
            notification,
            facts,
            incident_id=await self._store.next_id(),
            group_hash=key,
            entry_id=entry_id,
            now=now,
        )
        opened = Event(at=now, kind="opened", text=f"Alert fired: {incident.title}")
        await self._store.commit(
            Commit(
                incident,
                events=(opened,),
                bind_group=True,
                status_due=self._next_status(now) if incident.is_open else None,
            )
        )
        self._telemetry.incidents_opened.inc()
        return incident

    async def _update(
        self,
        current: Incident,
        notification: Notification,
        facts: AlertFacts,
        entry_id: str,
        now: datetime,
    ) -> Incident:
        incident, change = apply_notification(
            current, notification, facts, entry_id=entry_id, now=now
        )
        if change is Change.STALE:
            return incident
        if change is Change.UPDATED:
            # The root shows the new numbers; the timeline keeps to events.
            await self._store.commit(Commit(incident))
            return incident
        event = _event_for(change, incident, now)
        if change is Change.RESOLVED:
            events = [*await self._store.events(incident.id), event]
            summary = render_summary(incident, events, now=now)
            await self._store.commit(
                Commit(incident, events=(event,), replies=(summary,), stop_status=True)
            )
            self._telemetry.incidents_resolved.labels("alert").inc()
            return incident
        due = self._next_status(now) if change is Change.REOPENED else None
        reply = render_event(incident, event)
        await self._store.commit(
            Commit(incident, events=(event,), replies=(reply,), status_due=due)
        )
        return incident

    def _next_status(self, now: datetime) -> float:
        return now.timestamp() + self._config.status_interval_s


def _event_for(change: Change, incident: Incident, now: datetime) -> Event:
    texts = {
        Change.RESOLVED: "Alert resolved",
        Change.REOPENED: "Alert fired again: incident reopened",
        Change.ALERTS_CHANGED: _alerts_line(incident),
    }
    return Event(at=now, kind=change.value, text=texts.get(change, change.value))


def _alerts_line(incident: Incident) -> str:
    types = ", ".join(sorted(incident.runner_types)[:10])
    noun = "alert" if incident.firing_count == 1 else "alerts"
    line = f"{incident.firing_count} {noun} firing now"
    return f"{line} ({types})" if types else line


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
