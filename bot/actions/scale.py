"""Scale up: a real call to the autoscaler for one runner type, permission-checked and capped.

The request is checked before anything is called (the person may scale, the runner type has a
target, the amount is within its cap); the backend then refuses what it would not do (past its
maximum, past the ceiling). Scale-ups of one runner type are locked fleet-wide while the call
runs and for a cooldown after it, so two modals submitted at once, or two people reacting to the
same alert, add runners once; the refusal says who scaled it and when.

A scale-up that its backend can put back is recorded for the revert sweep
(`bot.actions.scale_reverts`) unless it is kept (`keep=True`: `/queue scale … keep`, the modal's
checkbox); its thread reply says when it goes back, or why it cannot. An early warning's Scale up
(`bot.actions.early_warning`) takes the same checks, lock, call and record, owned by the warning.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import datetime

from redis.exceptions import RedisError

from bot.actions.flow import (
    UNKNOWN,
    Acting,
    Actor,
    Asked,
    Decide,
    Decision,
    Outcome,
    failed,
    refused,
)
from bot.actions.scale_reverts import ScaleReverts, plan_sentence
from bot.backends.errors import BackendError, deadline_of, within
from bot.backends.scale import Scaler, ScaleRequest, ScaleResult
from bot.config import Settings
from bot.domain.fleet import worst_first
from bot.domain.incidents import (
    Event,
    Incident,
    PutBack,
    ScaleDone,
    with_action,
    with_put_back,
)
from bot.domain.judgement import Judgement
from bot.domain.runner_names import runner_key
from bot.domain.scaling import Capacity, ScalePreview, ScaleTarget, scale_default
from bot.render.mrkdwn import escape
from bot.render.replies import render_event
from bot.storage.incident_store import BAND_ACTION, Commit, Reply
from bot.storage.interactions import Held

log = logging.getLogger(__name__)

NOT_CONFIGURED = (
    "Scaling is not set up: an operator sets `SCALER_BACKEND` (`webhook`, `arc`, `sqs` or "
    "`aws-asg`) and `SCALER_TARGETS`."
)
FLEET = "fleet"  # action locks of a runner type are fleet-wide, not per incident


class Scaling:
    def __init__(
        self,
        acting: Acting,
        scaler: Scaler | None,
        targets: dict[str, ScaleTarget],
        *,
        config: Settings,
        reverts: ScaleReverts | None = None,
    ) -> None:
        self._acting = acting
        self._scaler = scaler
        self._targets = targets
        self._names = config.runner_names
        self._config = config
        self._reverts = reverts

    # -- what the modal needs ------------------------------------------------------------

    async def refusal(self, actor: Actor) -> Outcome | None:
        """Why `actor` cannot scale at all (no scaler, not allowed), or None."""
        if self._scaler is None or not self._targets:
            return refused(NOT_CONFIGURED)
        refusal = await self._acting.authorizer.refusal(actor.user_id, "scale")
        return refused(refusal) if refusal is not None else None

    async def choices(self, actor: Actor, ref: str) -> tuple[Incident, list[str]] | Outcome:
        """The incident and the runner types one may scale for it (its own first), or why not."""
        refusal = await self.refusal(actor)
        if refusal is not None:
            await self._acting.keep_refusal(Asked(ref, "Scale-up"), actor, refusal)
            return refusal
        incident = (await self._acting.load(ref)).incident
        if incident is None:
            return refused(UNKNOWN)
        if not incident.is_open:
            return refused(f"Incident {incident.id} is already resolved.")
        # The live reading's worst types first (it is fresher than the alert), then the alert's.
        live = incident.live
        ranked = [n for n, _ in worst_first(live.runner_types)] if live and live.is_live else []
        ranked += [name for name, _ in worst_first(incident.runner_types)]
        own = list(dict.fromkeys(t for t in map(self._configured, ranked) if t is not None))
        return incident, own + sorted(set(self._targets) - set(own))

    @property
    def backend_name(self) -> str:
        return self._scaler.name if self._scaler is not None else "no scaler"

    def target(self, runner_type: str) -> ScaleTarget | None:
        return self._targets.get(runner_type)

    def _configured(self, name: str) -> str | None:
        """The scale target's runner type that `name` is, or None. An incident names a type as
        its alert or its reading does, which may differ from SCALER_TARGETS in case and
        punctuation (`runner_key`)."""
        if name in self._targets:
            return name
        name = self._names.runner_type(name)  # a scale set RUNNER_SCALE_SETS names
        key = runner_key(name)
        return next((t for t in self._targets if runner_key(t) == key), None)

    async def preview(
        self,
        runner_type: str,
        recommended: Judgement | None,
        *,
        timeout_s: float,
        until: str = "",
    ) -> ScalePreview:
        """What the form shows for `runner_type`: the capacity (read within `timeout_s`: a modal
        is waiting), the judgement it advises from, and the default it offers, checked against
        the target as its scaler would check it (`scale_default`). `until` says what puts the
        scale-up back (the incident's resolve and settle time when empty)."""
        target = self._targets[runner_type]
        capacity, note, raises, cannot_undo = None, NOT_CONFIGURED, False, ""
        if self._scaler is not None:
            capacity, note = await self._capacity(self._scaler, target, timeout_s)
            raises = self._scaler.can_raise_maximum
            cannot_undo = self._scaler.cannot_undo
        after = self._config.scale_revert_after if self._reverts is not None else None
        if not until:
            until = self._reverts.settle_said if self._reverts is not None else ""

        def refusal(delta: int, raise_maximum: bool) -> str:
            return self.refused(target, capacity, delta, raise_maximum)

        default = scale_default(
            recommended, target, capacity, can_raise_maximum=raises, refusal=refusal
        )
        return ScalePreview(
            target, capacity, note, recommended, raises, cannot_undo, after, until, default
        )

    def refused(
        self, target: ScaleTarget, capacity: Capacity | None, delta: int, raise_maximum: bool
    ) -> str:
        """Why the scaler would refuse this request at `capacity` ("" when it would not, or it
        cannot tell): its own check, made when the form opens and again at review."""
        if self._scaler is None:
            return ""
        return self._scaler.refusal(target, capacity, delta, raise_maximum=raise_maximum)

    @staticmethod
    async def _capacity(
        scaler: Scaler, target: ScaleTarget, timeout_s: float
    ) -> tuple[Capacity | None, str]:
        try:
            # The modal's budget is all there is: past it Slack shows "took too long".
            capacity = await within(scaler.capacity(target), timeout_s, scaler.name, margin_s=0)
        except BackendError as exc:
            return None, f"capacity unknown: {exc}"
        if capacity is None:
            return None, f"{scaler.name} cannot report capacity in advance"
        return capacity, ""

    async def failures(self, runner_types: list[str]) -> dict[str, list[str] | None]:
        """The autoscaler's own recent failures for each of `runner_types` that has a target
        (None: the backend cannot read them), for diagnostics. Read at once, each within the
        backend's timeout; one that cannot be read counts as unreadable, not as no failure."""
        scaler = self._scaler
        configured = {t: c for t in runner_types if (c := self._configured(t)) is not None}
        targets = [self._targets[c] for c in configured.values()]
        if scaler is None or not targets:
            return {}

        async def read(target: ScaleTarget) -> list[str] | None:
            try:
                return await within(
                    scaler.failures(target), self._config.backend_timeout_seconds, scaler.name
                )
            except BackendError:
                return None

        found = await asyncio.gather(*(read(target) for target in targets))
        return dict(zip(configured, found, strict=True))

    # -- the action ----------------------------------------------------------------------

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
        """Scale up; unless `keep`, the scale-up is put back once the incident resolved and its
        queue settled, or after `SCALE_REVERT_AFTER` (where the backend can put it back)."""

        async def run() -> Outcome:
            return await self.scale_now(actor, ref, runner_type, delta, raise_maximum, keep)

        asked = Asked(ref, f"Scale-up of {runner_type} by +{delta}")
        return await self._acting.guarded("scale", actor, interaction, run, asked=asked)

    def check(self, runner_type: str, delta: int) -> str:
        """What is wrong with the request itself ("" when nothing): for modals and commands."""
        target = self._targets.get(runner_type)
        if target is None:
            known = ", ".join(f"`{escape(name)}`" for name in sorted(self._targets)[:20])
            return f"`{escape(runner_type)}` has no scale target. Configured: {known or 'none'}."
        if delta < 1:
            return "Scale up by at least 1 runner."
        if delta > target.cap:
            return (
                f"At most +{target.cap} runners per request for `{escape(runner_type)}` "
                "(its cap). Ask again after this one if more are needed."
            )
        return ""

    async def scale_now(
        self,
        actor: Actor,
        ref: str,
        runner_type: str,
        delta: int,
        raise_maximum: bool,
        keep: bool,
    ) -> Outcome:
        if self._scaler is None or not self._targets:
            return refused(NOT_CONFIGURED)
        problem = self.check(runner_type, delta)
        if problem:
            return refused(problem)
        incident = (await self._acting.load(ref)).incident
        if incident is None:
            return refused(UNKNOWN)
        if not incident.is_open:
            return refused(f"Incident {incident.id} is already resolved: nothing was scaled.")
        name = await self._acting.name(actor)
        done = await self.call(name, runner_type, delta, raise_maximum, incident_id=incident.id)
        if isinstance(done, Outcome):
            return done
        request, result = done
        undo, put_back = await self.remember(request, result, keep, incident_id=incident.id)
        decide = _record(actor, name, request, result, self.backend_name, undo, put_back)
        return await self._acting.commit(ref, decide)

    async def call(
        self,
        name: str,
        runner_type: str,
        delta: int,
        raise_maximum: bool,
        *,
        incident_id: str = "",
    ) -> tuple[ScaleRequest, ScaleResult] | Outcome:
        """The backend's call for a checked request (`check`), under the type's fleet-wide
        lock, which then holds for the cooldown; the failure as the person's answer."""
        scaler = self._scaler
        if scaler is None:
            return refused(NOT_CONFIGURED)
        lock = await self._acting.interactions.lock(
            FLEET,
            f"scale:{runner_type}",
            doing=f"{name} is scaling it",
            ttl_s=deadline_of(self._config.backend_timeout_seconds) + 5,
        )
        if isinstance(lock, Held):
            return refused(f"`{escape(runner_type)}` was just scaled: {escape(lock.what)}.")
        request = ScaleRequest(
            self._targets[runner_type],
            delta,
            incident_id,
            name,
            raise_maximum=raise_maximum,
            request_id=secrets.token_hex(8),
        )
        try:
            result = await within(
                scaler.scale(request), self._config.backend_timeout_seconds, scaler.name
            )
        except BackendError as exc:
            await lock.release()
            reason = escape(str(exc))
            return failed(f"Could not scale `{escape(runner_type)}`: {reason}. Nothing changed.")
        at = self._acting.clock()
        await lock.keep(
            self._config.scale_cooldown_seconds, f"{name} asked for +{delta} at {at:%H:%M} UTC"
        )
        return request, result

    async def remember(
        self,
        request: ScaleRequest,
        result: ScaleResult,
        keep: bool,
        *,
        incident_id: str = "",
        warning: str = "",
    ) -> tuple[str, PutBack | None]:
        """Record the scale-up for the revert sweep, owned by its incident or early warning
        (`warning`: its uid); what its message says about undoing it, and what the incident
        keeps to go back (None for a warning's, or one that does not go back)."""
        if result.undo is None:
            reason = (
                self._scaler.cannot_undo if self._scaler is not None else ""
            ) or f"{self.backend_name} did not say what it changed"
            return f"It cannot be undone by queuepilot: {reason}.", None
        if keep:
            kept = "Kept after the incident, as asked." if incident_id else "Kept, as asked."
            return kept, None
        if self._reverts is None:
            return "", None
        try:
            record = await self._reverts.remember(
                incident_id, request.target, result.undo, by=request.requested_by, warning=warning
            )
        except RedisError as exc:  # the scale-up happened: say so, and that it stays
            log.error("scale-up of %s not recorded for its revert: %s", request.target, exc)
            return "It could not be recorded to be put back (database unavailable): it stays.", None
        put_back = None if warning else self._reverts.put_back(record)
        return plan_sentence(self._reverts.plan(warning=bool(warning))), put_back


def _record(
    actor: Actor,
    name: str,
    request: ScaleRequest,
    result: ScaleResult,
    backend: str,
    undo: str,
    put_back: PutBack | None,
) -> Decide:
    def decide(incident: Incident, now: datetime, timeline: list[Event]) -> Decision:
        runner_type = request.target.runner_type
        text = f"Scaled {runner_type} by +{request.delta}: {result.detail} ({backend})"
        changed = result.undo
        done = ScaleDone(
            runner_type=runner_type,
            added=request.delta,
            by=name,
            at=now,
            field=changed.field if changed is not None else "",
            after=changed.after if changed is not None else None,
        )
        event = Event(
            at=now, kind="scaled", text=text, actor=actor.user_id, actor_name=name, scale=done
        )
        updated = with_action(incident, event)
        if put_back is not None:
            updated = with_put_back(updated, put_back)
        # When it goes back is said once, in the thread: not in the root's latest actions nor
        # the summary's timeline (which says what is still to go back), nor the answer (the
        # modal said it); that it stays is news to the person too.
        detail = f"· {escape(undo)}" if undo else ""
        reply = Reply("action", BAND_ACTION, render_event(updated, event, detail=detail))
        answer = f"You scaled `{escape(runner_type)}` by +{request.delta}: {escape(result.detail)}."
        answer += f" {escape(undo)}" if undo and put_back is None else ""
        if not incident.is_open:
            answer += " The incident had resolved meanwhile."
        commit = Commit(updated, events=(event,), replies=(reply,))
        return Decision(Outcome(True, answer), commit)

    return decide
