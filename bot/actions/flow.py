"""The path every responder action takes, whichever action and whichever surface.

`guarded` runs the checks that come before any work: the authorization hook, then the
interaction's identity (the same delivery twice does one thing and gets the same answer), and it
counts every outcome in `/metrics`; a request it is told about (`Asked`) that is refused (the
person not allowed, the request or its backend saying no) goes on the incident's timeline.
`commit` decides on the incident as read and commits the change with its thread reply, fenced by
the version it read: if the incident moved on meanwhile (an alert resolved it, another request
on it), it decides again on the fresh state. Backend calls happen between the two, holding no
state: a slow Alertmanager never holds up an alert group.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError

from bot.actions.permissions import Authorizer
from bot.domain.incidents import REFUSED, Event, Incident
from bot.render.mrkdwn import plain_text
from bot.storage.incident_store import Commit, IncidentStore, Loaded
from bot.storage.interactions import IN_PROGRESS, Interactions
from bot.storage.leader import Deposed
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

UNKNOWN = (
    "This incident is no longer known to queuepilot (it expired, or its data was lost). "
    "`/queue incidents` lists the current ones."
)
NO_REDIS = "queuepilot cannot reach its database right now: try again."


@dataclass(frozen=True)
class Actor:
    """Who asked: a Slack user ID, and the name Slack's payload gave (a fallback for display)."""

    user_id: str
    name: str = ""


@dataclass(frozen=True)
class Outcome:
    """What to tell the person who asked (ephemerally): mrkdwn, already escaped.

    `result` is how `/metrics` counts it: ok, refused (permission, state, bad input), failed
    (a backend said no or did not answer), duplicate (the same interaction again), error.
    `blocks`, when the answer offers a button: `message` shown with it, and alone where blocks
    are not (a notification, the same interaction answered again), so it must say it all.
    """

    ok: bool
    message: str
    result: str = ""
    blocks: tuple[dict[str, Any], ...] = ()

    @property
    def label(self) -> str:
        return self.result or ("ok" if self.ok else "refused")


@dataclass(frozen=True)
class Asked:
    """What someone asked of an incident (`ref`), in words ("Scale-up of linux.2xlarge by
    +10"), so that a refusal of it is kept on the incident's timeline."""

    ref: str
    what: str


def refused(message: str) -> Outcome:
    return Outcome(False, message, "refused")


def failed(message: str) -> Outcome:
    return Outcome(False, message, "failed")


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


class Acting:
    """What every action needs: the store, the clock, names, the guards, the counters."""

    def __init__(
        self,
        store: IncidentStore,
        telemetry: Telemetry,
        interactions: Interactions,
        authorizer: Authorizer,
        *,
        display_name: Callable[[str], Awaitable[str | None]],
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.telemetry = telemetry
        self.interactions = interactions
        self.authorizer = authorizer
        self.clock = clock
        self._display_name = display_name

    async def guarded(
        self,
        action: str,
        actor: Actor,
        interaction: str | None,
        run: Callable[[], Awaitable[Outcome]],
        *,
        asked: Asked | None = None,
    ) -> Outcome:
        """Authorize, claim the interaction, run, remember the answer, count the outcome; keep
        a refusal of what was `asked` on the incident's timeline."""
        try:
            outcome = await self._guarded(action, actor, interaction, run)
        except Deposed:
            # Not an answer to give: the request stays in its stream, and the next leader
            # (this replica too, leading again) carries it on under the same claim.
            raise
        except RedisError as exc:
            log.error("action %s failed: Redis: %s", action, exc)
            outcome = Outcome(False, NO_REDIS, "error")
        if asked is not None:
            await self.keep_refusal(asked, actor, outcome)
        self.telemetry.actions.labels(action, outcome.label).inc()
        return outcome

    async def keep_refusal(self, asked: Asked, actor: Actor, outcome: Outcome) -> None:
        """A refused request (the person not allowed, the request or its backend saying no) on
        the incident's timeline, what its postmortem asks about; not on its root nor in its
        thread: the person was told. Anything else (done, a duplicate, Redis away, an incident
        changing too fast to record) keeps nothing."""
        if outcome.result not in ("refused", "failed"):
            return
        try:
            name = await self.name(actor)
            await self.commit(asked.ref, _refusal(asked, actor, name, outcome))
        except RedisError as exc:  # the answer stands; only the record of it is lost
            log.warning("refusal of %s not kept: Redis: %s", asked.what, exc)

    async def _guarded(
        self,
        action: str,
        actor: Actor,
        interaction: str | None,
        run: Callable[[], Awaitable[Outcome]],
    ) -> Outcome:
        refusal = await self.authorizer.refusal(actor.user_id, action)
        if refusal is not None:
            return refused(refusal)
        if not interaction:
            return await run()
        key = f"{action}:{actor.user_id}:{interaction}"
        previous = await self.interactions.claim(key)
        if previous == IN_PROGRESS:
            return Outcome(False, "This request is already being handled.", "duplicate")
        if previous is not None:
            return Outcome(True, previous, "duplicate")
        outcome = await run()
        await self.interactions.answered(key, outcome.message)
        return outcome

    async def load(self, ref: str) -> Loaded:
        """The incident a reference names, or `Loaded(None)` (unknown, or another UID)."""
        incident_id, uid = parse_ref(ref)
        loaded = await self.store.load(incident_id) if incident_id else Loaded(None)
        incident = loaded.incident
        if incident is None or (uid is not None and uid != incident.uid):
            return Loaded(None)
        return loaded

    async def commit(self, ref: str, decide: Decide, *, with_timeline: bool = False) -> Outcome:
        """Decide on the incident as read and commit, again on fresh state if it moved on
        (`IncidentStore.commit_fresh`).

        `with_timeline` reads the timeline first, for decisions that render it (a summary).
        """
        incident_id, uid = parse_ref(ref)
        if not incident_id:
            return refused(UNKNOWN)

        def decided(
            incident: Incident, now: datetime, timeline: list[Event]
        ) -> tuple[Commit | None, Outcome]:
            if uid is not None and uid != incident.uid:
                return None, refused(UNKNOWN)
            decision = decide(incident, now, timeline)
            return decision.commit, decision.outcome

        fresh = await self.store.commit_fresh(
            incident_id, decided, clock=self.clock, with_timeline=with_timeline
        )
        if fresh.busy:
            return Outcome(False, "This incident is changing right now: try again in a moment.")
        if not fresh.found or fresh.answer is None:
            return refused(UNKNOWN)
        if fresh.committed is not None and fresh.committed.stop_status:
            self.telemetry.incidents_resolved.labels("manual").inc()
        return fresh.answer

    async def name(self, actor: Actor) -> str:
        """How routine replies name the actor: their Slack display name, else the payload's."""
        try:
            return await self._display_name(actor.user_id) or actor.name or actor.user_id
        except RedisError:
            return actor.name or actor.user_id


def _refusal(asked: Asked, actor: Actor, name: str, outcome: Outcome) -> Decide:
    def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
        text = f"{asked.what} refused: {plain_text(outcome.message)}"
        event = Event(at=now, kind=REFUSED, text=text, actor=actor.user_id, actor_name=name)
        return Decision(outcome, Commit(incident, events=(event,), root=False))

    return decide
