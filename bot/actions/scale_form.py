"""The Scale up… form, one for whoever owns the scale-up: an incident's root and an early
warning's message open the same form, reviewed and confirmed the same way. What differs is data
(`ScaleOwner`): whose the scale-up is, the runner types offered, what puts it back, and the
judgement its default comes from.

The default is the judgement the person is looking at: the incident's, as its root shows it
(`judgement_of`); for a warning, its runner type's in the current fleet reading (the warning
keeps only its words: a field added to its stored state would not load on an older replica
during a rolling upgrade). Either is checked against the target by `Scaling.preview`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from bot.actions.early_warning import Warnings
from bot.actions.flow import Actor, Outcome
from bot.actions.scale import Scaling
from bot.config import Settings
from bot.domain.incident_fleet import judgement_of
from bot.domain.judgement import Judgement
from bot.domain.runner_names import runner_key
from bot.domain.scaling import ScaleOwner, ScalePreview
from bot.fleet.readings import FleetReadings

NO_WARNINGS = Outcome(False, "Early warnings are turned off.", "refused")


class ScaleForms:
    def __init__(
        self,
        scaling: Scaling,
        readings: FleetReadings,
        warnings: Warnings | None = None,
        *,
        clock: Callable[[], datetime],
        config: Settings,
    ) -> None:
        self._clock = clock
        self._scaling = scaling
        self._readings = readings
        self._warnings = warnings
        self._config = config

    async def owner(
        self, actor: Actor, *, ref: str, warning: str, runner_type: str
    ) -> ScaleOwner | Outcome:
        """Whose scale-up a form makes: the early warning `warning` (its uid) for its runner
        type, else the incident `ref`; or why `actor` cannot scale from it."""
        if warning:
            if self._warnings is None:
                return NO_WARNINGS
            state = await self._warnings.scale_choice(actor, runner_type, warning)
            if isinstance(state, Outcome):
                return state
            return ScaleOwner((runner_type,), warning=state)
        choice = await self._scaling.choices(actor, ref)
        if isinstance(choice, Outcome):
            return choice
        incident, types = choice
        return ScaleOwner(tuple(types), incident=incident)

    async def preview(
        self, owner: ScaleOwner, runner_type: str, *, timeout_s: float
    ) -> ScalePreview:
        """What the form shows for `runner_type`, its default from the owner's judgement."""
        advice = await self.advice(owner, runner_type)
        return await self._scaling.preview(
            runner_type, advice, timeout_s=timeout_s, until=owner.until
        )

    async def advice(self, owner: ScaleOwner, runner_type: str) -> Judgement | None:
        """The judgement the owner's message shows of `runner_type`: the incident's root's, or
        the current fleet reading's (what the warning's message says, or newer)."""
        if owner.incident is not None:
            now, within = self._clock(), self._config.drain_target_minutes
            return judgement_of(owner.incident, runner_type, now=now, within_mins=within)
        reading = await self._readings.latest()
        fleet = reading.fleet if reading is not None else None
        if fleet is None:
            return None
        key = runner_key(runner_type)
        found = fleet.runner_types.get(runner_type) or next(
            (m for name, m in fleet.runner_types.items() if runner_key(name) == key), None
        )
        return found.judged if found is not None else None

    async def scale(
        self,
        actor: Actor,
        owner: tuple[str, str],
        runner_type: str,
        delta: int,
        *,
        raise_maximum: bool,
        keep: bool,
        interaction: str | None,
    ) -> Outcome:
        """The confirmed scale-up, made by its owner: `owner` is (incident ref, warning uid), as
        the form carries them."""
        ref, warning = owner
        if not warning:
            return await self._scaling.scale(
                actor,
                ref,
                runner_type,
                delta,
                raise_maximum=raise_maximum,
                keep=keep,
                interaction=interaction,
            )
        if self._warnings is None:
            return NO_WARNINGS
        return await self._warnings.scale(
            actor,
            runner_type,
            warning,
            delta,
            raise_maximum=raise_maximum,
            keep=keep,
            interaction=interaction,
        )
