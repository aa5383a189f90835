"""Minutes from the alert to added capacity on the simulated fleet: the pilot against a person
clicking at the demo's pace.

`python -m bench.pilot` replays the demo's burst (`sandbox.fleet.DEMO_BURSTS`) on
`sandbox.fleet.Fleet`, on its own clock with no waiting, three times: nobody scales, a person
scales, the pilot scales. The fleet is read as the `prometheus` backend reads ARC's gauges, at
the demo's cadence (`sandbox.stack`: a reading every `metrics_interval_s` of a fleet
`DEMO_SPEED` times faster), beside the fleet's Grafana rule (`sandbox.fleet_alerts.QueueRule`,
evaluated every 30 fleet seconds, as `sandbox.fleet_api` does). Each reading is judged by the
bot's own `judged`, with the history the bot keeps (`troubled_gauges`) and the demo's advice
windows and cap; the incident opens when the rule fires and shows that judgement with the
runners added since (`with_scale_ups`), its follow-ups decided by `settled`, as the leader does.

- **person**: the demo's scripted walk (`tests/sandbox/test_browser.py`'s visitor, through
  `sandbox.visitor`) scales up once the incident's first status is in, a status interval after
  it opened (`STATUS_INTERVAL_S`, the demo's ten fleet minutes), by what the scale form offers
  then (`scale_default` on the root's judgement, the target's cap); its clicks take the next
  reading (18 fleet seconds, a few real seconds at ×6).
- **pilot**: at each reading, `held` and `verdict` with `POLICY`, acting by what the form would
  offer within the verdict, as the pilot's act does; an act is unverified until its runners
  registered (its follow-up), and a scale-up cools the type down.

Either act is the `arc` scaler's plan (`maxRunners` raised at the maximum), applied to the fleet
as ARC's stand-in applies a patch (`Fleet.set_bounds`): the runners boot in the type's boot time.
Added capacity is the reading at which the first act's follow-up says its runners came (the
type's registered runners at the baseline plus those added, `outcome_of`). Times are fleet
minutes from the rule firing; "drained" is the rule resolving (Grafana's recovery threshold).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from bench.early_warning import EPOCH, Clock, metrics_of
from bot.backends.scale import refused
from bot.backends.scale.arc import _capacity, _planned
from bot.config import Settings
from bot.domain.fleet import FleetSnapshot, HistoryPoint, troubled_gauges
from bot.domain.follow_ups import following
from bot.domain.incidents import Event, Incident, ScaleDone, with_action, with_scale_ups
from bot.domain.judgement import RECENT_READINGS, Judgement
from bot.domain.judging import judged
from bot.domain.pilot import PILOT, Hold, held, verdict
from bot.domain.scaling import Capacity, Policy, ScaleTarget, scale_default
from bot.status.follow_ups import settled
from sandbox.fleet import DEMO_BURSTS, DEMO_SPEED, DEMO_TYPES, Burst, Fleet, TypeReading
from sandbox.fleet_alerts import QueueRule, RuleConfig
from sandbox.fleet_api import EVALUATE_EVERY_SIM_S, set_status
from sandbox.stack import (
    ADVICE_RISE_WINDOW_S,
    ADVICE_WINDOW_S,
    FLEET_MINUTES,
    PILOT_POLICY,
    SCALE_CAP,
    STATUS_INTERVAL_S,
    SandboxConfig,
)

# The demo's own policy (`make demo DEMO_ARGS=--pilot`), in fleet seconds: the demo divides a
# policy's seconds by its speed, as it does the advice windows.
POLICY = Policy(
    PILOT_POLICY["up_to"],
    PILOT_POLICY["step"],
    PILOT_POLICY["hold_seconds"],
    PILOT_POLICY["cooldown_seconds"],
)
READING_S = round(SandboxConfig().metrics_interval_s * DEMO_SPEED)
RULE_S = round(EVALUATE_EVERY_SIM_S)
TICK_S = 6  # divides both cadences
WINDOW, RISE = timedelta(seconds=ADVICE_WINDOW_S), timedelta(seconds=ADVICE_RISE_WINDOW_S)
INTERVAL = timedelta(seconds=READING_S)
KEPT = max(RECENT_READINGS, -(-max(WINDOW, RISE) // INTERVAL) + 1)  # as `FleetReadings` keeps
# SCALE_VERIFY_SECONDS unset: derived from the boot time the demo configures.
VERIFY_S = Settings(runner_boot_minutes=FLEET_MINUTES["runner_boot_minutes"]).scale_verify_s
PERSON, PILOT_RUN, NOBODY = "person", "pilot", "nobody"
PERSON_NAME = "alice"
# The walk scales once the first status is in, and its clicks take until the next reading.
PERSON_AFTER = timedelta(seconds=STATUS_INTERVAL_S + READING_S)


@dataclass(frozen=True)
class Offer:
    runners: int  # 0: nothing offered
    raise_maximum: bool
    capacity: Capacity


@dataclass
class Run:
    who: str
    fired_min: float | None = None
    acts: list[tuple[float, int]] = field(default_factory=list)  # (fleet minute, runners)
    came: list[float] = field(default_factory=list)  # the minutes each act's runners came
    peak: int = 0  # the burst's type's most jobs queued at a reading
    drained_min: float | None = None

    def since_fired(self, minute: float | None) -> float | None:
        if minute is None or self.fired_min is None:
            return None
        return round(minute - self.fired_min, 1)

    @property
    def came_min(self) -> float | None:
        """Added capacity: the first act's runners registered."""
        return min(self.came, default=None)

    @property
    def added(self) -> int:
        return sum(runners for _, runners in self.acts)


