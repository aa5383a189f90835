"""Scale-ups from Slack that put themselves back: once their incident resolved and the type's queue
stayed drained `SCALE_REVERT_SETTLE` (a real fleet queues again the instant capacity goes), or after
`SCALE_REVERT_AFTER`. One record per runner type and field: a second scale-up extends the first,
and the oldest value goes back.

What went back is followed to the fleet: the scaler's runners are read again at later looks until
they are within the bound put back, or SCALE_VERIFY_SECONDS pass, then said once in the put-back's
own reply. Ended before it is said: a leader that dies between says it never, never twice."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import Field, PlainValidator, TypeAdapter, ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.actions.amends import amending
from bot.backends.http import BackendError, deadline_of, within
from bot.backends.scale import Reverted, Scaler, Undo
from bot.config import Settings
from bot.domain.incident.incident_fleet import type_drained
from bot.domain.incident.incidents import (
    Event,
    Incident,
    with_action,
    with_scale_ups,
    without_put_backs,
)
from bot.domain.reading.early_warning import SCALE_UNTIL, Phase, WarningState, fate_told
from bot.domain.scale.put_back_seen import Back, Landed, bounding, landed
from bot.domain.scale.scale_ups import ScaleUp
from bot.domain.scale.scaling import Capacity, ScaleTarget
from bot.domain.units import duration
from bot.fleet.readings import FleetReadings
from bot.pacing import wait_after
from bot.render.follow_ups import PUT_BACK_SEEN, back_said
from bot.render.replies import render_act, render_back_seen, render_event
from bot.storage.due_set import Claim, put_back_follows, scale_revert_records, sweep
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore, Reply, reply_ts
from bot.storage.keys import Keys

log = logging.getLogger(__name__)
# The follow-ups log under their own name, which operators filter on.
follow_log = logging.getLogger("bot.actions.put_back_follows")

# A transient failure is tried again after 15 to 30 s, doubling, at most 15 minutes apart; after
# this many (1¼ to 2½ hours of trying) it is reported and dropped.
FIRST_BACKOFF_S = 30.0
MAX_BACKOFF_S = 900.0
MAX_ATTEMPTS = 15


def _undo(value: object) -> Undo:
    undo = Undo.load(value)
    if undo is None:
        raise ValueError("not an undo")
    return undo


# A moment in seconds: a stored infinity would never come due.
_Moment = Annotated[float, Field(allow_inf_nan=False)]


@dataclass(frozen=True)
class PutBackDue:
    """When and how a runner type's field goes back: what its scale-ups changed (`undo`: from
    the first one's value before to the last one's after), for the incident or early warning
    (`warning`: its uid) whose scale-ups they are."""

    id: str
    incident_id: str
    target: ScaleTarget
    undo: Annotated[Undo, PlainValidator(_undo)]
    backend: str
    by: str
    scaled_at: _Moment
    attempts: int = 0
    warning: str = ""
    queued_at: _Moment = 0.0  # when a look after the resolve last saw the queue not drained
    taken_from: str = ""  # the warning whose scale-up the incident took on, until it is told

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, text: str | None) -> PutBackDue | None:
        """None when it is not `dump()`'s shape, so the sweep drops it at once."""
        try:
            return _STORED.validate_json(text or "", strict=True)
        except ValidationError:
            return None


_STORED = TypeAdapter(PutBackDue)


@dataclass(frozen=True)
class Followed:
    """A put-back said in its incident's reply `reply`, and the bounds its runners come back in."""

    incident_id: str
    reply: int
    said_at: float
    text: str
    backs: tuple[Back, ...]


_FOLLOWED = TypeAdapter(Followed)


def record_id(runner_type: str, field: str) -> str:
    return f"{runner_type}|{field}"


def made(
    runner_type: str, added: int, by: str, at: datetime, undo: Undo | None, *, pilot: bool = False
) -> ScaleUp:
    """A scale-up as made: what it changed, from what to what."""
    changed = {"field": undo.field, "before": undo.before, "after": undo.after} if undo else {}
    return ScaleUp(runner_type=runner_type, added=added, by=by, at=at, pilot=pilot, **changed)


