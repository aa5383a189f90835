"""The early warning's buttons: Dismiss (anyone may: it only holds back a forecast, for an hour)
and Scale up (the warning's, or the incident's that took it on)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, timedelta

from bot.actions.flow import Acting, Actor, Outcome, refused
from bot.actions.scale import Scaling
from bot.domain.reading.early_warning import Phase, WarningState
from bot.domain.reading.fleet import judged_of
from bot.fleet.readings import FleetReadings
from bot.render.early_warning import DISMISS_FOR_S
from bot.render.mrkdwn import escape, slack_date, truncate
from bot.storage.early_warning import WarningStore


@dataclass
class Warnings:
    acting: Acting
    store: WarningStore
    scaling: Scaling
    readings: FleetReadings | None = None  # a live backend's: a scale-up is followed from them

    async def dismiss(
        self, actor: Actor, runner_type: str, uid: str, *, interaction: str | None = None
    ) -> Outcome:
        async def run() -> Outcome:
            state = await self._active(runner_type, uid)
            if isinstance(state, Outcome):
                return state
            now = self.acting.clock()
            until = now + timedelta(seconds=DISMISS_FOR_S)
            who = await self.acting.name(actor)
            dismissed = state.changed(
                now.timestamp(), phase=Phase.DISMISSED, by=who, until=until.timestamp()
            )
            if not await self.store.save(dismissed):
                changed = f"The early warning for {_name(runner_type)} changed meanwhile"
                return Outcome(False, f"{changed}: try again.")
            when = slack_date(until.astimezone(UTC), "{time}")
            return Outcome(True, f"No early warning for {_name(runner_type)} until {when}.")

        return await self.acting.guarded("dismiss_warning", actor, interaction, run)

    async def standing(self, runner_type: str, uid: str) -> WarningState | Outcome:
        """The standing warning (or the one an incident took on) to scale from, or why not."""
        state = await self._active(runner_type, uid, folded=True)
        if isinstance(state, Outcome):
            return state
        problem = self.scaling.check(runner_type, 1)  # the type has a target
        return refused(problem) if problem else state

    async def scale(
        self,
        actor: Actor,
        runner_type: str,
        uid: str,
        delta: int,
        *,
        raise_maximum: bool = False,
        keep: bool = False,
        interaction: str | None = None,
    ) -> Outcome:
        run = lambda: self._scale(actor, runner_type, uid, delta, raise_maximum, keep)  # noqa: E731
        return await self.acting.guarded("scale", actor, interaction, run)

    async def _scale(
        self, actor: Actor, runner_type: str, uid: str, delta: int, raise_maximum: bool, keep: bool
    ) -> Outcome:
        # `guarded` authorized the actor; whether scaling is set up is still to say.
        choice = self.scaling.unset() or await self.standing(runner_type, uid)
        if isinstance(choice, Outcome):
            return choice
        scaling = self.scaling
        if choice.phase is Phase.FOLDED:
            ref = choice.incident_id
            done = await scaling.scale_now(actor, ref, runner_type, delta, raise_maximum, keep)
            if not done.ok:
                return done
            fired = (
                f"The alert fired meanwhile: incident {escape(choice.incident_id)} carries the "
                "warning on, and the scale-up is its."
            )
            return Outcome(True, f"{fired} {done.message}", done.result)
        if problem := scaling.check(runner_type, delta):
            return refused(problem)
        name = await self.acting.name(actor)
        scaled = await scaling.scale_up(name, runner_type, delta, raise_maximum, keep, warning=uid)
        if isinstance(scaled, Outcome):
            return scaled
        reading = await self.readings.latest() if self.readings is not None else None
        judged = judged_of(reading.fleet if reading and not reading.error else None, runner_type)
        await scaling.record_on_warning(self.store, uid, name, runner_type, delta, scaled, judged)
        shown = escape(scaled[0].detail)
        return Outcome(True, f"You scaled `{_name(runner_type)}` by +{delta}: {shown}.")

    async def _active(
        self, runner_type: str, uid: str, *, folded: bool = False
    ) -> WarningState | Outcome:
        state = await self.store.get(runner_type)
        if state is not None and state.uid == uid:
            taken_on = folded and state.phase is Phase.FOLDED and bool(state.incident_id)
            if state.phase is Phase.ACTIVE or taken_on:
                return state
        return refused(f"The early warning for {_name(runner_type)} has ended already.")


def _name(runner_type: str) -> str:
    return truncate(escape(runner_type), 200)
