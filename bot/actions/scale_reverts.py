"""Scale-ups that undo themselves: what a scale-up from Slack changed is put back when its
incident resolves (drained or by hand) or after `SCALE_REVERT_AFTER`, whichever comes first.
A scale-up made from an early warning is the warning's until the alert fires (then its incident
takes it on, and says so in its thread): it goes back once the warning's queue is over
(`WarningState.episode_over`), and its message says so.

Each scale-up that can be put back (and was not kept) leaves a record in Redis: JSON under
`scale-revert:<id>` and the id in the `scale-reverts` sorted set, scored by when to look at it
next. Records are per runner type and field, so a second scale-up of the same type extends the
first (the oldest value is the one put back) instead of racing it. A replica's tick claims a
due record atomically, by moving its score to the end of a lease: other replicas skip it, and
if the replica dies the lease runs out and another takes it. The claim's score is its token: a
record is rescheduled or dropped only by the holder of that claim, so a scale-up recorded
meanwhile is never lost, and two replicas never revert or report the same record twice.

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
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.backends.errors import BackendError, deadline_of, within
from bot.backends.scale import Reverted, Scaler, Undo
from bot.backoff import wait_after
from bot.domain.early_warning import SCALE_UNTIL, Phase, WarningState
from bot.domain.incidents import Event, Incident
from bot.domain.scaling import ScaleTarget
from bot.domain.units import duration
from bot.render.replies import render_event
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore, Reply
from bot.storage.keys import Keys
from bot.storage.warnings import WarningStore

log = logging.getLogger(__name__)

# A transient failure is tried again after 30 s, doubling, at most every 15 minutes; after
# this many it is reported and dropped (with the doubling, about 3 hours of trying).
FIRST_BACKOFF_S = 30.0
MAX_BACKOFF_S = 900.0
MAX_ATTEMPTS = 15
RECORD_TTL_S = 90 * 86_400  # a safety net only: the sweep always ends a record it can read
MAX_COMMIT_ATTEMPTS = 20

# Claims a due record: moves its score to the end of the lease (the claim's token).
_CLAIM = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 1
end
return 0
"""