def read(fleet: Fleet, history: list[HistoryPoint], at: datetime) -> FleetSnapshot:
    """The fleet as the `prometheus` backend reads it, judged as the leader judges a reading."""
    types = {name: metrics_of(r) for name, r in fleet.reading().items()}
    snapshot = FleetSnapshot(at=at, source="prometheus", runner_types=types)
    caps = dict.fromkeys(types, SCALE_CAP)
    target = FLEET_MINUTES["drain_target_minutes"]
    recent = history[-KEPT:]
    return judged(
        snapshot, recent, interval=INTERVAL, within_mins=target, window=WINDOW, rise=RISE, caps=caps
    )


def remembered(fleet: FleetSnapshot) -> HistoryPoint:
    """The history point the leader keeps of a judged reading."""
    types = fleet.runner_types.items()
    return HistoryPoint(
        fleet.at,
        {n: m.arrival_per_min for n, m in types if m.arrival_per_min is not None},
        {n: m.job_duration_mins for n, m in types if m.job_duration_mins is not None},
        troubled_gauges(fleet.runner_types),
    )


def opened(at: datetime) -> Incident:
    return Incident(
        id="1",
        group_key="bench",
        group_hash="bench",
        source="grafana",
        title="Jobs queueing in autoscaled machines",
        started_at=at,
        opened_at=at,
        updated_at=at,
    )


def offered(judgement: Judgement, reading: TypeReading, target: ScaleTarget) -> Offer:
    """What the scale form offers for the type now, as the `arc` scaler reads its scale set."""
    runner_set = {
        "spec": {"minRunners": reading.minimum, "maxRunners": reading.maximum},
        "status": set_status(reading),
        "metadata": {},
    }
    capacity = _capacity(runner_set)
    shape = scale_default(
        judgement,
        target,
        capacity,
        can_raise_maximum=True,
        refusal=lambda delta, up: refused(_planned, target, delta, up, capacity),
    )
    return Offer(shape.delta or 0, shape.raise_maximum, capacity)


def scaled(
    incident: Incident, fleet: Fleet, target: ScaleTarget, offer: Offer, at: datetime, by: str
) -> Incident:
    """The scale-up made as the `arc` scaler plans it, ARC's stand-in taking the patch, and the
    incident's record of it with its follow-up, as `Scaling.record` keeps them."""
    capacity = offer.capacity
    field_name, value, _ = _planned(target, offer.runners, offer.raise_maximum, capacity)
    minimum, maximum = capacity.minimum or 0, capacity.maximum
    raised = field_name == "maxRunners"
    fleet.set_bounds(target.runner_type, minimum if raised else value, value if raised else maximum)
    done = ScaleDone(
        runner_type=target.runner_type,
        added=offer.runners,
        by=by,
        at=at,
        field=field_name,
        before=maximum if raised else minimum,
        after=value,
        pilot=by == PILOT,
    )
    text = f"Scaled by +{offer.runners}"
    event = Event(at=at, kind="scaled", text=text, actor_name=by, scale=done)
    follow = following(incident, done, at=at, verify_s=VERIFY_S, detail="")
    updated = with_action(incident, event)
    return updated.model_copy(update={"follow_ups": (*updated.follow_ups, follow)})


