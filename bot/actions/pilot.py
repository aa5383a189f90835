"""The pilot: opt-in per runner type, it scales a type up on its own within an open incident or,
before the alert, an early warning, through the path a person's Scale up takes, as itself. An act
that fails, is undone or whose runners do not come pauses the type's pilot until a person resumes
it. Each act is claimed before the scaler is called, so a fail-over mid-act never makes it twice."""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass, replace
from datetime import UTC, datetime

from redis.exceptions import RedisError

from bot.actions.amends import amending
from bot.actions.flow import Acting, Actor, Decided, Outcome, failed, refused
from bot.actions.scale import Scaling
from bot.backends.http import BackendError
from bot.backends.scale import Reverted, Undo
from bot.config import Settings
from bot.domain.incident.incidents import (
    DRY_RUN,
    PILOT,
    Event,
    Incident,
    PilotLine,
    counting,
    with_action,
    with_scale_ups,
    would_event,
    would_said,
)
from bot.domain.reading.early_warning import Phase, WarningState, warning_acts
from bot.domain.reading.fleet import FleetSnapshot, of_type
from bot.domain.reading.judgement import Judgement, added, asking
from bot.domain.reading.runner_names import same_type
from bot.domain.scale.pilot import (
    NOTEWORTHY,
    WARNING_REF,
    Paused,
    Piloted,
    PilotState,
    Verdict,
    act_key,
    held,
    pilot_acts,
    scale_ups,
    verdict,
)
from bot.domain.scale.scale_ups import ScaleUp, undone
from bot.domain.scale.scaling import Policy
from bot.fleet.readings import FleetReadings
from bot.render.mrkdwn import escape, plain_text
from bot.render.pilot import render_pilot_line
from bot.render.replies import render_event
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import BAND_ACTION, BAND_EVENT, Commit, Reply
from bot.storage.pilot import PilotStore

log = logging.getLogger(__name__)

NO_INCIDENT = "waiting: no incident or early warning is open for it"


