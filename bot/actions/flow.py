"""The path every responder action takes: `guarded` authorizes, answers the same delivery twice
once, and counts the outcome; `commit` decides on the incident as read and commits the change with
its thread reply. Scaling costs money and capacity, so only `SCALE_ALLOWED_USERS` may
(`Authorizer`); the other actions are open to everyone in the channel."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime
from typing import Any

from redis.exceptions import MaxConnectionsError, RedisError

from bot import logs
from bot.config import Settings
from bot.domain.incident.ack_on_action import acknowledged_by_acting
from bot.domain.incident.incidents import REFUSED, Event, Incident
from bot.render.mrkdwn import escape, plain_text
from bot.storage.connection import POOL_WAIT_S
from bot.storage.incident_store import Commit, IncidentStore, Loaded
from bot.storage.leases import IN_PROGRESS, Deposed, Interactions
from bot.telemetry import Telemetry

log = logging.getLogger(__name__)
# The user-group lookups log under their own name, which operators filter on.
group_log = logging.getLogger("bot.actions.permissions")

UNKNOWN = (
    "This incident is no longer known to queuepilot (it expired, or its data was lost). "
    "`/queue incidents` lists the current ones."
)
NO_REDIS = "queuepilot cannot reach its database right now: try again."
BUSY = (
    "queuepilot is too busy to take this right now (every connection to its database stayed in "
    f"use for {POOL_WAIT_S:g} s): try again in a moment."
)

RESTRICTED = frozenset({"scale"})
GROUP_CACHE_S = 300.0
# A modal's submission waits within Slack's 3 s: a slow group allows nobody this time rather than
# lose the answer; its lookup goes on for up to GROUP_FETCH_S, so the next try finds it cached.
GROUP_LOOKUP_S = 1.5
GROUP_FETCH_S = 10.0


@dataclass(frozen=True)
class Actor:
    """A Slack user ID, and the name Slack's payload gave (a fallback for display)."""

    user_id: str
    name: str = ""


@dataclass(frozen=True)
class Outcome:
    """What to tell the person who asked, mrkdwn already escaped. `message` is shown alone where
    `blocks` are not (a notification, a repeated interaction), so it says it all."""

    ok: bool
    message: str
    result: str = ""
    blocks: tuple[dict[str, Any], ...] = ()


def unanswered(exc: RedisError) -> Outcome:
    """What a person is told when Redis did not answer: a crowd holding every connection is busy."""
    return Outcome(False, BUSY if isinstance(exc, MaxConnectionsError) else NO_REDIS, "error")


def unrecorded(exc: RedisError) -> str:
    """Why something done at a backend is not on its incident, as its answer says it."""
    if isinstance(exc, MaxConnectionsError):
        return "queuepilot was too busy to write it down"
    return "queuepilot could not reach its database"


def refused(message: str) -> Outcome:
    return Outcome(False, message, "refused")


def failed(message: str) -> Outcome:
    return Outcome(False, message, "failed")


# An action's decision on the incident as read: the commit (or none) and the answer.
Decided = tuple[Commit | None, Outcome]
Decide = Callable[[Incident, datetime, list[Event]], Decided]
Run = Callable[[], Awaitable[Outcome]]


@dataclass(eq=False)
class Authorizer:
    config: Settings
    _: KW_ONLY
    group_members: Callable[[str], Awaitable[Sequence[str]]]
    clock: Callable[[], float] = time.monotonic
    _groups: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict, init=False)
    _fetching: dict[str, asyncio.Task[frozenset[str] | None]] = field(
        default_factory=dict, init=False
    )

    async def refusal(self, user_id: str, action: str) -> str | None:
        """None when `user_id` may do `action`; else what to tell them, and how to be allowed."""
        if not user_id:  # Slack names the user of every request; a request that does not is refused
            return "Slack did not say who asked, so nothing was done."
        if action not in RESTRICTED:
            return None
        allowed = self.config.scale_allowed_users
        if not allowed:
            return (
                "Scaling from Slack is turned off: nobody is allowed yet. An operator allows "
                "people by listing their Slack user IDs or user-group IDs in "
                "`SCALE_ALLOWED_USERS`."
            )
        if user_id in allowed or await self._in_a_group(user_id):
            return None
        return (
            f"You are not allowed to scale runners. An operator can add your Slack user ID "
            f"(`{escape(user_id)}`) or one of your user groups to `SCALE_ALLOWED_USERS`."
        )

    async def _in_a_group(self, user_id: str) -> bool:
        """Fresh cached members answer at once; else the other groups are asked together, for
        GROUP_LOOKUP_S, and a group unread this time answers with the members it had last."""
        now, groups = self.clock(), self.config.scale_allowed_groups
        fresh = {g for g in groups if (c := self._groups.get(g)) and now - c[0] < GROUP_CACHE_S}
        if any(user_id in self._groups[g][1] for g in fresh):
            return True
        if stale := {self._fetch(group) for group in groups if group not in fresh}:
            await asyncio.wait(stale, timeout=GROUP_LOOKUP_S)
        return any(user_id in members for _, members in self._groups.values())

    def _fetch(self, group: str) -> asyncio.Task[frozenset[str] | None]:
        task = self._fetching.get(group)
        if task is None:
            task = self._fetching[group] = asyncio.ensure_future(self._members(group))
            task.add_done_callback(lambda _: self._fetching.pop(group, None))
        return task

    async def _members(self, group: str) -> frozenset[str] | None:
        """The group's members, cached; None when they could not be read (asked again soon)."""
        try:
            members = frozenset(await asyncio.wait_for(self.group_members(group), GROUP_FETCH_S))
        except Exception as exc:
            group_log.warning("user group %s: members unreadable (%s)", group, exc)
            return None
        self._groups[group] = (self.clock(), members)
        return members


