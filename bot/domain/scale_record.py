"""What an incident's scale-ups came to, per runner type: the one record the summary, the
postmortem, the alert's issue and `/queue report` render. Derived from the scale-ups' own events
(`Incident.actions`, each `ScaleDone` keeping what its follow-up found), never kept beside them."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.domain.incidents import Event, Incident, ScaleDone


@dataclass(frozen=True)
class Acts:
    """Scale-ups of one kind (people's or the pilot's): how many, the runners they asked for,
    how many came up or did not (the rest are not known); `capacity_mins`, one per incident, the
    minutes from its alert to the first of them whose runners came."""

    count: int = 0
    runners: int = 0
    came: int = 0
    not_came: int = 0
    capacity_mins: tuple[float, ...] = ()

    @property
    def not_known(self) -> int:
        return self.count - self.came - self.not_came

    def plus(self, other: Acts) -> Acts:
        return Acts(
            self.count + other.count,
            self.runners + other.runners,
            self.came + other.came,
            self.not_came + other.not_came,
            (*self.capacity_mins, *other.capacity_mins),
        )


@dataclass(frozen=True)
class ScaleUps:
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

    def plus(self, other: ScaleUps) -> ScaleUps:
        """Over several incidents (the report's window)."""
        mins = (*self.capacity_mins, *other.capacity_mins)
        return ScaleUps(
            self.runner_type, self.people.plus(other.people), self.pilot.plus(other.pilot), mins
        )


def alert_fired(incident: Incident) -> datetime:
    """The moment the alert fired: its `startsAt` (`started_at`), not `alerted_at`, the latest
    notification, which every repeat of the alert moves on."""
    return incident.started_at


def scale_ups_made(incident: Incident) -> list[tuple[Event, ScaleDone]]:
    """Each scale-up (a person's, the pilot's, or one taken on from an early warning), oldest
    first, its `at` the moment it was made."""
    made = [(e, d) for e in incident.actions if (d := e.scale) is not None]
    return [(e, d if d.at else d.model_copy(update={"at": e.at})) for e, d in made]


def scale_record(incident: Incident) -> list[ScaleUps]:
    """Per runner type, in the order first scaled up."""
    fired = alert_fired(incident)
    acts: dict[str, dict[bool, list[ScaleDone]]] = {}
    for _, done in scale_ups_made(incident):
        acts.setdefault(done.runner_type, {False: [], True: []})[done.pilot].append(done)
    record = []
    for runner_type, by in acts.items():
        people, pilot = _acts(by[False], fired), _acts(by[True], fired)
        record.append(ScaleUps(runner_type, people, pilot, _first(by[False] + by[True], fired)))
    return record


def _acts(made: list[ScaleDone], fired: datetime) -> Acts:
    return Acts(
        count=len(made),
        runners=sum(d.added for d in made),
        came=sum(d.came is True for d in made),
        not_came=sum(d.came is False for d in made),
        capacity_mins=_first(made, fired),
    )


def _first(made: list[ScaleDone], fired: datetime) -> tuple[float, ...]:
    """The minutes from the alert to the earliest reading that saw runners of `made` come; none
    before it (a scale-up from the early warning whose runners came first): capacity was there."""
    seen = [d.seen_at for d in made if d.came is True and d.seen_at is not None]
    if not seen:
        return ()
    return (max((min(seen) - fired) / timedelta(minutes=1), 0.0),)
