"""The early warning's buttons: Dismiss (no warning for that runner type for an hour) and
Scale up (a real scale-up, before the alert fires).

Anyone in the channel may dismiss: it silences nothing, it only holds back a forecast. The
message says who dismissed it and until when (their name, not a mention); the alert, if it
fires, opens its incident as always.

Scale up takes the incident's path (`bot.actions.scale`: permission, cap, the type's lock, the
backend's call) and is owned by the warning: its message says who scaled what, and the revert
sweep puts it back once the warning's queue is over, or hands it to the incident that takes the
warning on (`bot.actions.scale_reverts`). A Scale up… opened from a warning whose alert fired
meanwhile goes on to the incident that took the warning on: the person asked for the runners,
and the incident is where they are now recorded.
"""

from __future__ import annotations

from datetime import UTC, timedelta

from bot.actions.flow import Acting, Actor, Outcome, refused
from bot.actions.scale import Scaling
from bot.domain.early_warning import Phase, WarningState
from bot.render.early_warning import DISMISS_FOR_S
from bot.render.mrkdwn import escape, slack_date, truncate
from bot.storage.early_warning import WarningStore


class Warnings:
    def __init__(self, acting: Acting, store: WarningStore, scaling: Scaling | None = None) -> None:
        self._acting = acting
        self._store = store
        self._scaling = scaling

    async def dismiss(
        self, actor: Actor, runner_type: str, uid: str, *, interaction: str | None = None
    ) -> Outcome:
        return await self._acting.guarded(
            "dismiss_warning", actor, interaction, lambda: self._dismiss(actor, runner_type, uid)
        )

    async def _dismiss(self, actor: Actor, runner_type: str, uid: str) -> Outcome:
        state = await self._active(runner_type, uid)
        if isinstance(state, Outcome):
            return state
        now = self._acting.clock()
        until = now + timedelta(seconds=DISMISS_FOR_S)
        who = await self._acting.name(actor)
        dismissed = state.changed(
            now.timestamp(), phase=Phase.DISMISSED, by=who, until=until.timestamp()
        )
        if not await self._store.save(dismissed):
            return Outcome(
                False, f"The early warning for {_name(runner_type)} changed meanwhile: try again."
            )
        when = slack_date(until.astimezone(UTC), "{time}")
        return Outcome(True, f"No early warning for {_name(runner_type)} until {when}.")

    # -- Scale up --------------------------------------------------------------------------

    async def scale_choice(
        self, actor: Actor, runner_type: str, uid: str
    ) -> WarningState | Outcome:
        """The standing warning one may scale its runner type from (or the one an incident took
        on: the scale-up is the incident's then), or why not."""
        scaling = self._scaling
        if scaling is None:
            return refused("Scaling is not set up.")
        refusal = await scaling.refusal(actor)
        if refusal is not None:
            return refusal
        state = await self._active(runner_type, uid, folded=True)
        if isinstance(state, Outcome):
            return state
        problem = scaling.check(runner_type, 1)  # the type has a target
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
        async def run() -> Outcome:
            return await self._scale(actor, runner_type, uid, delta, raise_maximum, keep)

        return await self._acting.guarded("scale", actor, interaction, run)

    async def _scale(
        self,
        actor: Actor,
        runner_type: str,
        uid: str,
        delta: int,
        raise_maximum: bool,
        keep: bool,
    ) -> Outcome:
        choice = await self.scale_choice(actor, runner_type, uid)
        if isinstance(choice, Outcome):
            return choice
        scaling = self._scaling
        assert scaling is not None  # scale_choice refuses without it
        if choice.phase is Phase.FOLDED:
            # Already guarded (this click, once): the incident's scale-up, unguarded.
            done = await scaling.scale_now(
                actor, choice.incident_id, runner_type, delta, raise_maximum, keep
            )
            if not done.ok:
                return done
            fired = (
                f"The alert fired meanwhile: incident {escape(choice.incident_id)} carries the "
                "warning on, and the scale-up is its."
            )
            return Outcome(True, f"{fired} {done.message}", done.result)
        problem = scaling.check(runner_type, delta)
        if problem:
            return refused(problem)
        name = await self._acting.name(actor)
        done = await scaling.call(name, runner_type, delta, raise_maximum)
        if isinstance(done, Outcome):
            return done
        request, result = done
        undo, _ = await scaling.remember(request, result, keep, warning=uid)
        at = self._acting.clock()
        line = (
            f"{name} scaled {runner_type} by +{delta} at {at:%H:%M} UTC: {result.detail} "
            f"({scaling.backend_name})."
        )
        line += f" {undo}" if undo else ""
        await self._note(runner_type, uid, line)
        # When it goes back is said once, on the warning's message (edited once it went back).
        answer = f"You scaled `{_name(runner_type)}` by +{delta}: {escape(result.detail)}."
        return Outcome(True, answer)

    async def _note(self, runner_type: str, uid: str, line: str) -> None:
        """Add `line` to what the warning's message says of its scale-ups (read again when
        the upkeep saved a newer version meanwhile); an ended warning keeps it too."""

        def noted(state: WarningState | None) -> WarningState | None:
            if state is None or state.uid != uid:
                return None
            scaled = f"{state.scaled} · {line}" if state.scaled else line
            return state.changed(self._acting.clock().timestamp(), scaled=scaled)

        await self._store.save_fresh(runner_type, noted)

    async def _active(
        self, runner_type: str, uid: str, *, folded: bool = False
    ) -> WarningState | Outcome:
        """The warning while it stands (`folded`: or once an incident took it on)."""
        state = await self._store.get(runner_type)
        if state is not None and state.uid == uid:
            taken_on = folded and state.phase is Phase.FOLDED and bool(state.incident_id)
            if state.phase is Phase.ACTIVE or taken_on:
                return state
        return refused(f"The early warning for {_name(runner_type)} has ended already.")


def _name(runner_type: str) -> str:
    return truncate(escape(runner_type), 200)
