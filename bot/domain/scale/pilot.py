"""The pilot's judgement for one runner type at one reading: act (by how many runners, and why)
or decline (why not), within the type's policy, as Kubernetes' HPA bounds a scale-up with its
`behavior`: the advice must have asked through the whole hold (`stabilizationWindowSeconds`),
and the least it asked is taken; one act adds at most `step` (a policy's `value`), none comes
within `cooldown_seconds` of the type's last scale-up (its `periodSeconds`), and the pilot's own
additions in one incident stay within `up_to` (`maxReplicas`, counted as runners added)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PositiveInt

from bot.domain.incident.incidents import Event, Incident, made_scale_ups
from bot.domain.reading.fleet import of_type
from bot.domain.reading.judgement import Direction, Judgement
from bot.domain.scale.scale_ups import ScaleUp
from bot.domain.scale.scaling import Policy
from bot.domain.units import duration

PILOT = "queuepilot (policy)"  # who the timeline says acted: no person's permission is borrowed
WARNING_REF = "warning:"  # an act's buttons name an early warning (its uid after), not an incident


class Hold(BaseModel):
    """The advice has asked for runners at every reading since `since`. `asks` are the readings
    of the last hold that a later one did not undercut, oldest first (a sliding window's
    minimum): the first is the least asked over the window, the last the latest reading."""

    model_config = ConfigDict(frozen=True)

    since: AwareDatetime
    asks: tuple[tuple[AwareDatetime, PositiveInt], ...] = Field(min_length=1)

    @property
    def least(self) -> int:
        return self.asks[0][1]

    @property
    def at(self) -> datetime:
        return self.asks[-1][0]


def held(hold: Hold | None, judged: Judgement | None, hold_s: float) -> Hold | None:
    """The hold after the reading `judged`: a reading that asks for no runners ends it; the
    same reading twice counts once."""
    asked = judged.runners if judged is not None else 0
    if judged is None or asked <= 0:
        return None
    if hold is None:
        return Hold(since=judged.at, asks=((judged.at, asked),))
    if judged.at <= hold.at:
        return hold
    start = judged.at - timedelta(seconds=hold_s)
    kept = [(at, n) for at, n in hold.asks if n < asked and at >= start]
    return Hold(since=hold.since, asks=(*kept, (judged.at, asked)))


@dataclass(frozen=True)
class Verdict:
    """`runners` to add now, and why; 0: it declines, and `why` says why not."""

    runners: int
    why: str


def pilot_acts(incident: Incident, runner_type: str) -> list[Event]:
    """The pilot's scale-ups of `runner_type` in `incident`, oldest first."""
    return [
        e
        for e in incident.actions
        if e.scale is not None and e.scale.pilot and _same(e.scale.runner_type, runner_type)
    ]


def scale_ups(incident: Incident, runner_type: str) -> list[ScaleUp]:
    """The incident's scale-ups of `runner_type`, a person's or the pilot's."""
    return [up for up in made_scale_ups(incident) if _same(up.runner_type, runner_type)]


def _same(name: str, runner_type: str) -> bool:
    return of_type({name: True}, runner_type) is not None


def verdict(
    policy: Policy,
    hold: Hold | None,
    judged: Judgement | None,
    mine: Sequence[ScaleUp],
    now: datetime,
    *,
    others: Sequence[ScaleUp] = (),
    resumed: datetime | None = None,
    within: str = "incident",
) -> Verdict:
    """Whether the pilot adds runners to a type now, from the type's judgement of the latest
    reading, as the surfaces of what it acts `within` show it (an incident, or an early warning
    before one), and the scale-ups of the type there (`mine`) and in every other open incident or
    warning (`others`): a person's anywhere counts for the cooldown. A scale-up that did not come
    up before someone `resumed` the pilot is theirs to have looked at."""
    if judged is None:
        return Verdict(0, "no live reading of it")
    if judged.runners <= 0 or hold is None:
        return Verdict(0, f"the advice asks for no runners ({judged.advice or 'none'})")
    asked_s = (hold.at - hold.since).total_seconds()
    if asked_s < policy.hold_s:
        return Verdict(
            0,
            f"the advice has asked for {_mins(asked_s)} of the {_mins(policy.hold_s)} it must hold",
        )
    if judged.direction is Direction.FALLING:
        return Verdict(0, "the queue is falling")
    if judged.causes or judged.cannot_start:
        pods = "pod" if judged.cannot_start == 1 else "pods"
        cause = judged.causes[0].evidence if judged.causes else f"{judged.cannot_start} {pods}"
        return Verdict(0, f"runners cannot start: {cause}")
    if judged.nodes_short:
        return Verdict(0, f"runners cannot start: {judged.unplaced} new runner pods find no node")
    every = sorted((*mine, *others), key=_made)
    for up in reversed(every):
        said = f"the +{up.added} at {_made(up):%H:%M} UTC"
        if up.followed:
            return Verdict(0, f"{said} is not verified yet")
        if up.came is False and (resumed is None or (up.seen_at or _made(up)) > resumed):
            return Verdict(0, f"{said} did not come up")
    if every and (quiet := now - _made(every[-1])) < timedelta(seconds=policy.cooldown_s):
        left = policy.cooldown_s - quiet.total_seconds()
        return Verdict(0, f"cooling down: {_mins(left)} left since the last scale-up")
    added = sum(up.added for up in mine if up.pilot)
    room = policy.up_to - added
    if room <= 0:
        return Verdict(0, f"it added its up_to of {policy.up_to} in this {within}")
    cap = judged.cap or hold.least
    runners = min(hold.least, policy.step, room, cap)
    why = f"+{hold.least} asked for {_mins(asked_s)}"
    if runners == hold.least:
        return Verdict(runners, f"{why}, within up_to {policy.up_to}")
    bounds = ((policy.step, "its step"), (room, f"up_to {policy.up_to}"), (cap, "the cap"))
    bound = next(name for value, name in bounds if value == runners)
    return Verdict(runners, f"{why}, +{runners} by {bound}")


def _made(up: ScaleUp) -> datetime:
    assert up.at is not None, "a scale-up kept on an event or a warning says when it was made"
    return up.at


def _mins(seconds: float) -> str:
    return duration(timedelta(seconds=seconds))


class Paused(BaseModel):
    by: str  # a person's name, or the pilot's when its own act failed
    why: str
    at: datetime


class Piloted(BaseModel):
    """What the leader last made of a type: `why` it acts or not, as `/queue pilot` says it;
    its last act ("+7 at 14:02 in incident 12") and what came of it."""

    why: str = ""
    at: datetime | None = None
    hold: Hold | None = None
    last: str = ""
    outcome: str = ""
    failed: str = ""  # the last act whose runners did not come, as its time: paused for once
    # The act under way, as it was claimed ("<where> <claim>"): kept before the scaler's call and
    # gone once the look ends, so a leader that finds it met a predecessor stopped mid-act.
    acting: str = ""


@dataclass(frozen=True)
class PilotState:
    """One type's pilot as `/queue pilot` and the Home show it."""

    runner_type: str
    policy: Policy
    piloted: Piloted
    paused: Paused | None
    enabled: bool
