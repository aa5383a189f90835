"""The pilot's judgement for one runner type at one reading: act (by how many runners, and why)
or decline (why not), as Kubernetes' HPA scales up with its `behavior`: an act adds the least
desired capacity over the up window (`hold_seconds`, HPA's `stabilizationWindowSeconds`) less the
capacity there is, booting runners included; at most `step` an act, every `period_seconds`, and
`up_to` in one incident (`maxReplicas`). It never acts within `cooldown_seconds` of a person's
scale-up."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PositiveFloat

from bot.domain.incident.incidents import Event, Incident, made_scale_ups
from bot.domain.reading.judgement import BOOT_MINS, TOLERANCE, Direction, Judgement
from bot.domain.reading.runner_names import runner_key, same_type
from bot.domain.scale.scale_ups import ScaleUp
from bot.domain.scale.scaling import Policy
from bot.domain.units import duration, number, plural

WARNING_REF = "warning:"  # an act's buttons name an early warning (its uid after), not an incident


class Hold(BaseModel):
    """Every reading since `since` wanted more runners than the type had then. `asks`: the desired
    capacities of the up window that no later one undercut, oldest (the least) first."""

    model_config = ConfigDict(frozen=True)

    since: AwareDatetime
    asks: tuple[tuple[AwareDatetime, PositiveFloat], ...] = Field(min_length=1)
    # What `asks` hold: a hold an earlier release kept held the advice's deltas, not capacities.
    of: Literal["desired"] | None = None

    @property
    def least(self) -> float:
        return self.asks[0][1]

    @property
    def at(self) -> datetime:
        return self.asks[-1][0]


def held(hold: Hold | None, judged: Judgement | None, hold_s: float) -> Hold | None:
    """The hold after the reading `judged`: a reading that wants no more than the capacity
    there is ends it; the same reading twice counts once."""
    if judged is None or judged.desired <= judged.supply:
        return None
    desired = judged.desired
    if hold is None or hold.of != "desired":
        return Hold(since=judged.at, asks=((judged.at, desired),), of="desired")
    if judged.at <= hold.at:
        return hold
    start = judged.at - timedelta(seconds=hold_s)
    kept = [(at, n) for at, n in hold.asks if n < desired and at >= start]
    return Hold(since=hold.since, asks=(*kept, (judged.at, desired)), of="desired")


@dataclass(frozen=True)
class Verdict:
    """`runners` to add now, and why; 0: it declines, and `why` says why not. `kind`: which
    rule decided, so a record changes where the decision does, not with its countdown."""

    runners: int
    why: str
    kind: str = field(default="", compare=False)


# Why it stands aside that a responder should read on the record (a hold or a period passes).
NOTEWORTHY = frozenset({"cannot_start", "autoscaler", "failed", "cooldown", "up_to", "falling"})


def pilot_acts(incident: Incident, runner_type: str) -> list[Event]:
    """The pilot's scale-ups of `runner_type` in `incident`, oldest first."""
    return [
        e
        for e in incident.actions
        if e.scale is not None and e.scale.pilot and same_type(e.scale.runner_type, runner_type)
    ]