@dataclass(eq=False)
class ScaleReverts:
    redis: Redis
    keys: Keys
    store: IncidentStore
    scaler: Scaler
    _: KW_ONLY
    config: Settings
    clock: Callable[[], datetime]
    warnings: WarningStore | None = None
    readings: FleetReadings | None = None

    def __post_init__(self) -> None:
        # Resolution is noticed within a few ticks; the record costs one Redis read a look.
        self._check_s = self.config.status_tick_seconds * 3
        self._lease_s = 2 * deadline_of(self.config.backend_timeout_seconds) + 30
        self._due = scale_revert_records(self.redis, self.keys)
        self._follows = put_back_follows(self.redis, self.keys)

    async def remember(
        self, incident_id: str, target: ScaleTarget, undo: Undo, *, by: str, warning: str = ""
    ) -> PutBackDue:
        """An earlier record of the same type and field that this scale-up continues keeps its
        value before: that goes back. One that something else changed since is not continued."""
        now = self.clock().timestamp()
        rid = record_id(target.runner_type, undo.field)
        earlier = PutBackDue.load(await self._due.data(rid))
        if earlier and earlier.target.target == target.target and earlier.undo.after == undo.before:
            undo = replace(undo, before=earlier.undo.before)
        record = PutBackDue(
            rid, incident_id, target, undo, self.scaler.name, by, now, warning=warning
        )
        await self._due.schedule(rid, now + self._check_s, record.dump())
        if earlier is not None and earlier.incident_id not in ("", incident_id):
            # The earlier incident no longer lists it to go back: its thread would never say so.
            def handed_on(
                incident: Incident, _: datetime, __: list[Event]
            ) -> tuple[Commit | None, None]:
                if all(up.back != rid for up in incident.put_backs):
                    return None, None
                return Commit(without_put_backs(incident, {rid}), root=False), None

            await self.store.commit_fresh(
                earlier.incident_id, amending(handed_on), clock=self.clock, with_timeline=True
            )
        return record

    def plan(self, *, warning: bool = False) -> str:
        """When a recorded scale-up goes back, in words."""
        until = SCALE_UNTIL if warning else self.settle_said
        after = self.config.scale_revert_after
        when = f"when {until} or after {_span(after)}" if after else f"when {until}"
        return f"It goes back {when}, unless someone changes it meanwhile."

    def going_back(self, up: ScaleUp, record: PutBackDue) -> ScaleUp:
        """`up` as the record that puts it back says: to what, when, and by when at the latest."""
        after, settle = self.config.scale_revert_after, self.config.scale_revert_settle
        back = {
            "back": record.id,
            "back_to": record.undo.before,
            "back_when": f"once its queue has stayed drained {_span(settle)}" if settle else "",
            "back_by": datetime.fromtimestamp(record.scaled_at + after, UTC) if after else None,
        }
        return up.model_copy(update=back)

    @property
    def settle_said(self) -> str:
        settle = self.config.scale_revert_settle
        drained = f" and its queue stays drained {_span(settle)}" if settle else ""
        return f"the incident resolves{drained}"

    async def tick(self) -> None:
        """Look at every due record; one reply per incident for what went back. Never raises."""
        try:
            due = await self._due.pending(self.clock().timestamp())
        except RedisError as exc:
            log.warning("scale reverts: Redis unavailable: %s", exc)
            return
        told: dict[str, list[tuple[str, str, Back | None, str]]] = {}
        for rid in sorted(due, key=self._order):  # a floor before its ceiling: both go now
            try:
                said = await self._look(rid)
            except RedisError as exc:
                log.warning("scale reverts: %s: Redis: %s; retrying", rid, exc)
            except Exception:
                log.exception("scale reverts: %s failed", rid)
            else:
                if said is not None:
                    told.setdefault(said[0], []).append((rid, *said[1:]))
        for incident_id, done in told.items():
            text = _joined([text for _, text, _, _ in done])
            backs = bounding([b for _, _, b, _ in done if b is not None], self.scaler.revert_order)
            try:
                gone = {r: ended for r, _, _, ended in done}
                at = await self._say(incident_id, text, gone=gone, follow=bool(backs))
                if at is not None and backs:
                    followed = Followed(incident_id, at[0], at[1].timestamp(), text, tuple(backs))
                    stored = _FOLLOWED.dump_json(followed).decode()
                    member, due = f"{incident_id}|{at[0]}", followed.said_at + self._check_s
                    await self._follows.schedule(member, due, stored)
            except RedisError as exc:
                log.warning("scale reverts: %s: Redis: %s; not told: %s", incident_id, exc, text)
        now = self.clock().timestamp()
        await sweep(self._follows, now, self._follow, follow_log, "put-back follow-ups")

    def _order(self, rid: str) -> int:
        order = self.scaler.revert_order
        changed = rid.rpartition("|")[2]
        return order.index(changed) if changed in order else len(order)

    async def _look(self, rid: str) -> tuple[str, str, Back | None, str] | None:
        """What to tell `rid`'s incident (id, text, bound to follow, how it ended), if anything."""
        claim = await self._due.claim(rid, self.clock().timestamp(), self._lease_s)
        if claim is None:
            return None  # not due any more
        record = PutBackDue.load(await self._due.data(rid))
        if record is None:
            log.warning("scale reverts: %s: record unreadable or gone; dropped", rid)
            await self._due.done(claim)
            return None
        now, state = self.clock(), None
        if record.warning and self.warnings is not None:
            found = await self.warnings.get(record.target.runner_type)
            state = found if found is not None and found.uid == record.warning else None
        record = await self._hand_over(claim, record, state)
        if record is None:
            return None  # the claim was lost
        why, record, next_at = await self._why_now(record, state, now)
        if why is not None and await self._earlier_to_go_back(record):
            why, next_at = None, now.timestamp() + self._check_s
        if why is None:
            await self._due.reschedule(claim, next_at, record.dump())
            return None
        try:
            result = await within(
                self.scaler.revert(record.target, record.undo),
                self.config.backend_timeout_seconds,
                self.scaler.name,
            )
        except Exception as failed:
            exc = failed if isinstance(failed, BackendError) else self._unforeseen(record)
            if exc.retryable and record.attempts + 1 < MAX_ATTEMPTS:
                again = replace(record, attempts=record.attempts + 1)
                wait = wait_after(again.attempts, first=FIRST_BACKOFF_S, maximum=MAX_BACKOFF_S)
                log.warning("scale reverts: %s: %s; again in %.0f s", record.id, exc, wait)
                await self._due.reschedule(claim, now.timestamp() + wait, again.dump())
                return None
            text = (
                f"Could not put {record.target.runner_type} back ({why}): {exc}. "
                f"{record.undo.field} stays {record.undo.after}"
            )
            back, ended = None, ENDED_FAILED
        else:
            # Outside the try: a put-back done is never told as one that failed.
            text = _said(record, why, result)
            whole = result.done and not result.left
            back = Back(record.target, record.undo.field, record.undo.before) if whole else None
            ended = ENDED_BACK if whole else ENDED_PART if result.done else ENDED_LEFT
        if not await self._due.done(claim):
            return None
        if record.warning:
            await self._say_on_warning(record, text, ended=True)
            return None
        return record.incident_id, text, back, ended

    def _unforeseen(self, record: PutBackDue) -> BackendError:
        """A failure no backend classified (a bug), tried again as a transient one: left to
        escape, it was tried at every look, uncounted and never told."""
        log.exception("scale reverts: %s: %s failed unexpectedly", record.id, self.scaler.name)
        message = f"{self.scaler.name} failed unexpectedly (queuepilot's log says why)"
        return BackendError(message, retryable=True)

    async def _hand_over(
        self, claim: Claim, record: PutBackDue, state: WarningState | None
    ) -> PutBackDue | None:
        """The alert fired: the incident that took the warning on owns its scale-up now. The new
        owner is kept first; `taken_from` stays until the thread and the warning are told, so a
        look after a Redis error between tells them."""
        if state is not None and state.phase is Phase.FOLDED:
            owner = state.incident_id
            record = replace(record, incident_id=owner, warning="", taken_from=record.warning)
            if not await self._due.keep(claim, record.dump()):
                return None
        if not record.taken_from:
            return record
        await self._take_on(record, state)
        warning = replace(record, warning=record.taken_from)
        await self._say_on_warning(warning, f"Incident {record.incident_id} took it on")
        return replace(record, taken_from="")

    async def _take_on(self, record: PutBackDue, state: WarningState | None) -> None:
        """Each scale-up the warning made under `record` becomes the incident's, as it was made."""
        undo, runner_type = record.undo, record.target.runner_type
        taken = [up for up in state.scaled if up.back == record.id and up.at] if state else []
        if not taken:  # never the pilot's: it acted on no warning before this release
            at = datetime.fromtimestamp(record.scaled_at, UTC)
            taken = [made(runner_type, undo.after - (undo.before or 0), record.by, at, undo)]
        # One scale-up a record: the latest says what goes back, from where and by when.
        last = self.going_back(taken[-1], record)
        taken = [*(up.model_copy(update={"back": ""}) for up in taken[:-1]), last]
        detail = f"· {self.plan()}"

        def told(
            incident: Incident, now: datetime, timeline: list[Event]
        ) -> tuple[Commit | None, None]:
            first = taken[0]
            if any(
                e.scale and (e.scale.at, e.scale.field) == (first.at, first.field) for e in timeline
            ):
                return None, None  # said by a look that failed after it
            said = without_put_backs(incident, {record.id}).model_copy(update={"updated_at": now})
            events, replies = [], []
            for k, done in enumerate(taken):
                at = now + timedelta(microseconds=k)  # its own moment: its buttons name it
                was = "unset" if done.before is None else str(done.before)
                text = (
                    f"Took on the early warning's scale-up of {runner_type} by {done.by} "
                    f"({done.field} {was} → {done.after}{', undone' if done.undone else ''})"
                )
                number = said.replies + len(replies) + 1
                # Still followed, or a pilot's act with its Undo: its reply here is edited later.
                edited = done.followed or (done.pilot and not done.undone)
                moved = {"reply": number, "detail": detail} if edited else {}
                moved |= dict.fromkeys(("said", "came_said", "fate"), "")  # the warning's words
                event = Event(at=at, kind="scaled", text=text, scale=done.model_copy(update=moved))
                ts_as = reply_ts(number) if edited else ""
                rendered = render_event(said, event, detail=detail)
                replies.append(Reply("event", BAND_EVENT, rendered, ts_as=ts_as))
                said = with_action(said, event)
                events.append(event)
            commit = Commit(said, events=tuple(events), replies=tuple(replies), root=True)
            return commit, None

        fresh = await self.store.commit_fresh(
            record.incident_id, amending(told), clock=self.clock, with_timeline=True
        )
        if fresh.busy:
            log.warning("scale reverts: incident %s kept changing; not told", record.incident_id)

    async def _why_now(
        self, record: PutBackDue, state: WarningState | None, now: datetime
    ) -> tuple[str | None, PutBackDue, float]:
        """Why `record` goes back now (None: it stays), the record as kept, when to look again."""
        at, after = now.timestamp(), self.config.scale_revert_after
        again = at + self._check_s
        late = (
            f"{_span(after)} after the scale-up"
            if after and at >= record.scaled_at + after
            else None
        )
        if record.warning:
            ended = "its early warning ended" if state is None else state.episode_over(at) or None
            return late or ended, record, again
        incident = await self.store.get(record.incident_id)
        if incident is None:
            return "its incident is no longer known", record, again
        if late or incident.is_open:
            return late, record, again
        # Resolved: it goes back once the type's queue stayed drained the settle time.
        settle = self.config.scale_revert_settle
        if not settle:
            return "the incident resolved", record, at
        drained = await self._drained(record.target.runner_type)
        if drained is False:
            return None, replace(record, queued_at=at), again
        since = max((incident.resolved.at or now).timestamp(), record.queued_at)
        if at >= since + settle:
            return f"the incident resolved and its queue stayed drained {_span(settle)}", record, at
        # Looked at again as usual while the queue can be read, else when the time is up.
        return None, record, min(since + settle, again) if drained else since + settle

    async def _drained(self, runner_type: str) -> bool | None:
        if self.readings is None:
            return None
        try:
            reading = await self.readings.latest()
        except RedisError:
            return None
        if reading is None or reading.fleet is None or reading.error:
            return None
        return type_drained(reading.fleet, runner_type, self.config.drain_rule)

    async def _earlier_to_go_back(self, record: PutBackDue) -> bool:
        """Whether a field of the same target that goes back before this one's is still raised."""
        order = self.scaler.revert_order
        if record.undo.field not in order:
            return False
        for earlier in order[: order.index(record.undo.field)]:
            rid = record_id(record.target.runner_type, earlier)
            other = PutBackDue.load(await self._due.data(rid))
            if other is not None and other.target.target == record.target.target:
                return True
        return False

    async def _say_on_warning(self, record: PutBackDue, text: str, *, ended: bool = False) -> None:
        def said(state: WarningState | None) -> WarningState | None:
            if state is None or state.uid != record.warning:
                log.info("scale reverts: warning of %s gone: %s", record.target.runner_type, text)
                return None
            scaled = fate_told(state, record.id, f"{text}.", ended=ended)
            return state.with_scaled(scaled)

        if self.warnings is None:
            log.info("scale reverts: warning of %s gone: %s", record.target.runner_type, text)
        elif await self.warnings.save_fresh(record.target.runner_type, said) is False:
            log.warning("scale reverts: warning kept changing; not told: %s", text)

    async def _say(
        self, incident_id: str, text: str, *, gone: dict[str, str], follow: bool
    ) -> tuple[int, datetime] | None:
        """The put-backs' event and reply; `follow`: its ts kept, its number and time returned."""

        def told(
            incident: Incident, now: datetime, _: list[Event]
        ) -> tuple[Commit | None, tuple[int, datetime] | None]:
            event = Event(at=now, kind="scale_reverted", text=text)
            number = incident.replies + 1
            rendered = render_event(incident, event)
            reply = Reply("event", BAND_EVENT, rendered, ts_as=reply_ts(number) if follow else "")
            ended, edits = acts_ended(incident, gone, now)
            said = without_put_backs(ended, set(gone)).model_copy(update={"updated_at": now})
            commit = Commit(said, events=(event,), replies=(reply, *edits), root=False)
            return commit, (number, now)

        fresh = await self.store.commit_fresh(
            incident_id, amending(told), clock=self.clock, with_timeline=True
        )
        if not fresh.found:
            log.info("scale reverts: incident %s gone: %s", incident_id, text)
        elif fresh.busy:
            log.warning("scale reverts: incident %s kept changing; not told: %s", incident_id, text)
        return fresh.answer if fresh.committed is not None else None

    async def undo_now(self, target: ScaleTarget, undo: Undo) -> Reverted:
        """One scale-up put back at once (the pilot's Undo). Raises `BackendError`."""
        rid = record_id(target.runner_type, undo.field)
        held = PutBackDue.load(await self._due.data(rid))
        if held is not None:
            # Out of the looks' way while it goes back: a look that claimed it loses its claim.
            await self._due.schedule(rid, self.clock().timestamp() + self._lease_s, held.dump())
        result = await within(
            self.scaler.revert(target, undo), self.config.backend_timeout_seconds, self.scaler.name
        )
        record = PutBackDue.load(await self._due.data(rid))
        if not result.done or record is None or record.undo.after != undo.after:
            return result
        if record.undo.before == undo.before:
            await self._due.remove(rid)
            await self.redis.delete(self.keys.scale_revert(rid))
        else:
            earlier = replace(record, undo=replace(record.undo, after=undo.before or 0))
            # Due at a new time: a look that claimed the record meanwhile loses its claim.
            await self._due.schedule(rid, self.clock().timestamp(), earlier.dump())
        return result

    async def _follow(self, member: str) -> None:
        """A put-back's runners read again: said once all are within their bounds, or are late."""
        claim = await self._follows.claim(member, self.clock().timestamp(), self._lease_s)
        if claim is None:
            return  # not due any more
        try:
            followed = _FOLLOWED.validate_json(await self._follows.data(member) or "")
        except ValidationError:
            follow_log.warning("put-back follow-ups: %s: unreadable or gone; dropped", member)
            await self._follows.done(claim)
            return
        now, verify_s = self.clock(), self.config.scale_verify_s
        due = datetime.fromtimestamp(followed.said_at, UTC) + timedelta(seconds=verify_s)
        seen: list[tuple[Back, Landed]] = []
        timeout_s, scaler = self.config.backend_timeout_seconds, self.scaler
        for back in followed.backs:
            try:
                read: Capacity | str | None = await within(
                    scaler.capacity(back.target), timeout_s, scaler.name
                )
            except BackendError as exc:
                read = str(exc)
            decided = landed(back, read, scaler=scaler.name, now=now, due=due)
            if decided is None:
                await self._follows.reschedule(claim, now.timestamp() + self._check_s)
                return
            seen.append((back, decided))
        if await self._follows.done(claim):
            await self._say_seen(followed, seen)

    async def _say_seen(self, followed: Followed, seen: list[tuple[Back, Landed]]) -> None:
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
            follow_log.info(
                "put-back follow-ups: incident %s not told: %s", followed.incident_id, seen
            )