@dataclass
class Piloting:
    acting: Acting
    scaling: Scaling
    store: PilotStore | None
    readings: FleetReadings
    _: KW_ONLY
    config: Settings
    warnings: WarningStore | None = None  # early warnings are on: it acts on one before the alert

    @property
    def policies(self) -> dict[str, Policy]:
        if self.store is None or self.scaling.unset() is not None:
            return {}
        return {t: target.pilot for t, target in self.scaling.targets.items() if target.pilot}

    async def states(self) -> list[PilotState]:
        policies = self.policies
        if self.store is None or not policies:
            return []
        found, enabled = await self.store.states(sorted(policies)), self.config.pilot_enabled
        return [PilotState(t, policies[t], *state, enabled) for t, state in found.items()]

    async def tick(self) -> None:
        """The leader's look at each piloted type, at every status tick. Never raises."""
        try:
            await self._tick()
        except RedisError as exc:
            log.warning("pilot: Redis unavailable: %s", exc)

    async def _tick(self) -> None:
        store, policies = self.store, self.policies
        if store is None or not policies:
            return
        reading, history = await self.readings.current()
        open_ids = await self.acting.store.open_ids()
        incidents = [i for i in await self.acting.store.get_many(open_ids[:100]) if i.is_open]
        warnings = await self.warnings.all() if self.warnings is not None else {}
        now = self.acting.clock()
        # Each incident's types as its root would show this reading: the judgement acted on.
        views = [(i, self.readings.incident_view(i, reading, history, now)) for i in incidents]
        fleet = reading.fleet if reading is not None and not reading.error else None
        states = await store.states(sorted(policies))
        for runner_type, (piloted, paused) in states.items():
            policy, now = policies[runner_type], self.acting.clock()
            if paused is not None:  # until someone resumes it, incident or not
                await store.kept_paused(runner_type)
            found = _incident_for(views, warnings, runner_type)
            found = found or _warning_for(warnings, fleet, runner_type)
            others = [
                *(s for i in incidents for s in scale_ups(i, runner_type)),
                *(s for w in warnings.values() for s in _warning_ups(w, runner_type)),
            ]
            try:
                state = await self._look(runner_type, policy, piloted, paused, found, now, others)
            except Exception:
                log.exception("pilot: %s failed", runner_type)
                continue
            await store.save(runner_type, state)
            if found is None or found.incident is None or not state.kind:
                continue
            try:
                await self._record(found.incident, runner_type, state)
            except RedisError:
                raise
            except Exception:  # its record is not worth the other types' looks
                log.exception("pilot: recording %s failed", runner_type)

    async def _look(
        self,
        runner_type: str,
        policy: Policy,
        piloted: Piloted,
        paused: Paused | None,
        found: Within | None,
        now: datetime,
        every: list[ScaleUp],
    ) -> Piloted:
        """What the pilot makes of `runner_type` now, acting if it should: its new state."""
        assert self.store is not None
        kept = {"last": piloted.last, "outcome": piloted.outcome, "failed": piloted.failed}
        if not self.config.pilot_enabled:
            return Piloted(why="", at=now, **kept)
        # Its leader stopped mid-act: its claim still held, the act may have been made, whatever
        # the readings ask now (they may show it already, or be too stale to): a person looks
        # before it goes on. Released, it changed nothing; recorded, it is on the record.
        key, _, claim = piloted.acting.rpartition(" ")
        mid_act = paused is None and piloted.acting and not _recorded(found, key, claim)
        if mid_act and await self.store.act_claimed(key, runner_type, claim):
            await self._pause(runner_type, _mid_act(key))
            return Piloted(why="", at=now, kind=PAUSED, **kept)
        if found is None:
            return Piloted(why=NO_INCIDENT, at=now, **kept)
        last, outcome, failed_at, failed = _last_act(found, piloted)
        if failed:  # once per act: a person who resumes it is not overruled
            paused = Paused(by=PILOT, why=failed, at=now)
            await self.store.pause(runner_type, paused)
        said = {"last": last, "outcome": outcome, "failed": failed_at}
        if paused is not None:
            # A pause starts the hold again: what was asked before it is not acted on after.
            return Piloted(why="", at=now, kind=PAUSED, **said)
        judged, acts = found.judged, found.mine
        if policy.dry_run:
            judged, acts = _as_if_made(found, runner_type)
        hold = held(piloted.hold, judged, policy.hold_s)
        mine = {act_key(up) for up in found.mine}
        others = [s for s in every if act_key(s) not in mine]
        resumed = await self.store.resumed(runner_type)
        within = "incident" if found.incident else "early warning"
        decided = verdict(
            policy, hold, judged, acts, now, others=others, resumed=resumed, within=within
        )
        if not decided.runners or hold is None:
            return Piloted(why=decided.why, at=now, hold=hold, kind=decided.kind, **said)
        if policy.dry_run:
            why = await self._would(found, runner_type, decided, now)
            return Piloted(why=why, at=now, hold=hold, kind=DRY_RUN, **said)
        # Kept before the call: a leader that takes over mid-act finds this act's claim.
        claim = _claim(found, hold.since)
        mark = f"{found.key} {claim}"
        acting = Piloted(why=f"{ACTING}{decided.why}", at=now, hold=hold, acting=mark, **said)
        await self.store.save(runner_type, acting)
        acted = await self._act(found, runner_type, decided, claim)
        if acted is None:
            return Piloted(why=f"acted: {decided.why}", at=now, hold=hold, kind="act", **said)
        kind = "waiting" if acted else PAUSED  # "": it paused the pilot
        return Piloted(why=acted, at=now, hold=hold, kind=kind, **said)

    async def _act(
        self, found: Within, runner_type: str, decided: Verdict, claim: str
    ) -> str | None:
        """The act, claimed first: None when it was made; else why not ("": it paused the pilot)."""
        assert self.store is not None
        if not await self.store.claim_act(found.key, runner_type, claim):
            await self._pause(runner_type, _mid_act(found.key))
            return ""
        try:
            asked = asking(found.judged, decided.runners)
            timeout_s = self.config.backend_timeout_seconds
            preview = await self.scaling.preview(runner_type, asked, timeout_s=timeout_s)
            # A pause while the capacity was read (someone's Pause, Undo or `off`) stops it.
            stopped = await self.store.paused(runner_type)
        except BaseException:
            await self.store.release_act(found.key, runner_type, claim)  # nothing was asked
            raise
        shape = preview.default
        if stopped is not None or shape.delta is None:
            await self.store.release_act(found.key, runner_type, claim)
            if stopped is not None:
                return ""
            return f"the target refuses it: {shape.limited or preview.capacity_note or 'no room'}"
        runners = min(decided.runners, shape.delta)
        incident, warning = found.incident, found.warning
        owner = (incident.id if incident else "", warning.uid if warning else "")
        try:
            scaled = await self.scaling.scale_up(
                PILOT, runner_type, runners, shape.raise_maximum, False, *owner
            )
        except RedisError:  # raised only before the scaler is asked (its lock not taken)
            await self.store.release_act(found.key, runner_type, claim)
            raise
        if isinstance(scaled, Outcome):
            if scaled.result == "refused":  # another scale-up holds the type: nothing changed
                await self.store.release_act(found.key, runner_type, claim)
                return f"waiting: {plain_text(scaled.message)}"
            await self._pause(runner_type, f"its +{runners} failed: {plain_text(scaled.message)}")
            return ""
        why = decided.why if runners == decided.runners else f"{decided.why}, +{runners} taken"
        try:
            if incident is not None:
                ref = f"{incident.id}:{incident.uid}"
                said = await self.scaling.record(
                    ref, "", PILOT, runner_type, runners, scaled, pilot=why
                )
                recorded = said.ok
            else:
                assert warning is not None and self.warnings is not None
                recorded = await self.scaling.record_on_warning(
                    self.warnings,
                    warning.uid,
                    PILOT,
                    runner_type,
                    runners,
                    scaled,
                    found.judged,
                    pilot=why,
                )
        except RedisError:
            recorded = False
        if not recorded:  # made, and put back in time, but the thread cannot say so
            await self._pause(runner_type, f"its +{runners} was made but not recorded")
            return ""
        return None

    async def _would(self, found: Within, runner_type: str, decided: Verdict, now: datetime) -> str:
        """A dry run's act, scaling nothing: kept on the incident's timeline, or on the warning."""
        said = f"dry run: {would_said(runner_type, decided.runners, now)}: {decided.why}"
        if (incident := found.incident) is None:
            assert found.warning is not None and self.warnings is not None
            uid, act = found.warning.uid, (now.timestamp(), decided.runners)

            def keep(state: WarningState | None) -> WarningState | None:
                # A newer warning, or one an incident took on meanwhile: the next look acts there.
                if state is None or state.uid != uid or state.phase is not Phase.ACTIVE:
                    return None
                return replace(state, would=(*state.would, act), version=state.version + 1)

            kept = await self.warnings.save_fresh(found.warning.runner_type, keep)
            ended = "not kept: its early warning ended meanwhile"
            return f"{said} ({'on its early warning' if kept else ended})"

        def decide(incident: Incident, at: datetime, _: list[Event]) -> Decided:
            event = would_event(runner_type, decided.runners, at, decided.why)
            updated = with_action(incident, event)
            reply = Reply("action", BAND_ACTION, render_event(updated, event))
            return Commit(updated, events=(event,), replies=(reply,)), Outcome(True, "")

        await self.acting.commit(f"{incident.id}:{incident.uid}", decide)
        return said

    async def _record(self, incident: Incident, runner_type: str, state: Piloted) -> None:
        """The pilot's word on the type where its rule changes: thread line, root and timeline."""
        assert self.store is not None
        line = PilotLine(kind=state.kind, said=state.why, at=self.acting.clock())
        if state.kind == PAUSED:
            if (paused := await self.store.paused(runner_type)) is None:
                return  # resumed meanwhile: the next look says what it does
            by = paused.by if paused.by != PILOT else "itself"
            said = f"paused by {by} at {paused.at:%H:%M} UTC: {paused.why}"
            line = line.model_copy(update={"said": said})
        before = incident.pilot.get(runner_type)
        if not line.said or (before is not None and before.kind == line.kind):
            return

        def decide(fresh: Incident, now: datetime, _: list[Event]) -> Decided:
            was = fresh.pilot.get(runner_type)
            if not fresh.is_open or (was is not None and was.kind == line.kind):
                return None, Outcome(True, "")
            text = recorded(runner_type, line, was)
            told = was.told if was is not None else ()
            if line.kind in NOTEWORTHY and line.kind not in told:
                told = (*told, line.kind)
            kept = line.model_copy(update={"told": told})
            updated = fresh.model_copy(update={"pilot": {**fresh.pilot, runner_type: kept}})
            events = (Event(at=now, kind=text[0], text=text[1], actor_name=PILOT),) if text else ()
            # Its first line is posted below; after it, edited in place (no reply below it).
            edits = PILOT_TS if fresh.pilot else ""
            reply = Reply(
                PILOT_LINE,
                BAND_EVENT,
                render_pilot_line(updated),
                replaces=(PILOT_LINE,),
                ts_as=PILOT_TS,
                edits=edits,
            )
            return Commit(updated, events=events, replies=(reply,)), Outcome(True, "")

        await self.acting.commit(f"{incident.id}:{incident.uid}", decide)

    async def _pause(self, runner_type: str, why: str) -> None:
        assert self.store is not None
        await self.store.pause(runner_type, Paused(by=PILOT, why=why, at=self.acting.clock()))

    async def switch(
        self, actor: Actor, on: bool, runner_type: str = "", *, interaction: str | None = None
    ) -> Outcome:
        """`/queue pilot on|off [type]`: every piloted type, or one; scale permission."""
        run = lambda: self._switch(actor, on, runner_type)  # noqa: E731
        return await self.acting.guarded("scale", actor, interaction, run)

    async def _switch(self, actor: Actor, on: bool, runner_type: str) -> Outcome:
        if (unset := self.scaling.unset()) is not None:
            return unset
        policies = self.policies
        if not policies or self.store is None:
            return refused("No runner type has a pilot: SCALER_TARGETS declares none.")
        types = sorted(policies)
        if runner_type:
            named = self.scaling.configured(runner_type)
            if named not in policies:
                known = ", ".join(f"`{escape(t)}`" for t in types)
                return refused(f"`{escape(runner_type)}` has no pilot. Piloted: {known}.")
            types = [named]
        name = await self.acting.name(actor)
        for t in types:
            if on:
                await self.store.resume(t, self.acting.clock())
            else:
                await self.store.pause(
                    t, Paused(by=name, why="paused from Slack", at=self.acting.clock())
                )
        said = ", ".join(f"`{escape(t)}`" for t in types)
        if on:
            off = "" if self.config.pilot_enabled else " (PILOT_ENABLED=false still stops it)"
            return Outcome(True, f"The pilot is on for {said}{off}.")
        return Outcome(True, f"The pilot is paused for {said} until someone turns it on.")

    async def pause(self, actor: Actor, value: str, interaction: str | None) -> Outcome:
        """The act's Pause pilot button: its type's pilot, until someone resumes it."""
        _, _, runner_type = _act_of(value)
        return await self.switch(actor, False, runner_type, interaction=interaction)

    async def undo(self, actor: Actor, value: str, interaction: str | None) -> Outcome:
        """The act's Undo: put back at once, pause the type's pilot, say so in the thread."""
        ref, at, runner_type = _act_of(value)
        run = lambda: self._undo(actor, ref, at, runner_type)  # noqa: E731
        warned = ref.startswith(WARNING_REF)  # a refusal is kept on an incident's timeline only
        asked = None if warned else (ref, f"Undo of the pilot's scale-up of {runner_type}")
        return await self.acting.guarded("scale", actor, interaction, run, asked=asked)

    async def _undo(self, actor: Actor, ref: str, at: str, runner_type: str) -> Outcome:
        if (unset := self.scaling.unset()) is not None:
            return unset
        if ref.startswith(WARNING_REF):
            return await self._undo_on_warning(
                actor, ref.removeprefix(WARNING_REF), at, runner_type
            )
        incident = (await self.acting.load(ref)).incident
        acts = pilot_acts(incident, runner_type) if incident is not None else []
        act = next((e for e in acts if e.at.isoformat() == at), None)
        done = act.scale if act is not None else None
        if done is None or done.after is None or not done.field:
            return refused("That act is no longer on the incident's record: nothing was put back.")
        if done.undone:
            return refused("That act was undone already: nothing was put back.")
        if done.fate:  # its record ended (put back, or could not be): nothing is left to undo
            return refused(
                f"That act cannot be undone any more: {escape(done.fate)}. Nothing changed, and "
                "the pilot is not paused."
            )
        put_back = await self._put_back(actor, runner_type, done)
        if isinstance(put_back, Outcome):
            return put_back
        name, result = put_back
        text = f"{_undid(result)} the pilot's +{done.added} on {runner_type}: {result.detail}"
        text += f" ({result.left})" if result.left else ""
        text += "; the pilot is paused for it until someone resumes it"

        def decide(incident: Incident, now: datetime, _: list[Event]) -> Decided:
            event = Event(
                at=now, kind="pilot_undone", text=text, actor=actor.user_id, actor_name=name
            )
            updated = incident.model_copy(update={"updated_at": now})
            if result.done:  # its runners are not awaited any more
                updated = with_scale_ups(updated, {act.at: undone(done)})
            reply = Reply("action", BAND_ACTION, render_event(updated, event))
            answer = f"{escape(text)}. `{_was(done)}` is what it was before the act."
            return Commit(updated, events=(event,), replies=(reply,)), Outcome(result.done, answer)

        # Undone after the resolve, the summary that said it goes back is edited to say so.
        return await self.acting.commit(ref, amending(decide), with_timeline=True)

    async def _put_back(
        self, actor: Actor, runner_type: str, done: ScaleUp
    ) -> tuple[str, Reverted] | Outcome:
        """The act `done` put back at once, its pilot paused first: by whom, and the answer."""
        reverts, target = self.scaling.reverts, self.scaling.targets.get(runner_type)
        if reverts is None or target is None or done.after is None:
            return refused(f"{self.scaling.backend_name} cannot put a scale-up back.")
        name = await self.acting.name(actor)
        assert self.store is not None
        why = f"its +{done.added} was undone"
        await self.store.pause(runner_type, Paused(by=name, why=why, at=self.acting.clock()))
        try:
            result = await reverts.undo_now(target, Undo(done.field, done.before, done.after))
        except BackendError as exc:
            reason = f"{escape(str(exc))}. The pilot is paused for it."
            return failed(f"Could not put `{escape(runner_type)}` back: {reason}")
        return name, result

    async def _undo_on_warning(self, actor: Actor, uid: str, at: str, runner_type: str) -> Outcome:
        """Undo of an act made before the alert, told on the warning's message."""
        state = await self.warnings.get(runner_type) if self.warnings is not None else None
        if state is not None and state.uid == uid and state.phase is Phase.FOLDED:
            return refused(
                f"The alert fired meanwhile: incident {escape(state.incident_id)} took this act "
                "on. Undo it from the incident's thread."
            )
        acts = warning_acts(state) if state is not None and state.uid == uid else []
        done = next((up for up in acts if up.at is not None and up.at.isoformat() == at), None)
        if done is None or done.after is None or not done.back or done.undone:
            return refused(
                "That act is no longer the early warning's to undo: nothing was put back."
            )
        put_back = await self._put_back(actor, runner_type, done)
        if isinstance(put_back, Outcome):
            return put_back
        name, result = put_back
        assert self.warnings is not None
        now = self.acting.clock()
        did = f"Undone by {name}" if result.done else f"{name} asked to undo it"
        text = f"{did} at {now:%H:%M} UTC: {result.detail}"
        text += f" ({result.left})" if result.left else ""
        # Put back, its runners are not awaited any more: its follow-up ends with it.
        fated = (undone(done) if result.done else done).model_copy(update={"fate": f"{text}."})

        def told(state: WarningState | None) -> WarningState | None:
            if state is None or state.uid != uid:
                return None
            return state.with_scaled(tuple(fated if up == done else up for up in state.scaled))

        await self.warnings.save_fresh(runner_type, told)
        answer = f"{_undid(result)} the pilot's +{done.added} on {escape(runner_type)}: "
        answer += f"{escape(result.detail)}. `{_was(done)}` is what it was before the act; "
        return Outcome(result.done, answer + "the pilot is paused for it until someone resumes it.")