def scale_ups(incident: Incident, runner_type: str) -> list[ScaleUp]:
    """The incident's scale-ups of `runner_type`, a person's or the pilot's."""
    return [up for up in made_scale_ups(incident) if same_type(up.runner_type, runner_type)]


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
    """Whether the pilot adds runners to a type now, from its latest judgement and its scale-ups
    in what it acts `within` (`mine`) and in every other open incident or warning (`others`): a
    person's anywhere counts for the cooldown; one that did not come before someone `resumed` the
    pilot is theirs to have looked at."""
    if judged is None:
        return Verdict(0, "no live reading of it", "unread")
    if judged.causes or judged.cannot_start:
        cause = judged.causes[0].evidence if judged.causes else plural(judged.cannot_start, "pod")
        return Verdict(0, f"runners cannot start: {cause}", "cannot_start")
    if judged.nodes_short:
        short = f"runners cannot start: {judged.unplaced} new runner pods find no node"
        return Verdict(0, short, "cannot_start")
    # Runners the autoscaler started itself, where their pods are not read or some wait for a
    # node, may never start, and more would wait the same way: it waits for them, one boot at most
    # (ephemeral runners keep some booting for good).
    every = sorted({act_key(up): up for up in (*others, *mine)}.values(), key=_made)
    # Booting counts every scale-up of the last boot once: the rest are the autoscaler's own.
    booted = judged.at - timedelta(minutes=BOOT_MINS)
    ours = sum(up.added for up in every if booted <= _made(up) and not up.undone)
    theirs = judged.booting - ours
    capacity = judged.supply
    if hold is None:
        return Verdict(0, f"its readings want no more than the {_runners(capacity)} it has", "none")
    unsure = not judged.pods_read or judged.unplaced
    if theirs > 0 and unsure and now - hold.since < timedelta(minutes=BOOT_MINS):
        waits = f"waiting for {plural(theirs, 'runner')} the autoscaler started to register"
        return Verdict(0, waits, "autoscaler")
    asked_s = (hold.at - hold.since).total_seconds()
    if asked_s < policy.hold_s:
        # Clock times, not a countdown: the thread's line and the root keep what it said.
        acts_at = hold.since + timedelta(seconds=policy.hold_s)
        held_since = f"its readings have wanted more runners since {_clock(hold.since)}"
        return Verdict(0, f"{held_since}: it acts from {_clock(acts_at)} if they still do", "hold")
    if judged.direction is Direction.FALLING:
        return Verdict(0, "the queue is falling", "falling")
    own = {act_key(up) for up in mine if up.pilot}
    # Its own acts here count as capacity while they boot, where the reading counts runners at
    # all (a queue-only source would buy them again).
    counted = judged.registered is not None or judged.busy is not None
    for up in reversed(every):
        said = f"the +{up.added} at {_made(up):%H:%M} UTC"
        if up.followed and not (act_key(up) in own and counted):
            return Verdict(0, f"{said} is not verified yet", "unverified")
        if up.came is False and (resumed is None or (up.seen_at or _made(up)) > resumed):
            return Verdict(0, f"{said} did not come up", "failed")
    people = [up for up in every if not up.pilot]
    if people and now < (until := _made(people[-1]) + timedelta(seconds=policy.cooldown_s)):
        by = people[-1].by or "someone"
        return Verdict(0, f"cooling down after {by}'s scale-up until {_clock(until)}", "cooldown")
    acts = [up for up in every if up.pilot]
    if acts and now < (again := _made(acts[-1]) + timedelta(seconds=policy.period_s)):
        did = "it would have acted" if policy.dry_run else "it acted"  # a dry run's acts
        said = f"{did} at {_clock(_made(acts[-1]))}: again from {_clock(again)}"
        return Verdict(0, said, "period")
    room = policy.up_to - sum(up.added for up in mine if up.pilot)
    if room <= 0:
        return Verdict(0, f"it added its up_to of {policy.up_to} in this {within}", "up_to")
    wanted = math.floor(hold.least - capacity + 1e-9)
    # HPA's tolerance: a least within a tenth of the capacity moves nothing (a runner or two of
    # a large fleet is a reply, a put-back and the type's lock for no drain anyone would see).
    if wanted <= 0 or hold.least <= capacity * (1 + TOLERANCE):
        covered = f"the {_runners(capacity)} it has cover the least its readings want"
        return Verdict(0, covered, "covered")
    runners = min(wanted, policy.step, room, judged.cap or wanted)
    asked = duration(timedelta(seconds=asked_s))
    why = f"+{wanted} wanted for {asked} ({number(capacity)} → {number(hold.least)})"
    if runners == wanted:
        return Verdict(runners, f"{why}, within up_to {policy.up_to}", "act")
    bounds = ((policy.step, "its step"), (room, f"up_to {policy.up_to}"), (judged.cap, "the cap"))
    bound = next(name for value, name in bounds if value == runners)
    return Verdict(runners, f"{why}, +{runners} by {bound}", "act")


def act_key(up: ScaleUp) -> tuple[object, ...]:
    """One scale-up however many records keep it (a folded early warning's and its incident's):
    when, of what, by how many, whose."""
    return (up.at, runner_key(up.runner_type), up.added, up.pilot)


def _clock(at: datetime) -> str:
    """14:05 UTC, to the second where a policy's seconds are that short."""
    return f"{at:%H:%M:%S} UTC" if at.second else f"{at:%H:%M} UTC"


def _runners(capacity: float) -> str:
    return f"{number(capacity)} runners running and booting"


def _made(up: ScaleUp) -> datetime:
    assert up.at is not None, "a scale-up kept on an event or a warning says when it was made"
    return up.at


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
    # The act under way ("<where> <claim>"): a leader that finds it met a predecessor stopped.
    acting: str = ""
    kind: str = ""  # the rule that decided (`Verdict.kind`), "paused", or "" where none did


@dataclass(frozen=True)
class PilotState:
    """One type's pilot as `/queue pilot` and the Home show it."""

    runner_type: str
    policy: Policy
    piloted: Piloted
    paused: Paused | None
    enabled: bool