def _joined(texts: list[str]) -> str:
    """Several put-backs in one reply, each type and reason said once."""
    parts: list[str] = []
    last = ""
    for text in texts:
        head, sep, rest = text.partition("): ")
        if sep and head == last:
            parts[-1] += f"; {rest}"
            continue
        parts.append(text)
        last = head if sep else ""
    return "; ".join(parts)


def _span(seconds: float) -> str:
    return duration(timedelta(seconds=seconds))


def _said(record: PutBackDue, why: str, result: Reverted) -> str:
    runner_type = record.target.runner_type
    if not result.done:
        return f"Left {runner_type} as it is ({why}): {result.detail}"
    if not result.left:
        return f"Put {runner_type} back ({why}): {result.detail} ({record.backend})"
    part = f"Put {runner_type} back only part of the way ({why}): {result.detail}"
    return f"{part} ({record.backend}); {result.left}"


# How a record ended, as the pilot's acts it put back say it in place of their buttons.
ENDED_BACK = "Put back at {}: nothing to undo"
ENDED_PART = "Put back part of the way at {}: nothing more to undo"
ENDED_LEFT = "Left as it is at {} (changed since): nothing to undo"
ENDED_FAILED = "Could not be put back at {}"  # its Undo stays: the act is still in place
# Further from its act than this, the moment is said with its day (its reply reads it near it).
_SAME_DAY = timedelta(hours=12)


