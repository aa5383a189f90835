"""What scaling a runner type is about, as values: its target (what the backend acts on, with a
cap per request and an optional ceiling), the capacity a backend reports, and what the scale
modal shows before anyone confirms. The calls themselves are `bot.backends.scale`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.domain.forecast import Recommendation
from bot.domain.incidents import Incident


@dataclass(frozen=True)
class ScaleTarget:
    runner_type: str
    target: str  # arc: "namespace/name"; aws-asg: the group's name; sqs: the runner label
    cap: int
    ceiling: int | None = None


@dataclass(frozen=True)
class Capacity:
    """What a target has now, as far as its backend can say (None: not known)."""

    current: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    # Raising the floor would change nothing: ARC runs min(minRunners + assigned, maxRunners).
    at_maximum: bool = False

    def describe(self) -> str:
        """ "40 runners (min 0, max 120)", with what is known."""
        runners = f"{self.current} runners" if self.current is not None else "runners unknown"
        bounds = [
            f"{name} {value}"
            for name, value in (("min", self.minimum), ("max", self.maximum))
            if value is not None
        ]
        return runners + (f" ({', '.join(bounds)})" if bounds else "")


@dataclass(frozen=True)
class ScalePreview:
    """What the scale modal shows for one runner type before anyone confirms."""

    incident: Incident
    target: ScaleTarget
    capacity: Capacity | None
    capacity_note: str  # why capacity is unknown, when it is
    recommended: Recommendation | None
    can_raise_maximum: bool
