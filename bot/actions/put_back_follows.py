"""Put-backs followed to the fleet: once a scale-up went back, the scaler's runners are read again
at the reverts job's later looks until they are within the bound put back, or until
SCALE_VERIFY_SECONDS pass; then it is said once, in the put-back's own reply, edited in place
while nothing was posted below it. Ended before it is said, as a put-back is: a leader that dies
between says it never, never twice."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime, timedelta

from pydantic import TypeAdapter, ValidationError
from redis.asyncio import Redis

from bot.actions.amends import amending
from bot.backends.http import BackendError, deadline_of, within
from bot.backends.scale import Scaler
from bot.config import Settings
from bot.domain.incident.incidents import Event, Incident
from bot.domain.scale.put_back_seen import Back, Landed, landed
from bot.domain.scale.scaling import Capacity
from bot.render.follow_ups import PUT_BACK_SEEN, back_said
from bot.render.replies import render_back_seen
from bot.storage.due_set import put_back_follows, sweep
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore, Reply, reply_ts
from bot.storage.keys import Keys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Followed:
    """The put-back said in `incident_id`'s thread reply number `reply` at `said_at`, saying
    `text`, and the bounds its runners are to come back within."""

    incident_id: str
    reply: int
    said_at: float
    text: str
    backs: tuple[Back, ...]


_STORED = TypeAdapter(Followed)


@dataclass(eq=False)
class PutBackFollows:
    redis: Redis
    keys: Keys
    store: IncidentStore
    scaler: Scaler
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]

    def __post_init__(self) -> None:
        self._check_s = self.config.status_tick_seconds * 3
        self._due = put_back_follows(self.redis, self.keys)

    async def follow(self, incident_id: str, reply: int, said_at: datetime, text: str,
                     backs: list[Back]) -> None:  # fmt: skip
        followed = Followed(incident_id, reply, said_at.timestamp(), text, tuple(backs))
        stored = _STORED.dump_json(followed).decode()
        await self._due.schedule(f"{incident_id}|{reply}", followed.said_at + self._check_s, stored)

    async def tick(self) -> None:
        """Look at every put-back due a reading; never raises."""
        now = self.clock().timestamp()
        await sweep(self._due, now, self._look, log, "put-back follow-ups")

    async def _look(self, member: str) -> None:
        lease_s = 2 * deadline_of(self.config.backend_timeout_seconds) + 30
        claim = await self._due.claim(member, self.clock().timestamp(), lease_s)
        if claim is None:
            return  # not due any more
        try:
            followed = _STORED.validate_json(await self._due.data(member) or "")
        except ValidationError:
            log.warning("put-back follow-ups: %s: unreadable or gone; dropped", member)
            await self._due.done(claim)
            return
        now, verify_s = self.clock(), self.config.scale_verify_s
        due = datetime.fromtimestamp(followed.said_at, UTC) + timedelta(seconds=verify_s)
        seen: list[tuple[Back, Landed]] = []
        for back in followed.backs:
            decided = landed(
                back, await self._read(back), scaler=self.scaler.name, now=now, due=due
            )
            if decided is None:
                await self._due.reschedule(claim, now.timestamp() + self._check_s)
                return
            seen.append((back, decided))
        if await self._due.done(claim):
            await self._say(followed, seen)

    async def _read(self, back: Back) -> Capacity | str | None:
        try:
            timeout_s = self.config.backend_timeout_seconds
            return await within(self.scaler.capacity(back.target), timeout_s, self.scaler.name)
        except BackendError as exc:
            return str(exc)

    async def _say(self, followed: Followed, seen: list[tuple[Back, Landed]]) -> None:
        said_at = datetime.fromtimestamp(followed.said_at, UTC)
        put_back = Event(at=said_at, kind="scale_reverted", text=followed.text)
        spares = self.scaler.spares_jobs

        def told(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            edit = incident.replies == followed.reply
            rendered = render_back_seen(incident, put_back, seen, spares, edit=edit)
            edits = reply_ts(followed.reply) if edit else ""
            reply = Reply("event", BAND_EVENT, rendered, edits=edits)
            said = (back_said(back, at, said_at, spares) for back, at in seen)
            events = tuple(Event(at=now, kind=PUT_BACK_SEEN, text=text) for text in said)
            updated = incident.model_copy(update={"updated_at": now})
            return Commit(updated, events=events, replies=(reply,), root=False), None

        fresh = await self.store.commit_fresh(
            followed.incident_id, amending(told), clock=self.clock, with_timeline=True
        )
        if not fresh.found or fresh.busy:
            log.info("put-back follow-ups: incident %s not told: %s", followed.incident_id, seen)