# Ends a claim, only while it is still ours (the score is our lease's end): ARGV[3] 'drop'
# forgets the record; else ARGV[3] is the next look's time and ARGV[4] the record to keep.
_FINISH = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
if ARGV[3] == 'drop' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[2])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[4], 'EX', ARGV[5])
end
return 1
"""


@dataclass(frozen=True)
class RevertConfig:
    # Put back this long after the scale-up even while the incident is open (0: only when it
    # resolves).
    after_s: int = 4 * 3600
    # How often an open incident's scale-ups are looked at again (is it resolved yet?).
    check_s: float = 15.0
    timeout_s: float = 10.0


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
        config: RevertConfig,
        clock: Callable[[], datetime],
        warnings: WarningStore | None = None,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._store = store
        self._warnings = warnings
        self._scaler = scaler
        self.config = config
        self._clock = clock
        self._claim = redis.register_script(_CLAIM)
        self._finish = redis.register_script(_FINISH)

    @property
    def lease_s(self) -> float:
        """Long enough for the backend's call and the thread's commit."""
        return 2 * deadline_of(self.config.timeout_s) + 30

    # -- recording a scale-up --------------------------------------------------------------

    async def remember(
        self, incident_id: str, target: ScaleTarget, undo: Undo, *, by: str, warning: str = ""
    ) -> RevertRecord:
        """Record a scale-up to put back, owned by its incident or its early warning (`warning`).
        A record of the same runner type and field (an earlier scale-up not yet put back) keeps
        its value before: that is what goes back, when the latest owner says."""
        now = self._clock().timestamp()
        rid = record_id(target.runner_type, undo.field)
        earlier = RevertRecord.load(await self._redis.get(self._keys.scale_revert(rid)))
        if earlier is not None and earlier.target.target == target.target:
            undo = replace(undo, before=earlier.undo.before)
        record = RevertRecord(
            rid, incident_id, target, undo, self._scaler.name, by, now, warning=warning
        )
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._keys.scale_revert(rid), record.dump(), ex=RECORD_TTL_S)
            pipe.zadd(self._keys.scale_reverts, {rid: now + self.config.check_s})
            await pipe.execute()
        return record

    def plan(self, *, warning: bool = False) -> str:
        """When a recorded scale-up goes back, for replies: "when the incident resolves or
        after 4 h"."""
        until = SCALE_UNTIL if warning else "the incident resolves"
        if not self.config.after_s:
            return f"when {until}"
        return f"when {until} or after {duration(timedelta(seconds=self.config.after_s))}"

    # -- the sweep -------------------------------------------------------------------------

    async def tick(self) -> None:
        """Look at every due record; never raises."""
        now = self._clock().timestamp()
        try:
            due = cast(
                list[str],
                await self._redis.zrangebyscore(
                    self._keys.scale_reverts, "-inf", now, start=0, num=100
                ),
            )
        except RedisError as exc:
            log.warning("scale reverts: Redis unavailable: %s", exc)
            return
        for rid in due:
            try:
                await self.check(rid)
            except RedisError as exc:
                log.warning("scale reverts: %s: Redis: %s; retrying", rid, exc)
            except Exception:
                log.exception("scale reverts: %s failed", rid)

    async def check(self, rid: str) -> None:
        now = self._clock().timestamp()
        # A fraction of a second of noise keeps two replicas' lease ends (the tokens) apart.
        lease = now + self.lease_s + secrets.randbelow(1000) / 1000
        claimed = await self._claim(keys=[self._keys.scale_reverts], args=[rid, now, repr(lease)])
        if not claimed:
            return  # not due any more, or another replica holds it
        record = RevertRecord.load(await self._redis.get(self._keys.scale_revert(rid)))
        if record is None:
            log.warning("scale reverts: %s: record unreadable or gone; dropped", rid)
            await self._end(rid, lease, None)
            return
        await self._check(record, lease)

    async def _check(self, record: RevertRecord, lease: float) -> None:
        now = self._clock()
        state = await self._warning_of(record)
        if state is not None and state.phase is Phase.FOLDED:
            record = await self._hand_over(record, state)
        why = await self._why_now(record, state, now)
        if why is None:
            await self._end(record.id, lease, record, now.timestamp() + self.config.check_s)
            return
        if await self._earlier_to_go_back(record):
            await self._end(record.id, lease, record, now.timestamp() + self.config.check_s)
            return
        try:
            result = await within(
                self._scaler.revert(record.target, record.undo),
                self.config.timeout_s,
                self._scaler.name,
            )
        except BackendError as exc:
            if exc.retryable and record.attempts + 1 < MAX_ATTEMPTS:
                again = replace(record, attempts=record.attempts + 1)
                wait = wait_after(again.attempts, first=FIRST_BACKOFF_S, maximum=MAX_BACKOFF_S)
                log.warning("scale reverts: %s: %s; again in %.0f s", record.id, exc, wait)
                await self._end(record.id, lease, again, now.timestamp() + wait)
                return
            text = (
                f"Could not put {record.target.runner_type} back ({why}): {exc}. "
                f"{record.undo.field} stays {record.undo.after}"
            )
            if await self._end(record.id, lease, None):
                await self._tell(record, text)
            return
        if await self._end(record.id, lease, None):
            await self._tell(record, _said(record, why, result))

    async def _hand_over(self, record: RevertRecord, state: WarningState) -> RevertRecord:
        """The alert fired: the incident that took the warning on owns its scale-up now, and
        its thread says so (the record is kept as the incident's when this look ends)."""
        taken = replace(record, incident_id=state.incident_id, warning="")
        undo = record.undo
        await self._say(
            taken.incident_id,
            f"Took on the early warning's scale-up of {record.target.runner_type} by {record.by} "
            f"({undo.field} {_value(undo.before)} → {undo.after}): it goes back "
            f"{self.plan()}, unless someone changes it meanwhile",
            kind="scaled",
        )
        return taken

    async def _why_now(
        self, record: RevertRecord, state: WarningState | None, now: datetime
    ) -> str | None:
        """Why `record` goes back now (its owner's state read), or None while it stays."""
        if record.warning:
            return self._why_warning(record, state, now)
        return self._why(record, await self._store.get(record.incident_id), now)

    async def _earlier_to_go_back(self, record: RevertRecord) -> bool:
        """Whether a scale-up of ours of the same target, in a field that goes back before this
        one's (`revert_order`), is still to go back: this one waits for it, due or not. ARC's
        maxRunners cannot go back below a minRunners we raised; going back part of the way now
        would leave it raised for good once the floor goes back."""
        order = self._scaler.revert_order
        if record.undo.field not in order:
            return False
        for field in order[: order.index(record.undo.field)]:
            rid = record_id(record.target.runner_type, field)
            other = RevertRecord.load(await self._redis.get(self._keys.scale_revert(rid)))
            if other is not None and other.target.target == record.target.target:
                return True
        return False

    def _why_warning(
        self, record: RevertRecord, state: WarningState | None, now: datetime
    ) -> str | None:
        """Why a warning's scale-up goes back now, or None while it stays."""
        after = self.config.after_s
        if after and now.timestamp() >= record.scaled_at + after:
            return f"{duration(timedelta(seconds=after))} after the scale-up"
        if state is None:
            return "its early warning ended"
        return state.episode_over(now.timestamp()) or None

    def _why(self, record: RevertRecord, incident: Incident | None, now: datetime) -> str | None:
        """Why the scale-up goes back now, or None while it stays."""
        if incident is None:
            return "its incident is no longer known"
        if not incident.is_open:
            return "the incident resolved"
        after = self.config.after_s
        if after and now.timestamp() >= record.scaled_at + after:
            return f"{duration(timedelta(seconds=after))} after the scale-up"
        return None

    async def _end(
        self, rid: str, lease: float, keep: RevertRecord | None, next_at: float = 0.0
    ) -> bool:
        """Drop the record (`keep` None) or keep it for `next_at`, while the claim is ours."""
        args: list[Any] = [rid, repr(lease)]
        args += ["drop"] if keep is None else [repr(next_at), keep.dump(), RECORD_TTL_S]
        keys = [self._keys.scale_reverts, self._keys.scale_revert(rid)]
        return bool(await self._finish(keys=keys, args=args))

    async def _tell(self, record: RevertRecord, text: str) -> None:
        if record.warning:
            await self._say_on_warning(record, text)
        else:
            await self._say(record.incident_id, text)

    async def _say_on_warning(self, record: RevertRecord, text: str) -> None:
        """Added to what the warning's message says of its scale-up, while the message is the
        same warning's; a newer version saved meanwhile is read again and added to."""
        for _ in range(MAX_COMMIT_ATTEMPTS):
            state = await self._warning_of(record)
            if state is None or self._warnings is None:
                log.info("scale reverts: warning of %s gone: %s", record.target.runner_type, text)
                return
            said = f"{state.scaled} · {text}." if state.scaled else f"{text}."
            if await self._warnings.save(state.changed(self._clock().timestamp(), scaled=said)):
                return
        log.warning("scale reverts: warning kept changing; not told: %s", text)

    async def _warning_of(self, record: RevertRecord) -> WarningState | None:
        """The early warning that owns `record`, while it is still the same warning."""
        if not record.warning or self._warnings is None:
            return None
        state = await self._warnings.get(record.target.runner_type)
        return state if state is not None and state.uid == record.warning else None

    async def _say(self, incident_id: str, text: str, kind: str = "scale_reverted") -> None:
        """The event and its thread reply, fenced by the incident's version like every action."""
        for _ in range(MAX_COMMIT_ATTEMPTS):
            loaded = await self._store.load(incident_id)
            incident = loaded.incident
            if incident is None:
                log.info("scale reverts: incident %s gone: %s", incident_id, text)
                return
            now = self._clock()
            event = Event(at=now, kind=kind, text=text)
            reply = Reply("event", BAND_EVENT, render_event(incident, event))
            commit = Commit(
                incident.model_copy(update={"updated_at": now}),
                version=loaded.version,
                thread=loaded.thread,
                events=(event,),
                replies=(reply,),
                root=False,
            )
            if await self._store.commit(commit, now=now.timestamp()):
                return
        log.warning("scale reverts: incident %s kept changing; not told: %s", incident_id, text)


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
