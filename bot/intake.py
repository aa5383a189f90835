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
from bot.incidents import Change, Event, Incident, apply_notification, is_reopenable, open_incident
from bot.leases import LeaseBusy, Leases
from bot.messages import render_event, render_summary
from bot.slack import SlackError
from bot.store import IncidentStore
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

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set, riding out Redis outages with a capped backoff."""
        backoff = 0.1
        loop = asyncio.get_running_loop()
        next_reclaim = 0.0
        while not stop.is_set():
            try:
                if loop.time() >= next_reclaim:
                    await self._stream.ensure_group()
                    await self._reclaim()
                    next_reclaim = loop.time() + min(self._config.reclaim_idle_ms / 2000, 5.0)
                for entry in await self._stream.read(self._config.consumer, block_ms=500):
                    await self.handle(entry)
                self._telemetry.intake_backlog.set(await self._stream.backlog())
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

    async def _reclaim(self) -> None:
        entries = await self._stream.reclaim(
            self._config.consumer, min_idle_ms=self._config.reclaim_idle_ms
        )
        for entry in entries:
            attempts = await self._stream.deliveries(entry.id)
            if attempts > self._config.max_attempts:
                log.error("intake: entry %s failed %d times; dead-lettered", entry.id, attempts)
                self._telemetry.intake_failures.labels("dead_lettered").inc()
                await self._stream.bury(entry, f"failed {attempts} times")
                continue
            log.info("intake: took over entry %s (delivery %d)", entry.id, attempts)
            await self.handle(entry)

    async def handle(self, entry: StreamEntry) -> None:
        """Process one entry; acknowledge it unless a later attempt may do better."""
        try:
            await self.process(entry)
        except PayloadError as exc:
            # Validated before it was accepted, so only a newer/older parser disagreeing gets here.
            self._telemetry.intake_failures.labels("invalid").inc()
            await self._stream.bury(entry, str(exc))
            return
        except SlackError as exc:
            if exc.retryable:
                self._telemetry.intake_failures.labels("slack_retryable").inc()
                log.warning("intake: entry %s: Slack %s; will retry", entry.id, exc)
                return
            self._telemetry.intake_failures.labels("slack_permanent").inc()
            log.error("intake: entry %s: Slack refused %s; incident state kept", entry.id, exc)
        except LeaseBusy:
            self._telemetry.intake_failures.labels("busy").inc()
            log.warning("intake: entry %s: its alert group stayed busy; will retry", entry.id)
            return
        except RedisError:
            raise
        except Exception:
            # A bug must cost one notification (retried, then dead-lettered), never the consumer.
            self._telemetry.intake_failures.labels("error").inc()
            log.exception("intake: entry %s failed unexpectedly; will retry", entry.id)
            return
        await self._stream.ack(entry.id)

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
        if notification.status == "resolved":
            log.info("intake: resolved notification for a group with no open incident; ignored")
            return None
        return await self._open(
            notification, facts, key, entry_id, now, replace=current is not None
        )

    async def _open(
        self,
        notification: Notification,
        facts: AlertFacts,
        key: str,
        entry_id: str,
        now: datetime,
        *,
        replace: bool,
    ) -> Incident:
        incident = open_incident(
            notification,
            facts,
            incident_id=await self._store.next_id(),
            group_hash=key,
            entry_id=entry_id,
            now=now,
        )
        await self._store.save(incident)
        await self._store.bind_group(key, incident.id, replace=replace)
        await self._store.schedule_status(incident.id, self._next_status(now))
        await self._store.add_event(
            incident.id, Event(at=now, kind="opened", text=f"Alert fired: {incident.title}")
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
        await self._store.save(incident)
        if change is Change.UPDATED:
            return incident  # the root shows the new numbers; the timeline keeps to events
        event = _event_for(change, incident, now)
        await self._store.add_event(incident.id, event)
        if change is Change.RESOLVED:
            await self._store.unschedule_status(incident.id)
            events = await self._store.events(incident.id)
            await self._threads.reply(incident, render_summary(incident, events, now=now))
            self._telemetry.incidents_resolved.labels("alert").inc()
        elif change is Change.REOPENED:
            await self._store.schedule_status(incident.id, self._next_status(now))
            await self._threads.reply(incident, render_event(incident, event))
        elif change is Change.ALERTS_CHANGED:
            await self._threads.reply(incident, render_event(incident, event))
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
