"""The pilot: opt-in per runner type (SCALER_TARGETS' `pilot`), it scales a type up on its own
while an incident is open for it, within the type's policy (`bot.domain.pilot.verdict`), through
the same path a person's Scale up takes (the fleet-wide lock, the scaler's checks, the put-back,
the follow-up), as itself: no person's permission is borrowed. Each act is one reply with Undo
and Pause pilot; an act that fails, is undone or whose runners do not come pauses the type's
pilot until a person resumes it. It runs on the leader alone, and each act is claimed before the
scaler is called, so a fail-over mid-act never makes it twice."""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from redis.exceptions import RedisError

from bot.actions.flow import Acting, Actor, Decided, Outcome, refused
from bot.actions.scale import Scaling
from bot.actions.scale_reverts import record_id
from bot.backends.http import BackendError
from bot.backends.scale import Undo
from bot.config import Settings
from bot.domain.fleet import FleetSnapshot, of_type
from bot.domain.incidents import Event, Incident
from bot.domain.judgement import Judgement
from bot.domain.pilot import PILOT, Paused, Piloted, PilotState, Verdict, held, pilot_acts, verdict
from bot.domain.scaling import Policy
from bot.fleet.readings import FleetReadings
from bot.render.mrkdwn import escape, plain_text
from bot.render.replies import render_event
from bot.storage.incident_store import BAND_ACTION, Commit, Reply
from bot.storage.pilot import PilotStore

log = logging.getLogger(__name__)

NO_INCIDENT = "waiting: no incident is open for it"