def acts_ended(
    incident: Incident, gone: Mapping[str, str], now: datetime
) -> tuple[Incident, tuple[Reply, ...]]:
    """The pilot's acts the records `gone` put back, marked with how (`fate`), and an edit of
    each one's own reply: its Undo and Pause pilot give way to that line."""
    at = now.astimezone(UTC)
    changed: dict[datetime, ScaleUp] = {}
    for e in incident.actions:
        up = e.scale
        if up is None or not up.pilot or up.undone or up.fate or not up.field:
            continue
        ended = gone.get(up.back or record_id(up.runner_type, up.field))
        if ended is None or ended == ENDED_FAILED:
            continue  # a put-back that failed leaves the act in place: its Undo still applies
        near = up.at is None or abs(at - up.at) < _SAME_DAY
        when = f"{at:%H:%M} UTC" if near else f"{at:%Y-%m-%d %H:%M} UTC"
        changed[e.at] = up.model_copy(update={"fate": ended.format(when)})
    if not changed:
        return incident, ()
    marked = with_scale_ups(incident, changed)
    edits = tuple(
        Reply("event", BAND_EVENT, render_act(marked, e), edits=reply_ts(up.reply))
        for e in marked.actions
        if e.at in changed and (up := e.scale) is not None and up.reply
    )
    return marked, edits