ACTING = "acting: "  # kept before the act's call, replaced once the look ends
PAUSED = "paused"
PILOT_LINE, PILOT_TS = "pilot", "pilot_ts"  # its thread line, edited in place


def recorded(runner_type: str, line: PilotLine, was: PilotLine | None) -> tuple[str, str] | None:
    """The timeline's event for a change of the pilot's word (kind, text), where a responder
    should read it on the record: a pause, a resume, or why it stands aside (once a reason)."""
    if line.kind == PAUSED:
        return "pilot_paused", f"The pilot is paused for {runner_type}: {line.said}"
    if was is not None and was.kind == PAUSED:
        return "pilot_resumed", f"The pilot is on again for {runner_type}: {line.said}"
    if line.kind in NOTEWORTHY and (was is None or line.kind not in was.told):
        return "pilot_declined", f"The pilot stands aside on {runner_type}: {line.said}"
    return None  # each reason once an incident


def _undid(result: Reverted) -> str:
    return "Undid" if result.done else "Did not undo"


def _was(done: ScaleUp) -> str:
    return "unset" if done.before is None else str(done.before)


def _as_if_made(found: Within, runner_type: str) -> tuple[Judgement, list[ScaleUp]]:
    """A dry run's view, as if its acts so far had been made: it never asks twice for one need."""
    events = found.incident.actions if found.incident is not None else ()
    made = [
        (e.at, w.runners)
        for e in events
        if (w := e.would) and same_type(w.runner_type, runner_type)
    ]
    made += [(datetime.fromtimestamp(at, UTC), n) for at, n in found.would]
    would = [
        ScaleUp(runner_type=runner_type, added=runners, by=PILOT, at=at, pilot=True)
        for at, runners in made
    ]
    judged = found.judged
    if would:
        judged = added(judged, judged.added_since + sum(up.added for up in would))
    return judged, [*found.mine, *would]