@dataclass
class Piloting:
    acting: Acting
    scaling: Scaling
    store: PilotStore | None
    readings: FleetReadings
    _: KW_ONLY
    config: Settings

    @property
    def policies(self) -> dict[str, Policy]:
        if self.store is None or self.scaling.unset() is not None:
            return {}
        return {t: target.pilot for t, target in self.scaling.targets.items() if target.pilot}

    async def states(self) -> list[PilotState]:
        policies = self.policies
        if self.store is None or not policies:
            return []
        found = await self.store.states(sorted(policies))
        enabled = self.config.pilot_enabled
        return [
            PilotState(t, policies[t], piloted, paused, enabled)
            for t, (piloted, paused) in found.items()
        ]

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
        now = self.acting.clock()
        # Each incident's types as its root would show this reading: the judgement acted on.
        views = [(i, self.readings.incident_view(i, reading, history, now)) for i in incidents]
        states = await store.states(sorted(policies))
        for runner_type, (piloted, paused) in states.items():
            policy, now = policies[runner_type], self.acting.clock()
            if paused is not None:  # until someone resumes it, incident or not
                await store.kept_paused(runner_type)
            found = _incident_for(views, runner_type)
            try:
                state = await self._look(
                    runner_type, policy, piloted, paused, found, now, incidents
                )
            except Exception:
                log.exception("pilot: %s failed", runner_type)
                continue
            await store.save(runner_type, state)

    async def _look(
        self,
        runner_type: str,
        policy: Policy,
        piloted: Piloted,
        paused: Paused | None,
        found: tuple[Incident, Judgement] | None,
        now: datetime,
        incidents: list[Incident],
    ) -> Piloted:
        """What the pilot makes of `runner_type` now, acting if it should: its new state."""
        assert self.store is not None
        kept = {"last": piloted.last, "outcome": piloted.outcome, "failed": piloted.failed}
        if not self.config.pilot_enabled:
            return Piloted("", now, **kept)
        if found is None:
            return Piloted(NO_INCIDENT, now, **kept)
        incident, judged = found
        last, outcome, failed_at, failed = _last_act(incident, runner_type, piloted)
        if failed:  # once per act: a person who resumes it is not overruled
            paused = Paused(PILOT, failed, now)
            await self.store.pause(runner_type, paused)
        said = {"last": last, "outcome": outcome, "failed": failed_at}
        if paused is not None:
            # A pause starts the hold again: what was asked before it is not acted on after.
            return Piloted("", now, **said)
        hold = held(piloted.hold, judged, policy.hold_s)
        others = [i for i in incidents if i.id != incident.id]
        resumed = await self.store.resumed(runner_type)
        decided = verdict(
            policy, hold, judged, incident, runner_type, now, others=others, resumed=resumed
        )
        if not decided.runners or hold is None:
            return Piloted(decided.why, now, hold, **said)
        # Kept before the call: a leader that takes over mid-act finds this act's claim.
        await self.store.save(runner_type, Piloted(f"acting: {decided.why}", now, hold, **said))
        acted = await self._act(incident, runner_type, decided, judged, hold.since)
        if acted is None:  # made: the next act waits for a hold of its own
            return Piloted(f"acted: {decided.why}", now, None, **said)
        return Piloted(acted, now, hold, **said)

    async def _act(
        self,
        incident: Incident,
        runner_type: str,
        decided: Verdict,
        judged: Judgement,
        since: datetime,
    ) -> str | None:
        """The act, claimed first (the incident's next act on the type, for this hold): None when
        it was made; else why not ("": it paused the pilot, and the pause says why)."""
        assert self.store is not None
        number = len(pilot_acts(incident, runner_type)) + 1
        claim = f"{number}@{since.timestamp():.0f}"
        if not await self.store.claim_act(incident.id, runner_type, claim):
            why = (
                f"an act on it was begun by a replica that stopped mid-act (incident {incident.id}"
                f"); look at its scale set or group before resuming"
            )
            await self._pause(runner_type, why)
            return ""
        try:
            preview = await self.scaling.preview(
                runner_type, judged, timeout_s=self.config.backend_timeout_seconds
            )
            # A pause while the capacity was read (someone's Pause, Undo or `off`) stops it.
            stopped = await self.store.paused(runner_type)
        except BaseException:
            await self.store.release_act(incident.id, runner_type, claim)  # nothing was asked
            raise
        shape = preview.default
        if stopped is not None or shape.delta is None:
            await self.store.release_act(incident.id, runner_type, claim)
            if stopped is not None:
                return ""
            return f"the target refuses it: {shape.limited or preview.capacity_note or 'no room'}"
        runners = min(decided.runners, shape.delta)
        try:
            scaled = await self.scaling.scale_up(
                PILOT, runner_type, runners, shape.raise_maximum, False, incident.id
            )
        except RedisError:  # raised only before the scaler is asked (its lock not taken)
            await self.store.release_act(incident.id, runner_type, claim)
            raise
        if isinstance(scaled, Outcome):
            if scaled.result == "refused":  # another scale-up holds the type: nothing changed
                await self.store.release_act(incident.id, runner_type, claim)
                return f"waiting: {plain_text(scaled.message)}"
            await self._pause(runner_type, f"its +{runners} failed: {plain_text(scaled.message)}")
            return ""
        why = decided.why if runners == decided.runners else f"{decided.why}, +{runners} taken"
        ref = f"{incident.id}:{incident.uid}"
        try:
            recorded = await self.scaling.record(
                ref, "", PILOT, runner_type, runners, scaled, pilot=why
            )
        except RedisError:
            recorded = Outcome(False, "")
        if not recorded.ok:  # made, and put back in time, but the thread cannot say so
            await self._pause(runner_type, f"its +{runners} was made but not recorded")
            return ""
        return None

    async def _pause(self, runner_type: str, why: str) -> None:
        assert self.store is not None
        await self.store.pause(runner_type, Paused(PILOT, why, self.acting.clock()))

    async def switch(
        self, actor: Actor, on: bool, runner_type: str = "", *, interaction: str | None = None
    ) -> Outcome:
        """`/queue pilot on|off [type]`: every piloted type, or one; scale permission."""

        async def run() -> Outcome:
            return await self._switch(actor, on, runner_type)

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
                await self.store.pause(t, Paused(name, "paused from Slack", self.acting.clock()))
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

        async def run() -> Outcome:
            return await self._undo(actor, ref, at, runner_type)

        asked = (ref, f"Undo of the pilot's scale-up of {runner_type}")
        return await self.acting.guarded("scale", actor, interaction, run, asked=asked)

    async def _undo(self, actor: Actor, ref: str, at: str, runner_type: str) -> Outcome:
        if (unset := self.scaling.unset()) is not None:
            return unset
        incident = (await self.acting.load(ref)).incident
        act = (
            next(
                (e for e in pilot_acts(incident, runner_type) if e.at.isoformat() == at),
                None,
            )
            if incident is not None
            else None
        )
        done = act.scale if act is not None else None
        reverts, target = self.scaling.reverts, self.scaling.targets.get(runner_type)
        if done is None or done.after is None or not done.field:
            return refused("That act is no longer on the incident's record: nothing was put back.")
        if reverts is None or target is None:
            return refused(f"{self.scaling.backend_name} cannot put a scale-up back.")
        name = await self.acting.name(actor)
        assert self.store is not None
        await self.store.pause(
            runner_type, Paused(name, f"its +{done.added} was undone", self.acting.clock())
        )
        try:
            result = await reverts.undo_now(target, Undo(done.field, done.before, done.after))
        except BackendError as exc:
            return Outcome(
                False,
                f"Could not put `{escape(runner_type)}` back: {escape(str(exc))}. The pilot is "
                "paused for it.",
                "failed",
            )
        back = "unset" if done.before is None else str(done.before)
        text = (
            f"Undid the pilot's +{done.added} on {runner_type}: {result.detail}"
            if result.done
            else f"Did not undo the pilot's +{done.added} on {runner_type}: {result.detail}"
        )
        text += f" ({result.left})" if result.left else ""
        text += "; the pilot is paused for it until someone resumes it"
        rid = record_id(runner_type, done.field)

        def decide(incident: Incident, now: datetime, _: list[Event]) -> Decided:
            event = Event(
                at=now, kind="pilot_undone", text=text, actor=actor.user_id, actor_name=name
            )
            # What went back leaves the incident's put-backs; an earlier scale-up it continued
            # still goes back, from where the act began.
            put_backs = (
                tuple(
                    p.model_copy(update={"after": done.before}) if p.id == rid else p
                    for p in incident.put_backs
                    if not (result.done and p.id == rid and p.before == done.before)
                )
                if result.done
                else incident.put_backs
            )
            updated = incident.model_copy(update={"updated_at": now, "put_backs": put_backs})
            reply = Reply("action", BAND_ACTION, render_event(updated, event))
            answer = f"{escape(text)}. `{back}` is what it was before the act."
            return Commit(updated, events=(event,), replies=(reply,)), Outcome(result.done, answer)

        return await self.acting.commit(ref, decide)


