"""The action core: what a responder can do to an incident, whichever surface they used.

Buttons and `/queue` subcommands both land here, so both get the same checks, the same timeline
entries and the same idempotency: each action loads the incident under its group's lease, checks
its current state, changes it, records who did it, queues the thread reply and syncs Slack.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime

from redis.exceptions import RedisError

from bot.incidents import Event, Incident, acknowledge, resolve_manually
from bot.leases import LeaseBusy, Leases
from bot.messages import Rendered, escape, render_event, render_summary
from bot.slack import SlackError
from bot.store import Commit, IncidentStore
from bot.telemetry import Telemetry
from bot.threads import Threads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Actor:
    """Who asked: a Slack user ID (and a display name for logs, never for permissions)."""

    user_id: str
    name: str = ""


@dataclass(frozen=True)
class Outcome:
    """What to tell the person who asked (ephemerally): mrkdwn, already escaped."""

    ok: bool
    message: str


class ActionCore:
    def __init__(
        self,
        store: IncidentStore,
        leases: Leases,
        threads: Threads,
        telemetry: Telemetry,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._leases = leases
        self._threads = threads
        self._telemetry = telemetry
        self._clock = clock

    async def find(self, ref: str | None) -> Incident | None:
        """An incident by ID, or without one the most recently opened open incident."""
        if ref:
            return await self._store.get(ref.lstrip("#"))
        open_ids = await self._store.open_ids()
        return await self._store.get(open_ids[0]) if open_ids else None

    async def open_incidents(self) -> list[Incident]:
        return await self._load(await self._store.open_ids())

    async def recent(self, limit: int = 10) -> list[Incident]:
        return await self._load(await self._store.recent_ids(limit))

    async def _load(self, ids: list[str]) -> list[Incident]:
        loaded = [await self._store.get(incident_id) for incident_id in ids]
        return [incident for incident in loaded if incident is not None]

    async def incident_of_message(self, channel: str, ts: str) -> str | None:
        return await self._store.incident_of_message(channel, ts)

    async def acknowledge(self, actor: Actor, incident_id: str) -> Outcome:
        return await self._safely(self._acknowledge(actor, incident_id))

    async def resolve(self, actor: Actor, incident_id: str) -> Outcome:
        return await self._safely(self._resolve(actor, incident_id))

    async def _safely(self, action: Awaitable[Outcome]) -> Outcome:
        """Failures of the parts behind an action, turned into an answer for the person asking."""
        try:
            return await action
        except LeaseBusy:
            return Outcome(False, "Someone else is changing this incident right now: try again.")
        except RedisError as exc:
            log.error("action failed: Redis: %s", exc)
            return Outcome(False, "queuepilot cannot reach its database right now: try again soon.")

    async def _acknowledge(self, actor: Actor, incident_id: str) -> Outcome:
        async with self._locked(incident_id) as incident:
            if incident is None:
                return _no_incident(incident_id)
            if not incident.is_open:
                return Outcome(False, f"Incident {incident.id} is already resolved.")
            if incident.acknowledged_by == actor.user_id:
                return Outcome(True, f"You already own incident {incident.id}.")
            now = self._clock()
            updated = acknowledge(incident, by=actor.user_id, now=now)
            event = Event(at=now, kind="acknowledged", text="Acknowledged", actor=actor.user_id)
            await self._commit(updated, event, reply=render_event(updated, event))
        return Outcome(True, f"You acknowledged incident {incident.id}.")

    async def _resolve(self, actor: Actor, incident_id: str) -> Outcome:
        async with self._locked(incident_id) as incident:
            if incident is None:
                return _no_incident(incident_id)
            if not incident.is_open:
                return Outcome(True, f"Incident {incident.id} is already resolved.")
            now = self._clock()
            updated = resolve_manually(incident, by=actor.user_id, now=now)
            event = Event(at=now, kind="resolved", text="Resolved manually", actor=actor.user_id)
            events = [*await self._store.events(updated.id), event]
            summary = render_summary(updated, events, now=now)
            await self._commit(updated, event, reply=summary, stop_status=True)
            self._telemetry.incidents_resolved.labels("manual").inc()
        return Outcome(True, f"You resolved incident {incident.id}.")

    def unavailable(self, what: str) -> Outcome:
        return Outcome(False, f"{escape(what)} is not available yet in this version of queuepilot.")

    async def _commit(
        self, incident: Incident, event: Event, *, reply: Rendered, stop_status: bool = False
    ) -> None:
        await self._store.commit(
            Commit(incident, events=(event,), replies=(reply,), stop_status=stop_status)
        )
        try:
            await self._threads.sync(incident)
        except SlackError as exc:
            # The change is saved and its reply queued; the thread catches up on a later sync.
            log.warning("incident %s: Slack lags the %s: %s", incident.id, event.kind, exc)

    @asynccontextmanager
    async def _locked(self, incident_id: str) -> AsyncIterator[Incident | None]:
        """The incident, re-read under its group's lease; None when there is no such incident."""
        incident = await self._store.get(incident_id)
        if incident is None:
            yield None
            return
        async with self._leases.hold(f"group:{incident.group_hash}"):
            yield await self._store.get(incident_id)


def _no_incident(incident_id: str) -> Outcome:
    return Outcome(False, f"No incident {escape(incident_id)}. Try `/queue incidents`.")
