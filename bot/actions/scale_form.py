"""The Scale up… form, for an incident's root or an early warning's message. A warning's default is
its runner type's judgement in the current fleet reading: a field added to the warning's stored
state would not load on a 0.25 replica during a rolling upgrade."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.actions.early_warning import Warnings
from bot.actions.flow import Actor, Outcome
from bot.actions.scale import Scaling
from bot.config import Settings
from bot.domain.fleet import of_type
from bot.domain.incident_fleet import judgement_of
from bot.domain.judgement import Judgement
from bot.domain.scaling import ScaleOwner, ScalePreview
from bot.fleet.readings import FleetReadings


@dataclass
class ScaleForms:
    scaling: Scaling
    readings: FleetReadings
    warnings: Warnings
    clock: Callable[[], datetime]
    config: Settings

    async def owner(
        self, actor: Actor, *, ref: str, warning: str, runner_type: str
    ) -> ScaleOwner | Outcome:
        """The early warning `warning` (its uid) for its runner type, else the incident `ref`; or
        why `actor` cannot scale from it."""
        if warning:
            state = await self.warnings.scale_choice(actor, runner_type, warning)
            return (
                state if isinstance(state, Outcome) else ScaleOwner((runner_type,), warning=state)
            )
        choice = await self.scaling.choices(actor, ref)
        if isinstance(choice, Outcome):
            return choice
        incident, types = choice
        return ScaleOwner(tuple(types), incident=incident)

    async def preview(
        self, owner: ScaleOwner, runner_type: str, *, timeout_s: float
    ) -> ScalePreview:
        advice: Judgement | None = None
        if owner.incident is not None:
            now, within = self.clock(), self.config.drain_target_minutes
            advice = judgement_of(owner.incident, runner_type, now=now, within_mins=within)
        elif (reading := await self.readings.latest()) is not None and reading.fleet is not None:
            found = of_type(reading.fleet.runner_types, runner_type)
            advice = found.judged if found is not None else None
        return await self.scaling.preview(
            runner_type, advice, timeout_s=timeout_s, until=owner.until
        )

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
        """The confirmed scale-up; `owner` is (incident ref, warning uid), as the form has it."""
        ref, warning = owner
        how = {"raise_maximum": raise_maximum, "keep": keep, "interaction": interaction}
        if warning:
            return await self.warnings.scale(actor, runner_type, warning, delta, **how)
        return await self.scaling.scale(actor, ref, runner_type, delta, **how)
