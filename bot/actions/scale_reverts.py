"""Scale-ups that undo themselves: what a scale-up from Slack changed is put back once its
incident has resolved and the runner type's queue has stayed drained for `SCALE_REVERT_SETTLE`
since (a real fleet queues again when capacity goes the instant an alert clears), or after
`SCALE_REVERT_AFTER`, whichever comes first. Without a live reading of the type, the settle time
counts from the resolve. The put-backs of one incident that fall due together are said in one
thread reply.
A scale-up made from an early warning is the warning's until the alert fires (then its incident
takes it on, and says so in its thread): it goes back once the warning's queue is over
(`WarningState.episode_over`), and its message says so.

Each scale-up that can be put back (and was not kept) leaves a record in Redis: JSON under
`scale-revert:<id>` and the id in the `scale-reverts` sorted set, scored by when to look at it
next. Records are per runner type and field, so a second scale-up of the same type extends the
first (the oldest value is the one put back) instead of racing it. The leader's tick claims a
due record under a lease (`bot.storage.due_set`): if the leader dies the lease runs out and the
next leader takes it. A record is rescheduled or dropped only by the holder of that claim, so a
scale-up recorded meanwhile is never lost; the claim also stays for replicas of 0.25 during a
rollout, so the two never revert or report the same record twice.

The backend puts the value back only while it is still the one set from Slack; otherwise it
is left, and the thread says what it is now and who changed it where the API tells. Two
scale-ups of one target in different fields (ARC's minRunners and maxRunners), made in either
order, go back in the backend's `revert_order` (the floor first): a record waits while one
before it in that order is going back too, so lowering the ceiling never meets a raised floor
of our own. A put-back the target's bounds allow only part of the way says what it left and
why. A revert that fails transiently is tried again with backoff; one that cannot succeed is
reported once and dropped. If Redis loses its data (a restart without persistence), its
records go with it: those scale-ups stay.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.backends.errors import BackendError, deadline_of, within
from bot.backends.scale import Reverted, Scaler, Undo
from bot.backoff import wait_after
from bot.config import Settings
from bot.domain.early_warning import SCALE_UNTIL, Phase, WarningState
from bot.domain.incident_fleet import type_drained
from bot.domain.incidents import (
    Event,
    Incident,
    PutBack,
    ScaleDone,
    with_action,
    with_put_back,
    without_put_backs,
)
from bot.domain.scaling import ScaleTarget
from bot.domain.units import duration
from bot.fleet.readings import FleetReadings
from bot.render.replies import render_event
from bot.storage.due_set import Claim, scale_revert_records
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore, Reply
from bot.storage.keys import Keys

log = logging.getLogger(__name__)

# A transient failure is tried again after 30 s, doubling, at most every 15 minutes; after
# this many it is reported and dropped (with the doubling, about 3 hours of trying).
FIRST_BACKOFF_S = 30.0
MAX_BACKOFF_S = 900.0
MAX_ATTEMPTS = 15


@dataclass(frozen=True)
class RevertRecord:
    """What one scale-up from Slack changed, and where to say it was put back: its incident, or
    its early warning (`warning`: the warning's uid; `incident_id` empty)."""

    id: str
    incident_id: str
    target: ScaleTarget
    undo: Undo
    backend: str
    by: str
    scaled_at: float
    attempts: int = 0
    warning: str = ""
    # When a look after the resolve last saw the type's queue not drained (0: none did).
    queued_at: float = 0.0

    def dump(self) -> str:
        data = asdict(self)
        data["undo"] = self.undo.dump()
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def load(cls, text: str | None) -> RevertRecord | None:
        try:
            data = json.loads(text or "")
            target = ScaleTarget(**data["target"])
            undo = Undo.load(data["undo"])
            if undo is None:
                return None
            return cls(
                id=str(data["id"]),
                incident_id=str(data["incident_id"]),
                target=target,
                undo=undo,
                backend=str(data["backend"]),
                by=str(data["by"]),
                scaled_at=float(data["scaled_at"]),
                attempts=int(data.get("attempts", 0)),
                warning=str(data.get("warning", "")),
                queued_at=float(data.get("queued_at", 0.0)),
            )
        except (ValueError, TypeError, KeyError):
            return None


def record_id(runner_type: str, field: str) -> str:
    return f"{runner_type}|{field}"


class ScaleReverts:
    def __init__(
        self,
        redis: Redis,
        keys: Keys,
        store: IncidentStore,
        scaler: Scaler,
        *,
        config: Settings,
        clock: Callable[[], datetime],
        warnings: WarningStore | None = None,
        readings: FleetReadings | None = None,
    ) -> None:
        self._readings = readings
        self._store = store
        self._warnings = warnings
        self._scaler = scaler
        self._config = config
        # Resolution is noticed within a few ticks; the record costs one Redis read a look.
        self._check_s = config.status_tick_seconds * 3
        self._clock = clock
        self._due = scale_revert_records(redis, keys)

    @property
    def lease_s(self) -> float:
        """Long enough for the backend's call and the thread's commit."""
        return 2 * deadline_of(self._config.backend_timeout_seconds) + 30

    # -- recording a scale-up --------------------------------------------------------------

    async def remember(
        self, incident_id: str, target: ScaleTarget, undo: Undo, *, by: str, warning: str = ""
    ) -> RevertRecord:
        """Record a scale-up to put back, owned by its incident or its early warning (`warning`).
        A record of the same runner type and field (an earlier scale-up not yet put back) keeps
        its value before: that is what goes back, when the latest owner says."""
        now = self._clock().timestamp()
        rid = record_id(target.runner_type, undo.field)
        earlier = RevertRecord.load(await self._due.data(rid))
        if earlier is not None and earlier.target.target == target.target:
            undo = replace(undo, before=earlier.undo.before)
        record = RevertRecord(
            rid, incident_id, target, undo, self._scaler.name, by, now, warning=warning
        )
        await self._due.schedule(rid, now + self._check_s, record.dump())
        if earlier is not None and earlier.incident_id not in ("", incident_id):
            await self._handed_on(earlier.incident_id, rid)
        return record

    async def _handed_on(self, incident_id: str, rid: str) -> None:
        """Another incident's scale-up of the same type and field owns the record now: the
        earlier incident no longer lists it as its own to go back (its summary would promise a
        put-back its thread never tells)."""

        def handed_on(
            incident: Incident, now: datetime, _: list[Event]
        ) -> tuple[Commit | None, None]:
            if all(p.id != rid for p in incident.put_backs):
                return None, None
            return Commit(without_put_backs(incident, {rid}), root=False), None

        await self._store.commit_fresh(incident_id, handed_on, clock=self._clock)

    def plan(self, *, warning: bool = False) -> str:
        """When a recorded scale-up goes back, for replies: "once the incident resolves and its
        queue stays drained 30 min, or after 4 h"."""
        until = SCALE_UNTIL if warning else self.settle_said
        after = self._config.scale_revert_after
        if not after:
            return f"when {until}"
        return f"when {until} or after {duration(timedelta(seconds=after))}"

    def put_back(self, record: RevertRecord) -> PutBack:
        """What the incident keeps of a recorded scale-up, for its summary."""
        after = self._config.scale_revert_after
        settle = self._config.scale_revert_settle
        return PutBack(
            id=record.id,
            runner_type=record.target.runner_type,
            field=record.undo.field,
            before=record.undo.before,
            after=record.undo.after,
            when=f"once its queue has stayed drained {_span(settle)}" if settle else "",
            latest=datetime.fromtimestamp(record.scaled_at + after, UTC) if after else None,
        )

    @property
    def settle_said(self) -> str:
        """ "the incident resolves and its queue stays drained 30 min" """
        settle = self._config.scale_revert_settle
        if not settle:
            return "the incident resolves"
        return f"the incident resolves and its queue stays drained {_span(settle)}"

    # -- the sweep -------------------------------------------------------------------------

    async def tick(self) -> None:
        """Look at every due record; never raises. What goes back of one incident in this look
        is said in one reply."""
        now = self._clock().timestamp()
        try:
            due = await self._due.pending(now)
        except RedisError as exc:
            log.warning("scale reverts: Redis unavailable: %s", exc)
            return
        told: dict[str, list[tuple[str, str]]] = {}
        for rid in sorted(due, key=self._order):  # a floor before its ceiling: both go now
            try:
                said = await self.check(rid)
            except RedisError as exc:
                log.warning("scale reverts: %s: Redis: %s; retrying", rid, exc)
            except Exception:
                log.exception("scale reverts: %s failed", rid)
            else:
                if said is not None:
                    told.setdefault(said[0], []).append((rid, said[1]))
        for incident_id, done in told.items():
            texts = [text for _, text in done]
            try:
                await self._say(incident_id, _joined(texts), gone={r for r, _ in done})
            except RedisError as exc:
                log.warning("scale reverts: %s: Redis: %s; not told: %s", incident_id, exc, texts)

    def _order(self, rid: str) -> int:
        order = self._scaler.revert_order
        changed = rid.rpartition("|")[2]
        return order.index(changed) if changed in order else len(order)

    async def check(self, rid: str) -> tuple[str, str] | None:
        """Look at one record; what to tell its incident's thread (id, text) when it went back
        or could not: a warning's own message is told at once."""
        # Claimed as it is looked at, not with the others: each look may wait on the backend.
        claim = await self._due.claim(rid, self._clock().timestamp(), self.lease_s)
        if claim is None:
            return None  # not due any more (or a 0.25 replica holds it, during a rollout)
        record = RevertRecord.load(await self._due.data(rid))
        if record is None:
            log.warning("scale reverts: %s: record unreadable or gone; dropped", rid)
            await self._end(claim, None)
            return None
        record, text = await self._check(record, claim)
        if text is None:
            return None
        if record.warning:
            await self._say_on_warning(record, text)
            return None
        return record.incident_id, text

    async def _check(self, record: RevertRecord, claim: Claim) -> tuple[RevertRecord, str | None]:
        now = self._clock()
        state = await self._warning_of(record)
        if state is not None and state.phase is Phase.FOLDED:
            record = await self._hand_over(record, state)
        why, record, next_at = await self._why_now(record, state, now)
        if why is None:
            await self._end(claim, record, next_at)
            return record, None
        if await self._earlier_to_go_back(record):
            await self._end(claim, record, now.timestamp() + self._check_s)
            return record, None
        try:
            result = await within(
                self._scaler.revert(record.target, record.undo),
                self._config.backend_timeout_seconds,
                self._scaler.name,
            )
        except BackendError as exc:
            if exc.retryable and record.attempts + 1 < MAX_ATTEMPTS:
                again = replace(record, attempts=record.attempts + 1)
                wait = wait_after(again.attempts, first=FIRST_BACKOFF_S, maximum=MAX_BACKOFF_S)
                log.warning("scale reverts: %s: %s; again in %.0f s", record.id, exc, wait)
                await self._end(claim, again, now.timestamp() + wait)
                return record, None
            text = (
                f"Could not put {record.target.runner_type} back ({why}): {exc}. "
                f"{record.undo.field} stays {record.undo.after}"
            )
            return record, (text if await self._end(claim, None) else None)
        said = _said(record, why, result)
        return record, (said if await self._end(claim, None) else None)

    async def _hand_over(self, record: RevertRecord, state: WarningState) -> RevertRecord:
        """The alert fired: the incident that took the warning on owns its scale-up now, and
        its thread says so (the record is kept as the incident's when this look ends)."""
        taken = replace(record, incident_id=state.incident_id, warning="")
        undo = record.undo
        runner_type = record.target.runner_type
        done = ScaleDone(
            runner_type=runner_type,
            added=undo.after - (undo.before or 0),
            by=record.by,
            at=datetime.fromtimestamp(record.scaled_at, UTC),
            field=undo.field,
            after=undo.after,
        )
        await self._say(
            taken.incident_id,
            f"Took on the early warning's scale-up of {runner_type} by {record.by} "
            f"({undo.field} {_value(undo.before)} → {undo.after})",
            kind="scaled",
            on_root=True,
            detail=f"· {plan_sentence(self.plan())}",
            put_back=self.put_back(taken),
            scale=done,
        )
        await self._say_on_warning(record, f"Incident {taken.incident_id} took it on")
        return taken

    async def _why_now(
        self, record: RevertRecord, state: WarningState | None, now: datetime
    ) -> tuple[str | None, RevertRecord, float]:
        """Why `record` goes back now (its owner's state read), or None while it stays; the
        record as it is kept, and when to look again."""
        again = now.timestamp() + self._check_s
        if record.warning:
            return self._why_warning(record, state, now), record, again
        incident = await self._store.get(record.incident_id)
        why = self._why(record, incident, now)
        if why is not None or incident is None or incident.is_open:
            return why, record, again
        return await self._settled(record, incident, now)

    async def _settled(
        self, record: RevertRecord, incident: Incident, now: datetime
    ) -> tuple[str | None, RevertRecord, float]:
        """A resolved incident's scale-up goes back once its type's queue has stayed drained for
        the settle time: since the resolve, or since a look last saw it queueing. The records of
        one incident whose queues stayed drained settle from the same instant, so they go back
        in one look, and one reply."""
        at = now.timestamp()
        settle = self._config.scale_revert_settle
        if not settle:
            return "the incident resolved", record, at
        drained = await self._drained(record.target.runner_type)
        if drained is False:
            return None, replace(record, queued_at=at), at + self._check_s
        since = max((incident.resolved_at or now).timestamp(), record.queued_at)
        if at >= since + settle:
            return f"the incident resolved and its queue stayed drained {_span(settle)}", record, at
        # Looked at again as usual while the queue can be read, else when the time is up.
        return (
            None,
            record,
            min(since + settle, at + self._check_s) if drained else since + settle,
        )

    async def _drained(self, runner_type: str) -> bool | None:
        """The type's queue in the fleet's latest reading: None when nobody can tell."""
        if self._readings is None:
            return None
        try:
            reading = await self._readings.latest()
        except RedisError:
            return None
        if reading is None or reading.fleet is None or reading.error:
            return None
        return type_drained(reading.fleet, runner_type, self._config.drain_rule)

    async def _earlier_to_go_back(self, record: RevertRecord) -> bool:
        """Whether a scale-up of ours of the same target, in a field that goes back before this
        one's (`revert_order`), is still to go back: this one waits for it, due or not. ARC's
        maxRunners cannot go back below a minRunners we raised; going back part of the way now
        would leave it raised for good once the floor goes back."""
        order = self._scaler.revert_order
        if record.undo.field not in order:
            return False
        for earlier in order[: order.index(record.undo.field)]:
            rid = record_id(record.target.runner_type, earlier)
            other = RevertRecord.load(await self._due.data(rid))
            if other is not None and other.target.target == record.target.target:
                return True
        return False

    def _why_warning(
        self, record: RevertRecord, state: WarningState | None, now: datetime
    ) -> str | None:
        """Why a warning's scale-up goes back now, or None while it stays."""
        after = self._config.scale_revert_after
        if after and now.timestamp() >= record.scaled_at + after:
            return f"{duration(timedelta(seconds=after))} after the scale-up"
        if state is None:
            return "its early warning ended"
        return state.episode_over(now.timestamp()) or None

    def _why(self, record: RevertRecord, incident: Incident | None, now: datetime) -> str | None:
        """Why the scale-up goes back now whatever its queue, or None: the settle time decides
        for a resolved incident (`_settled`)."""
        if incident is None:
            return "its incident is no longer known"
        after = self._config.scale_revert_after
        if after and now.timestamp() >= record.scaled_at + after:
            return f"{duration(timedelta(seconds=after))} after the scale-up"
        return None

    async def _end(self, claim: Claim, keep: RevertRecord | None, next_at: float = 0.0) -> bool:
        """Drop the record (`keep` None) or keep it for `next_at`, while the claim is ours."""
        if keep is None:
            return await self._due.done(claim)
        return await self._due.reschedule(claim, next_at, keep.dump())

    async def _say_on_warning(self, record: RevertRecord, text: str) -> None:
        """Said on the warning's message in place of when its scale-up goes back (no longer
        true), while the message is the same warning's; a newer version saved meanwhile is read
        again and said on."""

        def said(state: WarningState | None) -> WarningState | None:
            if state is None or state.uid != record.warning:
                log.info("scale reverts: warning of %s gone: %s", record.target.runner_type, text)
                return None
            scaled = put_back_said(state.scaled, plan_sentence(self.plan(warning=True)), f"{text}.")
            return state.changed(self._clock().timestamp(), scaled=scaled)

        if self._warnings is None or not record.warning:
            log.info("scale reverts: warning of %s gone: %s", record.target.runner_type, text)
        elif not await self._warnings.save_fresh(record.target.runner_type, said):
            log.warning("scale reverts: warning kept changing; not told: %s", text)

    async def _warning_of(self, record: RevertRecord) -> WarningState | None:
        """The early warning that owns `record`, while it is still the same warning."""
        if not record.warning or self._warnings is None:
            return None
        state = await self._warnings.get(record.target.runner_type)
        return state if state is not None and state.uid == record.warning else None

    async def _say(
        self,
        incident_id: str,
        text: str,
        kind: str = "scale_reverted",
        *,
        on_root: bool = False,
        detail: str = "",
        put_back: PutBack | None = None,
        gone: set[str] | None = None,
        scale: ScaleDone | None = None,
    ) -> None:
        """The event and its thread reply (with `detail`, mrkdwn, after the text), fenced by the
        incident's version like every action; `on_root` when it is one of the incident's actions
        now, listed on its root with them. The incident keeps `put_back` to go back, and no
        longer the records `gone`; the event records the scale-up `scale`, if one."""

        def told(incident: Incident, now: datetime, _: list[Event]) -> tuple[Commit, None]:
            event = Event(at=now, kind=kind, text=text, scale=scale)
            reply = Reply("event", BAND_EVENT, render_event(incident, event, detail=detail))
            said = without_put_backs(incident, gone or set()).model_copy(update={"updated_at": now})
            said = with_put_back(said, put_back) if put_back is not None else said
            commit = Commit(
                with_action(said, event) if on_root else said,
                events=(event,),
                replies=(reply,),
                root=on_root,
            )
            return commit, None

        fresh = await self._store.commit_fresh(incident_id, told, clock=self._clock)
        if not fresh.found:
            log.info("scale reverts: incident %s gone: %s", incident_id, text)
        elif fresh.busy:
            log.warning("scale reverts: incident %s kept changing; not told: %s", incident_id, text)


def plan_sentence(plan: str) -> str:
    """Said once, where the scale-up is told: its thread reply, or its warning's message."""
    return f"It goes back {plan}, unless someone changes it meanwhile."


def put_back_said(scaled: str, plan: str, said: str) -> str:
    """A warning's words on its scale-ups, with `said` in place of the first `plan` sentence (the
    one of the scale-up it tells of) and the others dropped: nothing else is still to go back
    on this warning's say. Added at the end where no plan is left to replace."""
    if plan not in scaled:
        return scaled if said in scaled else f"{scaled} · {said}" if scaled else said
    first, _, rest = scaled.partition(plan)
    return f"{first}{said}{rest.replace(f' {plan}', '').replace(plan, '')}"


def _joined(texts: list[str]) -> str:
    """One reply for several put-backs: "Put linux back (the incident resolved): minRunners
    125 → 0 (ARC); maxRunners 130 → 120 (ARC)", the type and the reason said once."""
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


def _value(before: int | None) -> str:
    return "unset" if before is None else str(before)


def _said(record: RevertRecord, why: str, result: Reverted) -> str:
    runner_type = record.target.runner_type
    if result.done and result.left:
        return (
            f"Put {runner_type} back only part of the way ({why}): {result.detail} "
            f"({record.backend}); {result.left}"
        )
    if result.done:
        return f"Put {runner_type} back ({why}): {result.detail} ({record.backend})"
    return f"Left {runner_type} as it is ({why}): {result.detail}"
