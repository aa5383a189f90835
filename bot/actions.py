"""The action core: what a responder can do to an incident, whichever surface they used.

Buttons and `/queue` subcommands both land here, so both get the same checks, the same timeline
entries and the same idempotency: an action reads the incident, decides from its current state,
and commits the change with the thread reply, fenced by the version it read. If the incident
moved on meanwhile (an alert resolved it, someone else acted), the action decides again on the
fresh state, so a double click or a race with auto-resolve ends in one consistent outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime

from redis.exceptions import RedisError

from bot.incidents import Event, Incident, acknowledge, resolve_manually
from bot.messages import escape, render_event, render_summary
from bot.store import BAND_ACTION, Commit, IncidentStore, Loaded, Reply
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
UNKNOWN = (
    "This incident is no longer known to queuepilot (it expired, or its data was lost). "
    "`/queue incidents` lists the current ones."
)


@dataclass(frozen=True)
class Actor:
    """Who asked: a Slack user ID, and the name Slack's payload gave (a fallback for display)."""

    user_id: str
    name: str = ""


@dataclass(frozen=True)
class Outcome:
    """What to tell the person who asked (ephemerally): mrkdwn, already escaped."""

    ok: bool
    message: str


@dataclass(frozen=True)
class Decision:
    """What an action does to the incident as read: a commit (or none) and the answer."""

    outcome: Outcome
    commit: Commit | None = None


# An action's decision, from the incident as read, the time, and its timeline when asked for.
Decide = Callable[[Incident, datetime, list[Event]], Decision]


def parse_ref(ref: str) -> tuple[str, str | None]:
    """`12:9f3a…` (what buttons carry) or `12` / `#12` (what people type) -> (id, uid)."""
    incident_id, _, uid = ref.strip().lstrip("#").partition(":")
    return incident_id, (uid or None)


class ActionCore:
    def __init__(
        self,
        store: IncidentStore,
        telemetry: Telemetry,
        *,
        display_name: Callable[[str], Awaitable[str | None]],
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._display_name = display_name
        self._clock = clock

    # -- finding incidents -----------------------------------------------------------------

    async def open_incidents(self, limit: int = 100) -> list[Incident]:
        """The most recently opened open incidents, at most `limit` of them."""
        return await self._store.get_many((await self._store.open_ids())[:limit])

    async def open_count(self) -> int:
        return await self._store.open_count()

    async def recent(self, limit: int = 10) -> list[Incident]:
        return await self._store.get_many(await self._store.recent_ids(limit))

    async def incident_of_message(self, channel: str, ts: str) -> str | None:
        return await self._store.incident_of_message(channel, ts)

    # -- actions ---------------------------------------------------------------------------

    async def acknowledge(self, actor: Actor, ref: str) -> Outcome:
        name = await self._name(actor)

        def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
            if not incident.is_open:
                return Decision(Outcome(False, f"Incident {incident.id} is already resolved."))
            if incident.acknowledged_by == actor.user_id:
                return Decision(Outcome(True, f"You already own incident {incident.id}."))
            previous = incident.acknowledged_name or incident.acknowledged_by
            updated = acknowledge(incident, by=actor.user_id, name=name, now=now)
            if previous:
                kind, text = "handed_over", f"Taken over from {previous}"
                answer = f"You took incident {incident.id} over from {escape(previous)}."
            else:
                kind, text = "acknowledged", "Acknowledged"
                answer = f"You acknowledged incident {incident.id}."
            event = Event(at=now, kind=kind, text=text, actor=actor.user_id, actor_name=name)
            reply = Reply("action", BAND_ACTION, render_event(updated, event))
            commit = Commit(updated, events=(event,), replies=(reply,))
            return Decision(Outcome(True, answer), commit)

        return await self._act("acknowledge", ref, decide)

    async def resolve(self, actor: Actor, ref: str) -> Outcome:
        name = await self._name(actor)

        def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
            if not incident.is_open:
                return Decision(Outcome(True, f"Incident {incident.id} is already resolved."))
            updated = resolve_manually(incident, by=actor.user_id, name=name, now=now)
            event = Event(
                at=now,
                kind="resolved",
                text="Resolved manually",
                actor=actor.user_id,
                actor_name=name,
            )
            summary = render_summary(updated, [*timeline, event], now=now)
            commit = Commit(
                updated,
                events=(event,),
                replies=(Reply("summary", BAND_ACTION, summary),),
                stop_status=True,
            )
            return Decision(Outcome(True, f"You resolved incident {incident.id}."), commit)

        return await self._act("resolve", ref, decide, with_timeline=True)

    def unavailable(self, what: str) -> Outcome:
        return Outcome(False, f"{escape(what)} is not available yet in this version of queuepilot.")

    # -- the one path every action takes ---------------------------------------------------

    async def _act(
        self,
        name: str,
        ref: str,
        decide: Decide,
        *,
        with_timeline: bool = False,
    ) -> Outcome:
        """Decide on the incident as read and commit, again on fresh state if it moved on.

        `with_timeline` reads the incident's timeline first, for decisions that render it (the
        summary of a resolve).
        """
        try:
            outcome = await self._decide_and_commit(ref, decide, with_timeline)
        except RedisError as exc:
            log.error("action %s failed: Redis: %s", name, exc)
            outcome = Outcome(False, "queuepilot cannot reach its database right now: try again.")
        self._telemetry.actions.labels(name, "ok" if outcome.ok else "refused").inc()
        return outcome

    async def _decide_and_commit(self, ref: str, decide: Decide, with_timeline: bool) -> Outcome:
        incident_id, uid = parse_ref(ref)
        for _ in range(MAX_ATTEMPTS):
            loaded = await self._store.load(incident_id) if incident_id else Loaded(None)
            incident = loaded.incident
            if incident is None or (uid is not None and uid != incident.uid):
                return Outcome(False, UNKNOWN)
            timeline = await self._store.events(incident.id) if with_timeline else []
            now = self._clock()
            decision = decide(incident, now, timeline)
            if decision.commit is None:
                return decision.outcome
            commit = replace(decision.commit, version=loaded.version, thread=loaded.thread)
            if await self._store.commit(commit, now=now.timestamp()):
                if commit.stop_status:
                    self._telemetry.incidents_resolved.labels("manual").inc()
                return decision.outcome
        return Outcome(False, "This incident is changing right now: try again in a moment.")

    async def _name(self, actor: Actor) -> str:
        """How routine replies name the actor: their Slack display name, else the payload's."""
        try:
            return await self._display_name(actor.user_id) or actor.name or actor.user_id
        except RedisError:
            return actor.name or actor.user_id