def _act_of(value: str) -> tuple[str, str, str]:
    """A pilot button's value: the incident's ref, the act's time, its runner type."""
    ref, _, rest = value.partition("|")
    at, _, runner_type = rest.partition("|")
    return ref, at, runner_type


def _incident_for(
    views: list[tuple[Incident, FleetSnapshot]], runner_type: str
) -> tuple[Incident, Judgement] | None:
    """The oldest open incident whose live view shows `runner_type` (its thread is told), and
    the type's judgement there."""
    found = []
    for incident, view in views:
        metrics = of_type(view.runner_types, runner_type) if view.is_live else None
        if metrics is not None and metrics.judged is not None:
            found.append((incident, metrics.judged))
    return min(found, key=lambda f: f[0].opened_at) if found else None


def _last_act(incident: Incident, runner_type: str, piloted: Piloted) -> tuple[str, str, str, str]:
    """The pilot's last act on the type in `incident` in words, what came of it, the last act
    whose runners did not come (its time), and why it pauses now: once per such act."""
    acts = pilot_acts(incident, runner_type)
    if not acts or acts[-1].scale is None:
        return piloted.last, piloted.outcome, piloted.failed, ""
    act, done = acts[-1], acts[-1].scale
    last = f"+{done.added} at {act.at:%H:%M} UTC in incident {incident.id}"
    outcome = {True: "its runners came", False: "its runners did not come", None: ""}[done.came]
    if done.came is None and any(f.at == act.at for f in incident.follow_ups):
        outcome = "being followed"
    if done.came is not False or piloted.failed == act.at.isoformat():
        return last, outcome, piloted.failed, ""
    failed = f"its +{done.added} at {act.at:%H:%M} UTC did not come up"
    return last, outcome, act.at.isoformat(), failed