def _claim(found: Within, since: datetime) -> str:
    """The act a hold ending at `since` makes: its number where the pilot acts, the hold."""
    return f"{len([up for up in found.mine if up.pilot]) + 1}@{since.timestamp():.0f}"


def _mid_act(key: str) -> str:
    """Why the pilot pauses for an act begun where `key` names (a claim's)."""
    where = "its early warning" if key.startswith(WARNING_REF) else f"incident {key}"
    return (
        f"an act on it was begun by a replica that stopped mid-act ({where}); look at its "
        "scale set or group before resuming"
    )


def _recorded(found: Within | None, key: str, claim: str) -> bool:
    """Whether the act `claim` names is on the record of `found`, where it was made."""
    number = int(claim.partition("@")[0] or 0)
    if found is None or found.key != key:
        return False
    return len([up for up in found.mine if up.pilot]) >= number


def _act_of(value: str) -> tuple[str, str, str]:
    """A pilot button's value: the incident's ref, the act's time, its runner type."""
    ref, _, rest = value.partition("|")
    at, _, runner_type = rest.partition("|")
    return ref, at, runner_type


@dataclass(frozen=True)
class Within:
    """What the pilot acts within for a type: the oldest open incident whose thread shows it,
    else its standing early warning; the type's judgement and scale-ups there."""

    key: str  # what its acts are claimed under
    where: str  # in words
    judged: Judgement
    mine: list[ScaleUp]
    incident: Incident | None = None
    warning: WarningState | None = None
    # A dry run's acts (when, runners) on the type's early warning no incident took on yet.
    would: tuple[tuple[float, int], ...] = ()


