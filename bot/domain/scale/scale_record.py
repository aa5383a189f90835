"""What an incident's scale-ups came to, per runner type, as every report renders it: derived
from the scale-ups' own events, never kept beside them."""

from __future__ import annotations

import statistics
from dataclasses import astuple, dataclass, field
from datetime import datetime, timedelta

from bot.domain.incident.incidents import Incident, made_scale_ups
from bot.domain.scale.scale_ups import ScaleUp


@dataclass(frozen=True)
class Acts:
    """Scale-ups of one kind (people's or the pilot's): how many, the runners asked, how many came
    or did not; `capacity_mins`, one per incident, alert to the first whose runners came."""

    count: int = 0
    runners: int = 0
    came: int = 0
    not_came: int = 0
    capacity_mins: tuple[float, ...] = ()

    @property
    def not_known(self) -> int:
        return self.count - self.came - self.not_came

    def plus(self, other: Acts) -> Acts:
        return Acts(*(mine + its for mine, its in zip(astuple(self), astuple(other), strict=True)))


@dataclass(frozen=True)
class TypeScaled:
    """A runner type's scale-ups, by people and by the pilot; `capacity_mins`, one per incident,
    the minutes from its alert to added capacity, whoever added it."""

    runner_type: str
    people: Acts = field(default_factory=Acts)
    pilot: Acts = field(default_factory=Acts)
    capacity_mins: tuple[float, ...] = ()

    @property
    def all(self) -> Acts:
        return self.people.plus(self.pilot)

    @property
    def capacity_median(self) -> float | None:
        return statistics.median(self.capacity_mins) if self.capacity_mins else None

    def plus(self, other: TypeScaled) -> TypeScaled:
        """Over several incidents (the report's window)."""
        mins = (*self.capacity_mins, *other.capacity_mins)
        people, pilot = self.people.plus(other.people), self.pilot.plus(other.pilot)
        return TypeScaled(self.runner_type, people, pilot, mins)


def alert_fired(incident: Incident) -> datetime:
    """The moment the alert fired: its `startsAt` (`started_at`), not `alerted_at`, the latest
    notification, which every repeat of the alert moves on."""
    return incident.started_at


def scale_record(incident: Incident) -> list[TypeScaled]:
    """Per runner type, in the order first scaled up (a person's scale-up, the pilot's, or one
    taken on from an early warning)."""
    fired, made = alert_fired(incident), made_scale_ups(incident)
    record = []
    for runner_type in dict.fromkeys(done.runner_type for done in made):
        of = [done for done in made if done.runner_type == runner_type]
        people, pilot = (_acts([d for d in of if d.pilot is by], fired) for by in (False, True))
        record.append(TypeScaled(runner_type, people, pilot, _first(of, fired)))
    return record


def _acts(made: list[ScaleUp], fired: datetime) -> Acts:
    came = [d.came for d in made]
    runners = sum(d.added for d in made)
    return Acts(len(made), runners, came.count(True), came.count(False), _first(made, fired))


def _first(made: list[ScaleUp], fired: datetime) -> tuple[float, ...]:
    """The minutes from the alert to the earliest reading that saw runners of `made` come; none
    before it (a scale-up from the early warning whose runners came first): capacity was there."""
    seen = [d.seen_at for d in made if d.came is True and d.seen_at is not None]
    return (max((min(seen) - fired) / timedelta(minutes=1), 0.0),) if seen else ()