def parse_ref(ref: str) -> tuple[str, str | None]:
    """`12:9f3a…` (what buttons carry) or `12` / `#12` (what people type) -> (id, uid)."""
    incident_id, _, uid = ref.strip().lstrip("#").partition(":")
    return incident_id, (uid or None)


@dataclass
class Acting:
    store: IncidentStore
    telemetry: Telemetry
    interactions: Interactions
    authorizer: Authorizer
    _: KW_ONLY
    display_name: Callable[[str], Awaitable[str | None]]
    clock: Callable[[], datetime]
    ack_on_action: bool = True  # a person's first act acknowledges (`ACK_ON_ACTION`)

    async def guarded(
        self,
        action: str,
        actor: Actor,
        interaction: str | None,
        run: Run,
        *,
        asked: tuple[str, str] | None = None,
    ) -> Outcome:
        """`run` once per interaction, authorized and counted; a refusal of `asked` is kept."""
        with logs.about():
            try:
                outcome = await self._once(action, actor, interaction, run)
            except Deposed:  # the request stays in its stream, for the next leader
                raise
            except RedisError as exc:
                log.error("action %s failed: Redis: %s", action, exc)
                outcome = unanswered(exc)
            if asked is not None:
                await self.keep_refusal(*asked, actor, outcome)
        label = outcome.result or ("ok" if outcome.ok else "refused")
        self.telemetry.actions.labels(action, label).inc()
        return outcome

    async def _once(self, action: str, actor: Actor, interaction: str | None, run: Run) -> Outcome:
        if (refusal := await self.authorizer.refusal(actor.user_id, action)) is not None:
            return refused(refusal)
        key = f"{action}:{actor.user_id}:{interaction}"
        previous = await self.interactions.claim(key) if interaction else None
        if previous == IN_PROGRESS:
            return Outcome(False, "This request is already being handled.", "duplicate")
        if previous is not None:
            return Outcome(True, previous, "duplicate")
        outcome = await run()
        if interaction:
            try:
                await self.interactions.answered(key, outcome.message)
            except Deposed:
                raise
            except RedisError as exc:
                # What was done is said: "try again" in its place could have it done twice.
                log.warning("action %s: its answer not kept: Redis: %s", action, exc)
        return outcome

    async def keep_refusal(self, ref: str, asked: str, actor: Actor, outcome: Outcome) -> None:
        """On the timeline (for the postmortem) only: the person was told."""
        if outcome.result not in ("refused", "failed"):
            return
        try:
            name = await self.name(actor)

            def decide(incident: Incident, now: datetime, _: list[Event]) -> Decided:
                text = f"{asked} refused: {plain_text(outcome.message)}"
                event = Event(at=now, kind=REFUSED, text=text, actor=actor.user_id, actor_name=name)
                return Commit(incident, events=(event,), root=False), outcome

            await self.commit(ref, decide)
        except RedisError as exc:  # the answer stands; only the record of it is lost
            log.warning("refusal of %s not kept: Redis: %s", asked, exc)

    async def open_incident(self, ref: str, resolved: str) -> Incident | Outcome:
        """The open incident `ref` names, or the refusal: unknown, or `resolved` (its `{id}`)."""
        incident = (await self.load(ref)).incident
        if incident is None:
            return refused(UNKNOWN)
        return incident if incident.is_open else refused(resolved.format(id=incident.id))

    async def load(self, ref: str) -> Loaded:
        incident_id, uid = parse_ref(ref)
        loaded = await self.store.load(incident_id) if incident_id else Loaded(None)
        incident = loaded.incident
        if incident is None or (uid is not None and uid != incident.uid):
            return Loaded(None)
        logs.tag(incident=incident.id, channel=incident.channel)
        return loaded

    async def commit(self, ref: str, decide: Decide, *, with_timeline: bool = False) -> Outcome:
        """Commit what `decide` makes of the incident `ref` names (`with_timeline`: given it)."""
        incident_id, uid = parse_ref(ref)
        if not incident_id:
            return refused(UNKNOWN)

        def decided(incident: Incident, now: datetime, timeline: list[Event]) -> Decided:
            if uid is not None and uid != incident.uid:
                return None, refused(UNKNOWN)
            logs.tag(incident=incident.id, channel=incident.channel)
            commit, answer = decide(incident, now, timeline)
            if commit is None or commit.incident is None or not self.ack_on_action:
                return commit, answer
            taken, events = acknowledged_by_acting(commit.incident, commit.events, now=now)
            return replace(commit, incident=taken, events=events), answer

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
        try:
            return await self.display_name(actor.user_id) or actor.name or actor.user_id
        except RedisError:
            return actor.name or actor.user_id