def _incident_for(
    views: list[tuple[Incident, FleetSnapshot]], warnings: dict[str, WarningState], runner_type: str
) -> Within | None:
    judged_in = ((i, of_type(v.runner_types, runner_type) if v.is_live else None) for i, v in views)
    found = [(i, m.judged) for i, m in judged_in if m is not None and m.judged is not None]
    if not found:
        return None
    incident, judged = min(found, key=lambda f: f[0].opened_at)
    # A warning the incident has not taken on yet (its upkeep folds it at its next tick).
    state = of_type(warnings, runner_type)
    would = state.would if state is not None and state.phase is Phase.ACTIVE else ()
    mine = scale_ups(incident, runner_type)
    return Within(
        incident.id, f"incident {incident.id}", judged, mine, incident=incident, would=would
    )


def _warning_for(
    warnings: dict[str, WarningState], fleet: FleetSnapshot | None, runner_type: str
) -> Within | None:
    """The type's standing early warning (none on hold: no fresh reading to act on)."""
    state = of_type(warnings, runner_type)
    if state is None or state.phase is not Phase.ACTIVE or state.held_since or fleet is None:
        return None
    mine = _warning_ups(state, runner_type)
    # Its acts count as capacity while they boot, as an incident's do.
    metrics = of_type(counting(fleet, mine).runner_types, runner_type)
    if metrics is None or metrics.judged is None:
        return None
    key = f"{WARNING_REF}{state.uid}"
    return Within(key, "its early warning", metrics.judged, mine, warning=state, would=state.would)


def _warning_ups(state: WarningState, runner_type: str) -> list[ScaleUp]:
    """A warning's scale-ups of the type, folded or not (counted twice, they hold back once)."""
    if not same_type(state.runner_type, runner_type):
        return []
    return [up for up in state.scaled if up.at is not None]


def _last_act(found: Within, piloted: Piloted) -> tuple[str, str, str, str]:
    """The pilot's last act on the type in words, what came of it, the last act whose runners
    did not come (its time), and why it pauses now: once per such act."""
    acts = [up for up in found.mine if up.pilot and up.at is not None]
    if not acts:
        return piloted.last, piloted.outcome, piloted.failed, ""
    act = acts[-1]
    assert act.at is not None
    last = f"+{act.added} at {act.at:%H:%M} UTC in {found.where}"
    outcome = {True: "its runners came", False: "its runners did not come", None: ""}[act.came]
    outcome = "undone" if act.undone else "being followed" if act.followed else outcome
    if act.came is not False or piloted.failed == act.at.isoformat():
        return last, outcome, piloted.failed, ""
    failed = f"its +{act.added} at {act.at:%H:%M} UTC did not come up"
    return last, outcome, act.at.isoformat(), failed
