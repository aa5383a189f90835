"""How early the early warning warns, and how often it warns for nothing, on the simulated fleet.

`python -m bench.early_warning` replays simulated days on `sandbox.fleet.Fleet` (its own clock,
no waiting): a reading every fleet minute, mapped to the bot's `RunnerTypeMetrics` as the
`prometheus` backend reads ARC's gauges, fed to the bot's own forecast
(`bot.domain.reading.early_warning.forecast`, with the upkeep's rule: a standing warning needs
its growth to stop to be withdrawn), beside the fleet's Grafana rule
(`sandbox.fleet_alerts.QueueRule`, evaluated every 30 fleet seconds). It measures:

- **lead time**: from the first warning of an episode to the rule firing (target: at least 5
  fleet minutes for the demo's burst);
- **false warnings**: episodes not followed by the rule firing within 20 minutes (target: at
  most 1 per simulated day at normal load, and none for a fleet at its maximum whose queue only
  wanders between 0 and 3 jobs from reading to reading).

The demo's burst is read every 30 fleet seconds, as the demo reads it (`sandbox.stack`: a reading
every `metrics_interval_s` of a fleet `speed` times faster); the days every fleet minute, as the
bot's default reading interval reads a real fleet.

Read every second, as a check from outside read the bot through a real Prometheus
(`tests/system/test_early_warning_lead.py` replays it end to end): a fleet at its maximum whose
queue wanders over 0-3 jobs for 40 s, then gains a job a second toward an alert at 30 queued
(target: warned in the ramp's first half, and never during the noise); and an hour of wanders
read every second, every warning false.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.domain.reading.early_warning import NOISE_READINGS, Point, Thresholds, forecast
from bot.domain.reading.fleet import RunnerTypeMetrics
from bot.domain.reading.runner_pods import RunnerPods
from sandbox.fleet import DEMO_BURSTS, DEMO_TYPES, Burst, Fleet, TypeReading
from sandbox.fleet_alerts import QueueRule, RuleConfig
from sandbox.fleet_api import pod_readings

EPOCH = datetime(2026, 11, 24, tzinfo=UTC)
HORIZON_MINS, BOOT_MINS = 15.0, 5.0
PAST = NOISE_READINGS - 1  # earlier readings the upkeep passes the forecast
FOLLOWED_MINS = 20.0  # a warning the alert follows within this long was not for nothing
# The simulated fleet starts empty: its first minutes fill it from nothing, which no real fleet
# does (and which reads as a queue building); on a day at normal load those are not counted.
WARM_UP_MINS = 15.0
NOISY_AT = 12  # the noisy fleet's runners, all busy, at its maximum
NOISY_QUEUED = (3, 10)  # ... and its queue, anywhere from none to this many jobs at each reading
BUILD_ALERT_QUEUED = 30.0  # the noisy builds' rule: ten minutes or more of building before it
# The check read every second: 40 s of a queue wandering over 0-3 jobs, then a job a second from 1
# toward the alert's 30 queued; each reading up to `LATE_S` later than a second after the last
# (the bot's tick, a Prometheus query).
RAMP_NOISE_S, RAMP_MOST, LATE_S = 40, 3, 0.15


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def metrics_of(reading: TypeReading) -> RunnerTypeMetrics:
    """What the `prometheus` backend reads of ARC's listener and the runner pods for this
    type."""
    return RunnerTypeMetrics(
        queued=reading.queued,
        assigned=reading.assigned,
        longest_wait_mins=reading.longest_wait_mins,
        registered=reading.registered,
        busy=reading.busy,
        idle=reading.idle,
        minimum=reading.minimum,
        maximum=reading.maximum,
        desired=reading.desired,
        arrival_per_min=reading.arrival_per_min,
        started_per_min=reading.started_per_min,
        completed_per_min=reading.completed_per_min,
        job_duration_mins=reading.job_duration_mins,
        pods=RunnerPods(**pod_readings(reading, BOOT_MINS)),
    )


@dataclass
class Run:
    warnings: list[tuple[str, float]] = field(default_factory=list)  # (type, start minute)
    firings: list[float] = field(default_factory=list)  # minutes the rule fired

    def leads(self) -> list[float]:
        """For each firing, how long before it the latest warning began (none: no entry)."""
        out = []
        for fired in self.firings:
            before = [start for _, start in self.warnings if fired - 30 <= start <= fired]
            if before:
                out.append(fired - max(before))
        return out

    def false_warnings(self) -> int:
        return sum(
            1
            for _, start in self.warnings
            if not any(start <= fired <= start + FOLLOWED_MINS for fired in self.firings)
        )


class Warner:
    """The upkeep's decisions, reading by reading: a warning starts when the forecast says so
    and it is not standing, and stands until a forecast of a standing warning says nothing."""

    def __init__(self, thresholds: Thresholds) -> None:
        self._thresholds = thresholds
        self._past: dict[str, list[Point]] = {}
        self._active: set[str] = set()

    def starts(self, name: str, now: RunnerTypeMetrics, at: datetime, in_system: float) -> bool:
        trail = self._past.setdefault(name, [])
        said = forecast(
            name,
            now,
            at,
            trail[-PAST:],
            self._thresholds,
            boot_mins=BOOT_MINS,
            horizon_mins=HORIZON_MINS,
            sustained=name in self._active,
        )
        trail.append(Point(at, in_system))
        if said is None:
            self._active.discard(name)
            return False
        started = name not in self._active
        self._active.add(name)
        return started

    def standing(self, name: str) -> bool:
        return name in self._active


def rule_thresholds() -> Thresholds:
    config = RuleConfig()
    return Thresholds(float(config.fire_queued), config.fire_wait_min)


def replay(
    bursts: tuple[Burst, ...],
    minutes: int,
    seed: int = 7,
    *,
    warm_up_mins: float = 0.0,
    reading_s: int = 60,
) -> Run:
    """One replay: a reading every `reading_s` fleet seconds (30 or 60), the rule every 30 s;
    warnings raised in the first `warm_up_mins` are not counted."""
    clock = Clock()
    fleet = Fleet(DEMO_TYPES, bursts, speed=1, seed=seed, clock=clock)
    rule = QueueRule(RuleConfig())
    warner = Warner(rule_thresholds())
    run = Run()
    for half in range(minutes * 2):
        minute = half / 2
        clock.now = minute * 60
        at = EPOCH + timedelta(minutes=minute)
        queued, wait = fleet.worst()
        was = rule.state
        rule.evaluate(minute, at, queued, wait, silenced=False)
        if rule.state == "firing" and was != "firing":  # a new firing, not a re-notification
            run.firings.append(minute)
        if half % (reading_s // 30):
            continue
        for name, reading in fleet.reading().items():
            started = warner.starts(name, metrics_of(reading), at, float(reading.assigned))
            if started and minute >= warm_up_mins:
                run.warnings.append((name, minute))
    return run


def noisy_day(seed: int, most: int) -> int:
    """Warnings raised in a simulated day of a fleet at its maximum whose queue wanders, with no
    trend at all, between none and `most` jobs from one minute's reading to the next (its
    Grafana rule never fires: every warning is false)."""
    rng = random.Random(seed)
    warner = Warner(rule_thresholds())
    warnings = 0
    for minute in range(1440):
        queued = float(rng.randint(0, most))
        now = RunnerTypeMetrics(
            queued=queued,
            busy=NOISY_AT,
            registered=NOISY_AT,
            maximum=NOISY_AT,
            job_duration_mins=6.0,
        )
        at = EPOCH + timedelta(minutes=minute)
        warnings += warner.starts("linux.2xlarge", now, at, NOISY_AT + queued)
    return warnings


def noisy_build(seed: int, rate: float, most: int) -> float | None:
    """A fleet at its maximum whose queue wanders between none and `most` jobs for 40 minutes,
    then builds by `rate` jobs a minute on top of that wander, under a rule firing at
    `BUILD_ALERT_QUEUED` queued: how many minutes before its queue reached that the warning
    came (None: not before)."""
    rng = random.Random(seed)
    threshold = BUILD_ALERT_QUEUED
    warner = Warner(Thresholds(queued=threshold))
    for minute in range(120):
        built = max(minute - 40, 0) * rate
        queued = float(rng.randint(0, most)) + built
        now = RunnerTypeMetrics(
            queued=queued, busy=NOISY_AT, registered=NOISY_AT, maximum=NOISY_AT,
            job_duration_mins=6.0,
        )  # fmt: skip
        at = EPOCH + timedelta(minutes=minute)
        warned = warner.starts("linux.2xlarge", now, at, NOISY_AT + queued)
        crossed_at = 40 + (threshold - most / 2) / rate  # the build's middle crosses here
        if warned and minute >= 40:
            return crossed_at - minute if minute < crossed_at else None
    return None


def _reading_each_second(
    queue: list[float], thresholds: Thresholds, seed: int
) -> list[tuple[float, bool]]:
    """(the second of each reading, whether a warning started there), a fleet at its maximum of
    `NOISY_AT` serving `queue[s]` jobs queued through second s."""
    rng = random.Random(seed)
    warner = Warner(thresholds)
    out, second = [], 0.0
    while second < len(queue):
        queued = queue[int(second)]
        now = RunnerTypeMetrics(
            queued=queued, busy=NOISY_AT, registered=NOISY_AT, maximum=NOISY_AT,
            job_duration_mins=6.0,
        )  # fmt: skip
        at = EPOCH + timedelta(seconds=second)
        out.append((second, warner.starts("linux.2xlarge", now, at, NOISY_AT + queued)))
        second += 1 + rng.uniform(0, LATE_S)
    return out


def ramp_after_noise(seed: int) -> float | None:
    """Seconds into the ramp the warning came (negative: during the noise; None: not by the
    crossing, 29 s in)."""
    rng = random.Random(seed)
    noise = [float(rng.randint(0, RAMP_MOST)) for _ in range(RAMP_NOISE_S)]
    threshold = BUILD_ALERT_QUEUED
    ramp = [float(k) for k in range(1, int(threshold) + 1)]
    read = _reading_each_second(noise + ramp, Thresholds(queued=threshold), seed)
    return next((second - RAMP_NOISE_S for second, warned in read if warned), None)


def wander_each_second(seed: int, most: int, *, drifting: bool = False) -> int:
    """Warnings in an hour read every second of a fleet at its maximum whose queue wanders
    between none and `most` jobs: a new draw each second, or (`drifting`) each second 0.7 of the
    last plus 0.3 of a new draw, a queue that drifts over several readings."""
    rng = random.Random(seed)
    queue, level = [], most / 2
    for _ in range(3600):
        draw = float(rng.randint(0, most))
        level = 0.7 * level + 0.3 * draw if drifting else draw
        queue.append(float(round(level)))
    read = _reading_each_second(queue, Thresholds(queued=BUILD_ALERT_QUEUED), seed)
    return sum(warned for _, warned in read)


def measure() -> dict[str, object]:
    demo = replay(DEMO_BURSTS, 60, reading_s=30)
    demo_minutely = replay(DEMO_BURSTS, 60)
    normal = [replay((), 1440, seed=seed, warm_up_mins=WARM_UP_MINS) for seed in range(5)]
    bursty_bursts = (
        Burst("linux.2xlarge", 60, 15, 6.0),
        Burst("linux.2xlarge", 400, 15, 6.0),
        Burst("linux.2xlarge", 900, 15, 6.0),
        Burst("linux.4xlarge", 700, 20, 1.5),  # a small one the fleet absorbs
    )
    bursty = replay(bursty_bursts, 1440, warm_up_mins=WARM_UP_MINS)
    return {
        "demo_lead_mins": demo.leads(),
        "demo_first_warning": demo.warnings[:1],
        "demo_firings": demo.firings,
        "demo_lead_mins_minutely": demo_minutely.leads(),
        "noisy_false_per_day": {
            most: [noisy_day(seed, most) for seed in range(5)] for most in NOISY_QUEUED
        },
        "normal_false_per_day": [run.false_warnings() for run in normal],
        "normal_warnings_per_day": [len(run.warnings) for run in normal],
        "noisy_builds": {
            (rate, most): sum(noisy_build(seed, rate, most) is not None for seed in range(40))
            for rate, most in ((2.0, 4), (3.0, 4), (3.0, 10))
        },
        "ramp_after_noise_s": [ramp_after_noise(seed) for seed in range(40)],
        "wander_each_second": {
            (most, drifting): [
                wander_each_second(seed, most, drifting=drifting) for seed in range(5)
            ]
            for most, drifting in ((3, False), (10, False), (10, True))
        },
        "bursty_leads": bursty.leads(),
        "bursty_false": bursty.false_warnings(),
        "bursty_firings": bursty.firings,
    }


def main() -> None:
    found = measure()
    leads = found["demo_lead_mins"]
    assert isinstance(leads, list)
    print("early warning on the simulated fleet (fleet minutes)")
    print(
        f"  demo burst: first warning {found['demo_first_warning']}, rule fired at "
        f"{found['demo_firings']}, lead {leads} (read every 30 s, as the demo reads it; "
        f"read every minute: lead {found['demo_lead_mins_minutely']})"
    )
    print(f"  normal load, 5 seeded days: false warnings per day {found['normal_false_per_day']}")
    noisy = found["noisy_false_per_day"]
    assert isinstance(noisy, dict)
    for most, days in noisy.items():
        print(
            f"  at its maximum, queue wandering 0-{most} jobs, 5 seeded days: false warnings "
            f"per day {days}"
        )
    builds = found["noisy_builds"]
    assert isinstance(builds, dict)
    for (rate, most), warned in builds.items():
        print(
            f"  a build of +{rate:.0f} jobs/min on a queue wandering over 0-{most} jobs at its "
            f"maximum: warned before {BUILD_ALERT_QUEUED:.0f} queued in {warned} of 40 seeds"
        )
    print(
        f"  bursty day: leads {found['bursty_leads']}, fired {found['bursty_firings']}, "
        f"false warnings {found['bursty_false']}"
    )
    ramp = found["ramp_after_noise_s"]
    assert isinstance(ramp, list)
    came = sorted(s for s in ramp if s is not None)
    half = (BUILD_ALERT_QUEUED - 1) / 2
    in_half = sum(0 <= s <= half for s in came)
    print(
        f"  read every second, 0-{RAMP_MOST} queued for {RAMP_NOISE_S} s then +1 job/s toward "
        f"{BUILD_ALERT_QUEUED:.0f} (40 seeds): warned {came[len(came) // 2]:.1f} s into the "
        f"29-s ramp (median), {came[-1]:.1f} s at the latest; in its first half {in_half} of 40, "
        f"during the noise {sum(s < 0 for s in came)}, not by the crossing "
        f"{sum(s is None for s in ramp)}"
        if came
        else "  read every second: never warned on the ramp"
    )
    wanders = found["wander_each_second"]
    assert isinstance(wanders, dict)
    for (most, drifting), hours in wanders.items():
        kind = "drifting" if drifting else "wandering"
        print(
            f"  read every second, at its maximum, queue {kind} 0-{most} jobs, 5 seeded hours: "
            f"false warnings per hour {hours}"
        )
    lead_ok = bool(leads) and min(leads) >= 5
    falses = found["normal_false_per_day"]
    assert isinstance(falses, list)
    false_ok = max(falses) <= 1
    print(f"  target lead >= 5 min on the demo burst: {'met' if lead_ok else 'MISSED'}")
    print(f"  target <= 1 false warning per day at normal load: {'met' if false_ok else 'MISSED'}")
    quiet = not any(any(days) for days in noisy.values())
    print(f"  target no warning on a noisy queue: {'met' if quiet else 'MISSED'}")
    ramp_ok = len(ramp) == in_half
    said = "met" if ramp_ok else "MISSED"
    print(f"  target read every second, warned in the ramp's first half: {said}")


if __name__ == "__main__":
    main()
