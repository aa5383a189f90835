"""Scale up: a real call to the autoscaler for one runner type, permission-checked and capped.
Scale-ups of one runner type are locked fleet-wide while the call runs and for a cooldown, so two
people reacting to the same alert add runners once."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import TypeVar

from redis.exceptions import RedisError

from bot.actions.flow import Acting, Actor, Decided, Outcome, failed, refused, unrecorded
from bot.actions.scale_reverts import PutBackDue, ScaleReverts, made
from bot.backends.http import BackendError, deadline_of, within
from bot.backends.scale import Scaler, ScaleRequest, ScaleResult
from bot.config import MetricsBackend, Settings
from bot.domain.incident.incidents import (
    Event,
    Incident,
    made_scale_ups,
    with_action,
    with_scale_ups,
    without_put_backs,
)
from bot.domain.reading.early_warning import WarningState, scaled_from
from bot.domain.reading.fleet import judged_of, worst_first
from bot.domain.reading.judgement import Judgement
from bot.domain.reading.runner_names import type_named
from bot.domain.scale.scale_ups import ScaleUp, follow, outcome_of
from bot.domain.scale.scaling import Capacity, ScalePreview, ScaleTarget, scale_default
from bot.render.follow_ups import outcome_event
from bot.render.mrkdwn import escape
from bot.render.replies import render_event, render_outcome
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import BAND_ACTION, Commit, Reply, reply_ts
from bot.storage.leases import Deposed, Held

T = TypeVar("T")
log = logging.getLogger(__name__)

NOT_CONFIGURED = (
    "Scaling is not set up: an operator sets `SCALER_BACKEND` (`webhook`, `arc`, `sqs` or "
    "`aws-asg`) and `SCALER_TARGETS`."
)
FLEET = "fleet"  # action locks of a runner type are fleet-wide, not per incident
# A scale-up made: its result, what its message says of undoing it, what puts it back (None: stays).
Scaled = tuple[ScaleResult, str, PutBackDue | None]


@dataclass
class Scaling:
    acting: Acting
    scaler: Scaler | None
    targets: dict[str, ScaleTarget]
    _: KW_ONLY
    config: Settings
    reverts: ScaleReverts | None = None

    def unset(self) -> Outcome | None:
        """Why nobody can scale here, whoever asks (None when scaling is set up)."""
        return refused(NOT_CONFIGURED) if self.scaler is None or not self.targets else None

    async def refusal(self, actor: Actor) -> Outcome | None:
        if (unset := self.unset()) is not None:
            return unset
        refusal = await self.acting.authorizer.refusal(actor.user_id, "scale")
        return refused(refusal) if refusal is not None else None

    async def choices(self, actor: Actor, ref: str) -> tuple[Incident, list[str]] | Outcome:
        """The incident and the runner types one may scale for it (its own first), or why not."""
        if (refusal := await self.refusal(actor)) is not None:
            return refusal
        incident = await self.acting.open_incident(ref, "Incident {id} is already resolved.")
        if isinstance(incident, Outcome):
            return incident
        # The live reading's worst types first (it is fresher than the alert), then the alert's.
        live = incident.live
        ranked = [n for n, _ in worst_first(live.runner_types)] if live and live.is_live else []
        ranked += [name for name, _ in worst_first(incident.runner_types)]
        own = list(dict.fromkeys(t for t in map(self.configured, ranked) if t is not None))
        return incident, own + sorted(set(self.targets) - set(own))

    @property
    def backend_name(self) -> str:
        return self.scaler.name if self.scaler is not None else "no scaler"

    def configured(self, name: str) -> str | None:
        """The scale target's runner type `name` is: an incident names a type as its alert or
        reading does, which may differ from SCALER_TARGETS in case and punctuation."""
        if name in self.targets:
            return name
        return type_named(self.targets, self.config.runner_names.runner_type(name))

    async def preview(
        self, runner_type: str, recommended: Judgement | None, *, timeout_s: float, until: str = ""
    ) -> ScalePreview:
        """What the form shows for `runner_type`, checked as the scaler would check it; the
        capacity read within `timeout_s`, since a modal is waiting."""
        target, scaler = self.targets[runner_type], self.scaler
        capacity, note = None, NOT_CONFIGURED
        if scaler is not None:
            try:
                capacity = await within(scaler.capacity(target), timeout_s, scaler.name, margin_s=0)
                unknown = f"{scaler.name} cannot report capacity in advance"
                note = "" if capacity is not None else unknown
            except BackendError as exc:
                note = f"capacity unknown: {exc}"
        reverts, can_raise = self.reverts, scaler is not None and scaler.can_raise_maximum
        default = scale_default(
            recommended,
            target,
            capacity,
            can_raise_maximum=can_raise,
            refusal=lambda delta, raise_max: self.refused(target, capacity, delta, raise_max),
        )
        cannot_undo = scaler.cannot_undo if scaler is not None else ""
        after = self.config.scale_revert_after if reverts is not None else None
        until = until or (reverts.settle_said if reverts is not None else "")
        return ScalePreview(
            target, capacity, note, recommended, can_raise, cannot_undo, after, until, default
        )

    def refused(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, raise_maximum: bool
    ) -> str:
        """Why the scaler would refuse this at `capacity` ("": it would not, or cannot tell)."""
        if self.scaler is None:
            return ""
        return self.scaler.refusal(target, capacity, delta, raise_maximum=raise_maximum)

    async def failures(self, runner_types: list[str]) -> dict[str, list[str] | None]:
        """The autoscaler's recent failures of each type with a target (None: unreadable)."""
        return await self._read_each(
            runner_types, lambda scaler, target, _: scaler.failures(target)
        )

    async def since(self, asked: Mapping[str, datetime]) -> dict[str, str]:
        """What the autoscaler shows of the scale-ups `asked` whose runners did not come."""
        found = await self._read_each(
            list(asked), lambda scaler, target, name: scaler.since(target, asked[name])
        )
        unread = f"what {self.scaler.name if self.scaler else 'it'} did is not known: unread"
        return {name: unread if said is None else said for name, said in found.items()}

    async def _read_each(
        self, runner_types: list[str], read: Callable[[Scaler, ScaleTarget, str], Awaitable[T]]
    ) -> dict[str, T | None]:
        """`read` of each of `runner_types` with a target, at once (None: it failed)."""
        scaler = self.scaler
        configured = {t: c for t in runner_types if (c := self.configured(t)) is not None}
        if scaler is None or not configured:
            return {}

        async def each(name: str, target: ScaleTarget) -> T | None:
            try:
                timeout_s = self.config.backend_timeout_seconds
                return await within(read(scaler, target, name), timeout_s, scaler.name)
            except BackendError:
                return None

        found = await asyncio.gather(*(each(t, self.targets[c]) for t, c in configured.items()))
        return dict(zip(configured, found, strict=True))

    def check(self, runner_type: str, delta: int) -> str:
        """What is wrong with the request itself ("" when nothing)."""
        target = self.targets.get(runner_type)
        if target is None:
            known = ", ".join(f"`{escape(name)}`" for name in sorted(self.targets)[:20])
            return f"`{escape(runner_type)}` has no scale target. Configured: {known or 'none'}."
        if delta < 1:
            return "Scale up by at least 1 runner."
        if delta > target.cap:
            return (
                f"At most +{target.cap} runners per request for `{escape(runner_type)}` "
                "(its cap). Ask again after this one if more are needed."
            )
        return ""

    async def scale(
        self,
        actor: Actor,
        ref: str,
        runner_type: str,
        delta: int,
        *,
        raise_maximum: bool = False,
        keep: bool = False,
        interaction: str | None = None,
    ) -> Outcome:
        """Scale up; unless `keep`, put back once the incident resolved and its queue settled."""
        run = lambda: self.scale_now(actor, ref, runner_type, delta, raise_maximum, keep)  # noqa: E731
        asked = (ref, f"Scale-up of {runner_type} by +{delta}")
        return await self.acting.guarded("scale", actor, interaction, run, asked=asked)

    async def scale_now(
        self, actor: Actor, ref: str, runner_type: str, delta: int, raise_maximum: bool, keep: bool
    ) -> Outcome:
        """The incident's scale-up, already guarded."""
        if (unset := self.unset()) is not None:
            return unset
        if problem := self.check(runner_type, delta):
            return refused(problem)
        resolved = "Incident {id} is already resolved: nothing was scaled."
        incident = await self.acting.open_incident(ref, resolved)
        if isinstance(incident, Outcome):
            return incident
        name = await self.acting.name(actor)
        scaled = await self.scale_up(name, runner_type, delta, raise_maximum, keep, incident.id)
        if isinstance(scaled, Outcome):
            return scaled
        return await self.record(ref, actor.user_id, name, runner_type, delta, scaled)

    async def record_on_warning(
        self,
        warnings: WarningStore,
        uid: str,
        name: str,
        runner_type: str,
        delta: int,
        scaled: Scaled,
        judged: Judgement | None,
        *,
        pilot: str = "",
    ) -> bool:
        """A scale-up made from the early warning `uid`, said on its message and followed from
        the runners `judged` counts; whether the warning kept it. `pilot`: why the pilot made it."""
        (result, plan, _), at = scaled, self.acting.clock()
        why = f"{pilot}; " if pilot else ""
        line = f"{name} scaled {runner_type} by +{delta} at {at:%H:%M} UTC: {why}{result.detail} "
        line += f"({self.backend_name})."
        up = self._made(runner_type, delta, name, at, scaled, pilot)
        entry = scaled_from(line, plan, up.back, up, judged, self.config.scale_verify_s)

        def noted(state: WarningState | None) -> WarningState | None:
            if state is None or state.uid != uid:
                return None  # replaced or gone meanwhile: nothing says the scale-up
            return state.with_scaled((*state.scaled, entry))

        return bool(await warnings.save_fresh(runner_type, noted))

    async def record(
        self,
        ref: str,
        user_id: str,
        name: str,
        runner_type: str,
        delta: int,
        scaled: Scaled,
        *,
        pilot: str = "",
    ) -> Outcome:
        """A scale-up made, on its incident: its event, put-back, reply and follow-up."""
        result, undo, record = scaled
        said = f"You scaled `{escape(runner_type)}` by +{delta}: {escape(result.detail)}."

        def decide(incident: Incident, now: datetime, _: list[Event]) -> Decided:
            done = self._made(runner_type, delta, name, now, scaled, pilot)
            text = f"Scaled {runner_type} by +{delta}: {result.detail} ({self.backend_name})"
            if pilot:
                text = f"{name} scaled {runner_type} by +{delta}: {pilot}; {result.detail}"
            event = Event(
                at=now, kind="scaled", text=text, actor=user_id or None, actor_name=name, scale=done
            )
            # One scale-up a record: the latest says what goes back, from where and by when.
            earlier = without_put_backs(incident, {done.back}) if done.back else incident
            updated = with_action(earlier, event)
            # When it goes back is said once, in the thread (the modal said it); that it stays, too.
            detail = f"· {escape(undo)}" if undo else ""
            updated, events, reply = self._followed(incident, updated, event, detail)
            answer = said + (f" {escape(undo)}" if undo and record is None else "")
            if not incident.is_open:
                answer += " The incident had resolved meanwhile."
            return Commit(updated, events=events, replies=(reply,)), Outcome(True, answer)

        try:
            return await self.acting.commit(ref, decide)
        except Deposed:
            raise
        except RedisError as exc:
            # The runners were added: "try again" would add them twice.
            log.error("scale-up of %s made but not recorded on its incident: %s", runner_type, exc)
            why = unrecorded(exc)
            return Outcome(True, f"{said} It is not in the incident's thread: {why}.", "ok")

    def _followed(
        self, before: Incident, updated: Incident, event: Event, detail: str
    ) -> tuple[Incident, tuple[Event, ...], Reply]:
        """The scale-up's reply, and the scale-up followed (without readings, decided at once)."""
        done = event.scale
        assert done is not None, "a scale-up's event"
        number, judged = before.replies + 1, judged_of(before.live, done.runner_type)
        verify_s, earlier = self.config.scale_verify_s, made_scale_ups(before)
        up = follow(done, judged, verify_s=verify_s, reply=number, detail=detail, earlier=earlier)
        if self.config.metrics_backend is MetricsBackend.ALERT:
            outcome = outcome_of(up, None, event.at)
            assert outcome is not None, "without readings, decided at once"
            rendered = render_outcome(updated, event, detail, outcome, edit=True)
            events = (event, outcome_event(up, outcome, event.at))
            return updated, events, Reply("action", BAND_ACTION, rendered)
        rendered = render_event(updated, event, detail=detail)
        reply = Reply("action", BAND_ACTION, rendered, ts_as=reply_ts(number))
        return with_scale_ups(updated, {event.at: up}), (event,), reply

    async def scale_up(
        self,
        name: str,
        runner_type: str,
        delta: int,
        raise_maximum: bool,
        keep: bool,
        incident_id: str = "",
        warning: str = "",
    ) -> Scaled | Outcome:
        """The backend's call under the type's fleet-wide lock, recorded to be put back."""
        scaler, reverts = self.scaler, self.reverts
        if scaler is None:  # the callers refuse first; a new one must too
            return refused(NOT_CONFIGURED)
        timeout_s = self.config.backend_timeout_seconds
        doing, ttl_s = f"{name} is scaling it", deadline_of(timeout_s) + 5
        lock = await self.acting.interactions.lock(
            FLEET, f"scale:{runner_type}", doing=doing, ttl_s=ttl_s
        )
        if isinstance(lock, Held):
            return refused(f"`{escape(runner_type)}` was just scaled: {escape(lock.what)}.")
        target = self.targets[runner_type]
        request = ScaleRequest(
            target, delta, incident_id, name, raise_maximum, request_id=secrets.token_hex(8)
        )
        try:
            result = await within(scaler.scale(request), timeout_s, scaler.name)
        except BackendError as exc:
            reason, shown = escape(str(exc)), escape(runner_type)
            if not exc.unanswered:
                await lock.release()
                return failed(f"Could not scale `{shown}`: {reason}. Nothing changed.")
            # Perhaps done: asked again at once it would be done twice, and nothing puts it back.
            at = self.acting.clock()
            said = f"{name} asked for +{delta} at {at:%H:%M} UTC and its answer was lost"
            await lock.keep(self.config.scale_cooldown_seconds, said)
            return failed(
                f"Could not tell whether `{shown}` was scaled: {reason}. It may have been: look "
                "at it before asking again; it would not be put back."
            )
        except Exception:
            # A bug: answered, never raised, or the requests stream would call the scaler again.
            # The lock goes, so the next person is not told the type "was just scaled" for its
            # lifetime. A cancelled call keeps the lock: it may have reached the backend.
            log.exception("scale-up of %s: %s failed unexpectedly", target, scaler.name)
            try:
                await lock.release()
            except RedisError as exc:  # it lapses at its TTL; the person is still told
                log.warning("scale-up of %s: its lock not released: Redis: %s", target, exc)
            return failed(
                f"Could not tell whether `{escape(runner_type)}` was scaled: {scaler.name} "
                "failed unexpectedly (queuepilot's log says why). It may have been: look at its "
                "scale set or group before asking again; it would not be put back."
            )
        asked = f"{name} asked for +{delta} at {self.acting.clock():%H:%M} UTC"
        try:
            await lock.keep(self.config.scale_cooldown_seconds, asked)
        except RedisError as exc:  # it scaled: what follows must still record it to go back
            log.warning("scale-up of %s: its cooldown not kept: Redis: %s", target, exc)
        if result.undo is None:
            reason = scaler.cannot_undo or f"{scaler.name} did not say what it changed"
            return result, f"It cannot be undone by queuepilot: {reason}.", None
        if keep:
            kept = "Kept after the incident, as asked." if incident_id else "Kept, as asked."
            return result, kept, None
        if reverts is None:
            return result, "", None
        try:
            record = await reverts.remember(
                incident_id, target, result.undo, by=name, warning=warning
            )
        except RedisError as exc:  # the scale-up happened: say so, and that it stays
            log.error("scale-up of %s not recorded for its revert: %s", target, exc)
            stays = f"It could not be recorded to be put back ({unrecorded(exc)}): it stays."
            return result, stays, None
        return result, reverts.plan(warning=bool(warning)), record

    def _made(
        self, runner_type: str, delta: int, name: str, at: datetime, scaled: Scaled, pilot: str
    ) -> ScaleUp:
        """The scale-up as made, and as the record that puts it back says."""
        result, _, record = scaled
        up = made(runner_type, delta, name, at, result.undo, pilot=bool(pilot))
        return up if record is None or self.reverts is None else self.reverts.going_back(up, record)