def replay(
    burst: Burst, who: str, *, seed: int = 7, minutes: int = 60, policy: Policy = POLICY
) -> Run:
    """One replay of `burst` with `who` scaling its runner type (`NOBODY`: no one)."""
    clock = Clock()
    fleet = Fleet(DEMO_TYPES, (burst,), speed=1, seed=seed, clock=clock)
    rule = QueueRule(RuleConfig())
    name = burst.runner_type
    target = ScaleTarget(name, f"arc-runners/{name}", SCALE_CAP, pilot=policy)
    run = Run(who)
    history: list[HistoryPoint] = []
    incident: Incident | None = None
    hold: Hold | None = None
    for second in range(0, minutes * 60, TICK_S):
        clock.now, minute = float(second), second / 60
        at = EPOCH + timedelta(seconds=second)
        if second % RULE_S == 0:
            was = rule.state
            rule.evaluate(minute, at, *fleet.worst(), silenced=False)
            if rule.state == "firing" and was != "firing" and incident is None:
                run.fired_min, incident = minute, opened(at)
            if was == "firing" and rule.state == "normal" and run.drained_min is None:
                run.drained_min = minute
        if second % READING_S:
            continue
        reading = fleet.reading()[name]
        fleet_view = read(fleet, history, at)
        history.append(remembered(fleet_view))
        run.peak = max(run.peak, reading.queued)
        if incident is None:
            continue
        view = with_scale_ups(fleet_view, incident.actions)
        incident, _, _ = settled(incident.model_copy(update={"live": view}), view, at)
        run.came = [_minute(e.scale.seen_at) for e in incident.actions if e.scale and e.scale.came]
        if run.drained_min is not None:
            continue  # resolved: nobody and no pilot scales a closed incident
        judgement = view.runner_types[name].judged
        assert judgement is not None
        offer = None
        if who == PILOT_RUN:
            hold = held(hold, judgement, policy.hold_s)
            decided = verdict(policy, hold, judgement, incident, name, at)
            if decided.runners:
                offer = offered(judgement, reading, target)
                offer = replace(offer, runners=min(decided.runners, offer.runners))
        elif who == PERSON and not run.acts and at >= incident.opened_at + PERSON_AFTER:
            offer = offered(judgement, reading, target)
        if offer is not None and offer.runners:
            by = PILOT if who == PILOT_RUN else PERSON_NAME
            incident = scaled(incident, fleet, target, offer, at, by)
            run.acts.append((minute, offer.runners))
            hold = None  # the next act waits for a hold of its own
    return run


def measure(*, seeds: range = range(5), minutes: int = 60) -> dict[str, Any]:
    """Each of the demo's bursts at the demo's seed (7), and the first over `seeds`."""
    whos = (NOBODY, PERSON, PILOT_RUN)
    demo = {burst: [replay(burst, who, minutes=minutes) for who in whos] for burst in DEMO_BURSTS}
    spread = {
        who: [replay(DEMO_BURSTS[0], who, seed=seed, minutes=minutes) for seed in seeds]
        for who in (PERSON, PILOT_RUN)
    }
    return {"demo": demo, "spread": spread, "seeds": seeds}


def _minute(at: datetime | None) -> float:
    assert at is not None, "a follow-up that decided kept its reading's time"
    return (at - EPOCH).total_seconds() / 60


def _mins(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def row(run: Run) -> str:
    acts = ", ".join(f"+{n} at {_mins(run.since_fired(m))}" for m, n in run.acts) or "-"
    came = [run.since_fired(m) for m in run.came]
    return (
        f"  {run.who:<7} {acts:<32} {_mins(run.since_fired(run.came_min)):>9} "
        f"{_mins(max(came, default=None)):>8} {run.added:>6} {run.peak:>5} "
        f"{_mins(run.since_fired(run.drained_min)):>8}"
    )


def compared(person: float | None, pilot: float | None) -> str:
    if person is None or pilot is None:
        return "(no comparison: one never came)"
    if pilot == person:
        return "when the person's did"
    return (
        f"{abs(person - pilot):.1f} min {'sooner' if pilot < person else 'later'} than the person's"
    )


def report(found: dict[str, Any]) -> None:
    print("alert to added capacity on the simulated fleet (fleet minutes from the rule firing)")
    print(
        f"  read every {READING_S} s as the demo reads it; the person scales once the first "
        f"status is in ({STATUS_INTERVAL_S // 60} min after the alert); the pilot's policy: "
        f"up_to {POLICY.up_to}, step {POLICY.step}, hold {POLICY.hold_s} s, cooldown "
        f"{POLICY.cooldown_s} s"
    )
    for burst, runs in found["demo"].items():
        nobody, person, pilot = runs
        print(
            f"  {burst.runner_type}, {burst.arrival_per_min:g} jobs/min from minute "
            f"{burst.starts_min:g} for {burst.lasts_min:g} min: the rule fired at minute "
            f"{_mins(nobody.fired_min)}"
        )
        heading = f"{'who':<7} {'acts (+runners at)':<32} {'capacity':>9} {'all came':>8}"
        print(f"  {heading} {'added':>6} {'peak':>5} {'drained':>8}")
        for run in runs:
            print(row(run))
        sooner = compared(person.since_fired(person.came_min), pilot.since_fired(pilot.came_min))
        drain = compared(
            person.since_fired(person.drained_min), pilot.since_fired(pilot.drained_min)
        )
        print(f"  the pilot's capacity came {sooner}; its queue drained {drain}")
    seeds = found["seeds"]
    for who, runs in found["spread"].items():
        capacity = [run.since_fired(run.came_min) for run in runs]
        drained = [run.since_fired(run.drained_min) for run in runs]
        print(
            f"  seeds {seeds.start}-{seeds.stop - 1}, {who}: capacity at {capacity} "
            f"(median {_median(capacity)}), drained at {drained} (median {_median(drained)})"
        )


def _median(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    return _mins(statistics.median(known)) if known else "-"


def main() -> None:
    report(measure())


if __name__ == "__main__":
    main()
