"""Minutes from the alert to added capacity on the simulated fleet, and to a drained queue: the
pilot against a person.

`python -m bench.pilot` replays two stories (`Story`) on `sandbox.fleet.Fleet`, on its own clock
with no waiting, over seeds: the demo's burst (`sandbox.fleet.DEMO_BURSTS`), and a plain surge
(a job a second against 20 runners of 1-minute jobs). Each is replayed with nobody scaling, a
person, and the pilot. The fleet is read as the `prometheus` backend reads ARC's gauges, at the
demo's cadence (`sandbox.stack`: a reading every `metrics_interval_s` of a fleet `DEMO_SPEED`
times faster), beside the fleet's Grafana rule (`sandbox.fleet_alerts.QueueRule`, evaluated
every 30 fleet seconds, as `sandbox.fleet_api` does) and the bot's early warning
(`bench.early_warning.Warner`). Each reading is judged by the bot's own `judged`, with the
history the bot keeps (`troubled_gauges`) and the demo's advice windows and the story's cap; the
incident (or the early warning before it) shows that judgement with the runners added since
(`counting_scale_ups`), its follow-ups decided by `settled`, as the leader does.

- **person**: on the demo's burst, the scripted walk (`tests/sandbox/test_browser.py`'s
  visitor) scales up once the incident's first status is in, a status interval after it opened
  (`STATUS_INTERVAL_S`, the demo's ten fleet minutes), its clicks taking the next reading; on
  the surge, a minute after the alert. Either submits what the scale form offers then
  (`scale_default` on the root's judgement, the story's cap).
- **pilot**: from the early warning on, at each reading, `held` and `verdict` with the story's
  policy (the demo's `--pilot` one), acting by what the form offers for the verdict's runners
  (`asking`), as the pilot's act does; its acts count as capacity while they boot.

Either act goes through the bot's own `arc` scaler (`ArcScaler`: its capacity, its refusal, its
patch) to the fleet's Kubernetes API (`sandbox.fleet_api`, in process), whose ARC stand-in acts on
the new bounds at once: the runners boot in the type's boot time.
Added capacity is the reading at which the first act's follow-up says its runners came (the
type's registered runners at the baseline plus those added, `outcome_of`). Times are fleet
minutes from the rule firing (an act on the early warning is before it: negative); "drained" is
the rule resolving (Grafana's recovery threshold: at most 2 jobs queued and none older than 2
minutes, which a queue served oldest first reaches only once its backlog is gone). On the demo's
burst the pilot is also replayed with `SLOWER`, a cautious policy of 3-minute hold and period.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from lightkube.config.kubeconfig import KubeConfig
from lightkube.config.models import Cluster, User

from bench.early_warning import EPOCH, Clock, Warner, metrics_of, rule_thresholds
from bot.actions.scale import made
from bot.backends.kube import KubeAccess
from bot.backends.scale import ScaleRequest
from bot.backends.scale.arc import ArcScaler
from bot.config import Settings
from bot.domain.incident.incidents import (
    PILOT,
    Event,
    Incident,
    counting_scale_ups,
    made_scale_ups,
    with_action,
)
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, judged_of, troubled_gauges
from bot.domain.reading.judgement import RECENT_READINGS, Judgement, asking
from bot.domain.reading.judging import judged
from bot.domain.scale.pilot import Hold, held, scale_ups, verdict
from bot.domain.scale.scale_ups import follow
from bot.domain.scale.scaling import Policy, ScaleTarget, scale_default
from bot.status.follow_ups import settled
from sandbox.fleet import DEMO_BURSTS, DEMO_SPEED, DEMO_TYPES, Burst, Fleet, RunnerTypeSpec
from sandbox.fleet_alerts import QueueRule, RuleConfig
from sandbox.fleet_api import EVALUATE_EVERY_SIM_S, FleetApi, FleetApiConfig
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
    PILOT_POLICY["period_seconds"],
)
# A cautious pilot: it acts once its readings wanted more for 3 minutes, again 3 minutes on.
SLOWER = Policy(POLICY.up_to, POLICY.step, 180, POLICY.cooldown_s, 180)
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
class Story:
    """A surge replayed: the fleet's runner types and the burst on one of them, the most one
    request adds (the form's default stops there), the pilot's policy, and when the person
    submits the form after the alert."""

    name: str
    types: tuple[RunnerTypeSpec, ...]
    burst: Burst
    cap: int
    policy: Policy
    person_after: timedelta
    others: tuple[Policy, ...] = ()  # other pilots replayed beside the story's own


DEMO = Story(
    "the demo's burst", DEMO_TYPES, DEMO_BURSTS[0], SCALE_CAP, POLICY, PERSON_AFTER, (SLOWER,)
)
# A plain surge: one job a second for 5 minutes against 20 runners of 1-minute jobs, a person
# who opens the form a minute after the alert and submits its default (one request's cap of
# 60), and a pilot allowed as much, 20 an act, for a fleet whose surges come at once: it acts
# once two readings in a row wanted more, and again a reading on (HPA's own default scale-up
# window is none). Beside it, the demo's hold and period.
SURGE = Story(
    "a plain surge",
    (RunnerTypeSpec("linux.2xlarge", 10.0, 1.0, 2.0, 4, 20, "linux-2xlarge"),),
    Burst("linux.2xlarge", 1.0, 5.0, 60.0),
    60,
    Policy(60, 20, READING_S, POLICY.cooldown_s, READING_S),
    timedelta(minutes=1),
    (Policy(60, 20, POLICY.hold_s, POLICY.cooldown_s, POLICY.period_s),),
)


@dataclass(frozen=True)
class Offer:
    runners: int  # 0: nothing offered
    raise_maximum: bool


@dataclass
class Run:
    who: str
    policy: Policy | None = None  # the pilot's
    usual: Policy | None = None  # the story's own, which its label need not name
    fired_min: float | None = None
    warned_min: float | None = None  # the early warning the pilot may act on, before the alert
    acts: list[tuple[float, int]] = field(default_factory=list)  # (fleet minute, runners)
    came: list[float] = field(default_factory=list)  # the minutes each act's runners came
    peak: int = 0  # the burst's type's most jobs queued at a reading
    drained_min: float | None = None
    # The root's advice and the jobs queued at each reading from the alert to the resolve.
    advised: list[tuple[int, float]] = field(default_factory=list)

    def since_fired(self, minute: float | None) -> float | None:
        if minute is None or self.fired_min is None:
            return None
        return round(minute - self.fired_min, 1)

    @property
    def came_min(self) -> float | None:
        """Added capacity: the first act's runners registered."""
        return min(self.came, default=None)

    @property
    def advised_to_peak(self) -> list[int]:
        """The runners the root advised from the alert to the first reading at the queue's
        peak: what a responder watching the climb reads."""
        top = max((queued for _, queued in self.advised), default=0.0)
        peak = next((k for k, (_, queued) in enumerate(self.advised) if queued == top), -1)
        return [runners for runners, _ in self.advised[: peak + 1] if runners]

    @property
    def added(self) -> int:
        return sum(runners for _, runners in self.acts)

    @property
    def label(self) -> str:
        """Who scaled, and the pilot's policy when it is not the story's."""
        if self.policy is None or self.policy == self.usual:
            return self.who
        return f"{self.who} (hold {self.policy.hold_s:g} s, period {self.policy.period_s:g} s)"


def read(fleet: Fleet, history: list[HistoryPoint], at: datetime, cap: int) -> FleetSnapshot:
    """The fleet as the `prometheus` backend reads it, judged as the leader judges a reading."""
    types = {name: metrics_of(r) for name, r in fleet.reading().items()}
    snapshot = FleetSnapshot(at=at, source="prometheus", runner_types=types)
    caps = dict.fromkeys(types, cap)
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


def scaler(fleet: Fleet) -> tuple[ArcScaler, dict[str, str]]:
    """The bot's `arc` scaler on the fleet's Kubernetes API, served in process, and the scale
    set of each runner type."""
    api = FleetApi(fleet, FleetApiConfig())
    cluster, user = Cluster(server="http://fleet"), User(token=api.kube.token)
    access = KubeAccess(KubeConfig.from_one(cluster=cluster, user=user).get())
    # lightkube copies its transport's fields: a plain function copies as itself, the app not.
    transport = httpx.ASGITransport(app=lambda *call: api.app(*call))
    settings = Settings()
    client = access.client(settings.backend_timeout_seconds, transport)
    return ArcScaler(settings, access, client), api.scale_sets


async def offered(arc: ArcScaler, judgement: Judgement, target: ScaleTarget) -> Offer:
    """What the scale form offers for the type now, as `Scaling.preview` decides it."""
    capacity = await arc.capacity(target)
    shape = scale_default(
        judgement,
        target,
        capacity,
        can_raise_maximum=arc.can_raise_maximum,
        refusal=lambda delta, up: arc.refusal(target, capacity, delta, raise_maximum=up),
    )
    return Offer(shape.delta or 0, shape.raise_maximum)


async def scaled(
    incident: Incident, arc: ArcScaler, target: ScaleTarget, offer: Offer, at: datetime, by: str
) -> Incident:
    """The scale-up made by the `arc` scaler, and the incident's record of it with its
    follow-up, as `Scaling.record` keeps them."""
    request = ScaleRequest(target, offer.runners, incident.id, by, offer.raise_maximum)
    changed = (await arc.scale(request)).undo
    assert changed is not None, "ARC's scale-ups can be put back"
    done = made(target.runner_type, offer.runners, by, at, changed, pilot=by == PILOT)
    judged = judged_of(incident.live, done.runner_type)
    up = follow(done, judged, verify_s=VERIFY_S, earlier=made_scale_ups(incident))
    text = f"Scaled by +{offer.runners}"
    return with_action(incident, Event(at=at, kind="scaled", text=text, actor_name=by, scale=up))


def replay(
    story: Story, who: str, *, seed: int = 7, minutes: int = 60, policy: Policy | None = None
) -> Run:
    """One replay of `story` with `who` scaling its runner type (`NOBODY`: no one); the pilot
    with `policy`, else the story's."""
    chosen = policy or story.policy
    return asyncio.run(_replayed(story, who, seed=seed, minutes=minutes, policy=chosen))


async def _replayed(story: Story, who: str, *, seed: int, minutes: int, policy: Policy) -> Run:
    clock = Clock()
    burst = story.burst
    fleet = Fleet(story.types, (burst,), speed=1, seed=seed, clock=clock)
    arc, scale_sets = scaler(fleet)
    rule = QueueRule(RuleConfig())
    name = burst.runner_type
    target = ScaleTarget(name, f"arc-runners/{scale_sets[name]}", story.cap, pilot=policy)
    run = Run(who, policy if who == PILOT_RUN else None, story.policy)
    history: list[HistoryPoint] = []
    incident: Incident | None = None
    hold: Hold | None = None
    warner = Warner(rule_thresholds())
    for second in range(0, minutes * 60, TICK_S):
        clock.now, minute = float(second), second / 60
        at = EPOCH + timedelta(seconds=second)
        if second % RULE_S == 0:
            was = rule.state
            rule.evaluate(minute, at, *fleet.worst(), silenced=False)
            if rule.state == "firing" and was != "firing" and run.fired_min is None:
                run.fired_min, incident = minute, incident or opened(at)
            if was == "firing" and rule.state == "normal" and run.drained_min is None:
                run.drained_min = minute
        if second % READING_S:
            continue
        fleet_view = read(fleet, history, at, story.cap)
        history.append(remembered(fleet_view))
        reading = fleet.reading()[name]
        run.peak = max(run.peak, reading.queued)
        warner.starts(name, metrics_of(reading), at, float(reading.assigned))
        if run.fired_min is None and warner.standing(name) and incident is None:
            # The early warning: the pilot acts on it before the alert, as the leader does
            # (its acts go on in the incident that takes the warning on).
            incident, run.warned_min = opened(at), minute
        if incident is None or (run.fired_min is None and not warner.standing(name)):
            hold = None  # nothing open to act in: the pilot holds nothing
            continue
        view = counting_scale_ups(fleet_view, incident.actions)
        incident, _, _ = settled(incident.model_copy(update={"live": view}), view, at)
        run.came = [_minute(e.scale.seen_at) for e in incident.actions if e.scale and e.scale.came]
        if run.drained_min is not None:
            continue  # resolved: nobody and no pilot scales a closed incident
        judgement = view.runner_types[name].judged
        assert judgement is not None
        if run.fired_min is not None:
            run.advised.append((judgement.runners, judgement.queued or 0.0))
        offer = None
        if who == PILOT_RUN:
            hold = held(hold, judgement, policy.hold_s)
            decided = verdict(policy, hold, judgement, scale_ups(incident, name), at)
            if decided.runners:
                offer = await offered(arc, asking(judgement, decided.runners), target)
        elif who == PERSON and not run.acts and _after(run.fired_min, minute, story.person_after):
            offer = await offered(arc, judgement, target)
        if offer is not None and offer.runners:
            by = PILOT if who == PILOT_RUN else PERSON_NAME
            incident = await scaled(incident, arc, target, offer, at, by)
            run.acts.append((minute, offer.runners))
    return run


def _after(fired_min: float | None, minute: float, wait: timedelta) -> bool:
    """A person acts on the alert, `wait` after it fired."""
    return fired_min is not None and minute >= fired_min + wait.total_seconds() / 60


def measure(
    *,
    seeds: range = range(5),
    minutes: int = 60,
    stories: tuple[Story, ...] = (DEMO, SURGE),
) -> dict[Story, dict[str, Any]]:
    """Each story at the demo's seed (7) and over `seeds`: nobody, the person, the pilot with
    the story's policy, and with each of its others."""

    def runs(story: Story, seed: int) -> list[Run]:
        whos = [(NOBODY, None), (PERSON, None), (PILOT_RUN, story.policy)]
        whos += [(PILOT_RUN, p) for p in story.others]
        return [replay(story, w, seed=seed, minutes=minutes, policy=p) for w, p in whos]

    found = {}
    for story in stories:
        by_seed = [runs(story, seed) for seed in seeds]
        spread = {each[0].label: list(each) for each in zip(*by_seed, strict=True)}
        found[story] = {"seed 7": runs(story, 7), "spread": spread, "seeds": seeds}
    return found


def _minute(at: datetime | None) -> float:
    assert at is not None, "a follow-up that decided kept its reading's time"
    return (at - EPOCH).total_seconds() / 60


def _mins(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def row(run: Run, width: int) -> str:
    acts = ", ".join(f"+{n} at {_mins(run.since_fired(m))}" for m, n in run.acts) or "-"
    came = [run.since_fired(m) for m in run.came]
    return (
        f"  {run.label:<{width}} {acts:<40} {_mins(run.since_fired(run.came_min)):>9} "
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


def report(found: dict[Story, dict[str, Any]]) -> None:
    print("alert to added capacity on the simulated fleet (fleet minutes from the rule firing)")
    print(
        f"  read every {READING_S} s as the demo reads it; the pilot's policy: "
        f"{_policy(POLICY)} (the demo's), or as its row says"
    )
    for story, each in found.items():
        report_story(story, each)


def report_story(story: Story, found: dict[str, Any]) -> None:
    burst, seeds = story.burst, found["seeds"]
    nobody, person, *pilots = found["seed 7"]
    print(
        f"{story.name}: {burst.runner_type}, {burst.arrival_per_min:g} jobs/min from minute "
        f"{burst.starts_min:g} for {burst.lasts_min:g} min; one request's cap {story.cap}; the "
        f"person submits the form's default {_mins(story.person_after.total_seconds() / 60)} "
        f"min after the alert; the pilot: {_policy(story.policy)}; the rule fired at minute "
        f"{_mins(nobody.fired_min)}"
    )
    runs = found["seed 7"]
    width = max(len(run.label) for run in runs)
    heading = f"{'who':<{width}} {'acts (+runners at)':<40} {'capacity':>9} {'all came':>8}"
    print(f"  {heading} {'added':>6} {'peak':>5} {'drained':>8}")
    for run in runs:
        print(row(run, width))
    for pilot in pilots:
        sooner = compared(person.since_fired(person.came_min), pilot.since_fired(pilot.came_min))
        drain = compared(
            person.since_fired(person.drained_min), pilot.since_fired(pilot.drained_min)
        )
        print(f"  {pilot.label}: its capacity came {sooner}; its queue drained {drain}")
    advised = nobody.advised_to_peak
    print(
        f"  the root's advice from the alert to the peak: {_steps(advised)} "
        f"({len(set(advised))} amounts)"
    )
    medians = {}
    for who, spread in found["spread"].items():
        capacity = [run.since_fired(run.came_min) for run in spread]
        drained = [run.since_fired(run.drained_min) for run in spread]
        medians[who] = _median(drained)
        print(
            f"  seeds {seeds.start}-{seeds.stop - 1}, {who}: capacity at {_listed(capacity)} "
            f"(median {_mins(_median(capacity))}), added "
            f"{', '.join(str(run.added) for run in spread)}, "
            f"drained at {_listed(drained)} (median {_mins(medians[who])})"
        )
    for who, median in medians.items():
        if who.startswith(PILOT_RUN) and median is not None and medians[PERSON]:
            print(f"  {who}: median drain {median / medians[PERSON]:.2f}x the person's")
    amounts = [len(set(run.advised_to_peak)) for run in found["spread"][NOBODY]]
    said = f"  seeds {seeds.start}-{seeds.stop - 1}: the root's advised amounts to the peak"
    print(f"{said}: {', '.join(map(str, amounts))}")


def _policy(policy: Policy) -> str:
    return (
        f"up_to {policy.up_to}, step {policy.step}, hold {policy.hold_s} s, period "
        f"{policy.period_s} s, cooldown {policy.cooldown_s} s"
    )


def _steps(advised: list[int]) -> str:
    """ "+16 → +18 → +20": each amount the root showed, in order."""
    return " → ".join(f"+{n}" for n in dict.fromkeys(advised)) or "none"


def _listed(values: list[float | None]) -> str:
    return ", ".join(_mins(value) for value in values)


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def main() -> None:
    report(measure())


if __name__ == "__main__":
    main()
