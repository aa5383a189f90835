"""A simulated CI fleet: runner types, their jobs and their autoscaler, on a compressible clock.

Each runner type has a job arrival rate, a job duration, a boot time and min/max capacity. Jobs
queue until a runner is idle; an ARC-like autoscaler asks for `busy + queued` runners within
[min, max], and a runner it asks for is usable after its boot time, unless the type's node group
is full (`node_capacity`): then its pod stays Pending, unschedulable, and never registers. A
`Burst` raises one type's arrival rate for a while, so that type hits its maximum and queues:
that is what the demo's alert catches. `set_bounds` is ARC's listener seeing a new
`minRunners`/`maxRunners` (the bot's `arc` scaler patches them through `fleet_api`'s Kubernetes
API): runners it now asks for boot like any other.

Time is simulated: `speed` simulated seconds pass per real second, so a 40-minute incident plays
in under 7 minutes at `--speed 6`, the demo's pace. The model, its specs and bursts, and its own
Grafana rule (`sandbox.fleet_alerts`) run on that fleet time; `reading` reports in it. What the
fleet serves to the outside (`in_real_time`: Prometheus, the HUD, Grafana's payloads) is in real
time instead: at ×6 a job of 6 fleet minutes takes one real minute, and is said to. The bot and
its people live on the wall clock (an incident's duration, when a status is due, how fast a
queue grew between two readings), so one message never says a fleet minute beside a real one:
"lasted 1 min, peak wait 9.6 min" was both. Running the bot on the fleet's clock instead would
have needed Slack's timestamps, Redis's stream IDs and expiries, the silences and the GitHub
stand-in on that clock too; production has one clock, and needs nothing for this. The demo's bot
is configured for a fleet `speed` times faster (`sandbox.stack`: its drain target, boot time,
early-warning horizon and thresholds divided by the speed), as an operator would configure it
for a fleet whose jobs take a minute. The model is advanced lazily to "now" by whoever reads it,
in fixed steps, so its results do not depend on how often it is read.

`python -m sandbox.fleet` serves it on its own (see `fleet_api`); `make demo` runs it beside
the bot and the Slack emulator.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace

STEP_S = 5.0  # simulated seconds per step
KEPT_S = 3600.0  # an hour of events, for rates over a window
# The jobs that started, longer: an incident's cost is read over its whole window, from the alert.
STARTS_KEPT_S = 4 * 3600.0
REPOSITORY = "pytorch/pytorch"
# The pull requests whose jobs run: a few dozen open at once, numbered from here.
PULL_REQUESTS, OPEN_PULL_REQUESTS = 160_000, 40
UNBOUNDED = 2**31 - 1  # ARC's maxRunners when the spec has none (math.MaxInt32)


@dataclass(frozen=True)
class RunnerTypeSpec:
    name: str  # the runner type, as jobs' runs-on and the alerts name it
    arrival_per_min: float
    job_minutes: float
    boot_minutes: float
    minimum: int
    maximum: int
    # ARC's scale set serving it, a Kubernetes name ("": the type's own name).
    scale_set: str = ""
    # The most runner pods its node group holds (None: as many as asked for): past it, a new
    # pod stays Pending, unschedulable, and never registers.
    node_capacity: int | None = None


@dataclass(frozen=True)
class Workflow:
    """Where a fleet's jobs come from: a workflow, what triggers it, its share of the usual load."""

    name: str
    event: str  # GitHub's event: pull_request, push, schedule
    branch: str
    share: float


# Every runner type's usual jobs, as in a busy repository's CI.
WORKFLOWS = (
    Workflow("pull", "pull_request", "gh/someone/123/head", 0.6),
    Workflow("trunk", "push", "main", 0.3),
    Workflow("inductor", "push", "ciflow/inductor/123", 0.1),
)
PERIODIC = Workflow("periodic", "schedule", "main", 0.0)
INDUCTOR_BENCHMARKS = Workflow("inductor-perf-nightly", "schedule", "main", 0.0)


@dataclass(frozen=True)
class Burst:
    """`runner_type` receives `arrival_per_min` jobs a minute from `starts_min` for `lasts_min`;
    the jobs above the usual rate come from `workflow` (one workflow's surge)."""

    runner_type: str
    starts_min: float
    lasts_min: float
    arrival_per_min: float
    workflow: Workflow = PERIODIC

    def active(self, minute: float) -> bool:
        return self.starts_min <= minute < self.starts_min + self.lasts_min


DEMO_TYPES = (
    # Minimums hold a warm pool above the usual load, as a fleet that does not queue daily would.
    # Scale sets are named as Helm releases must be (no dots); one was named by hand.
    RunnerTypeSpec("linux.2xlarge", 2.0, 6.0, 2.0, 16, 20, "linux-2xlarge"),
    RunnerTypeSpec("linux.4xlarge", 1.0, 10.0, 2.0, 14, 18, "linux-4xlarge"),
    # The GPU node group holds 10 runners, fewer than the scale set may ask for: past them new
    # pods stay Pending, as a node group at its limit (or out of GPUs) leaves them. Ten runners
    # at most take jobs, as the timing below assumes.
    RunnerTypeSpec(
        "linux.g5.4xlarge.nvidia.gpu", 0.3, 15.0, 5.0, 8, 14, "linux-g5-4xlarge-nvidia-gpu", 10
    ),
    RunnerTypeSpec("windows.4xlarge", 0.5, 12.0, 6.0, 10, 12, "win-4xlarge"),
)
# The periodic workflow's matrix lands on top of the usual load: for 15 minutes 2xlarge needs ~36
# runners and has 20, so ~40 jobs queue, most of them periodic; alone the queue drains in about
# half an hour, with ten more runners in about ten minutes.
DEMO_BURSTS = (Burst("linux.2xlarge", 1.0, 15.0, 6.0),)
# The GPU team's own surge, once the 2xlarge story has played out: an inductor benchmark run
# needs ~30 GPU runners for ten minutes and the type has 10 (its node group's), so the team's
# rule fires and its incident opens in the team's channel. The scale set asks for its 14 within
# a few minutes; the 4 pods no node fits stay Pending until the queue falls after the burst, and
# they are unschedulable past a boot (5 min) by the time the rule fires, so diagnostics say no
# node fits and more runners would not help.
DEMO_TEAM_BURSTS = (Burst("linux.g5.4xlarge.nvidia.gpu", 20.0, 10.0, 2.0, INDUCTOR_BENCHMARKS),)
# `make demo`'s pace: a fleet minute every 10 s, for a person following it in a browser. Left
# alone, the 2xlarge rule goes pending at fleet minute ~5 and fires at ~8 (the early warning
# comes before it), the GPU team's fires at ~31 and resolves at ~60: 20 s and more between
# steps, a status every 30 s, the whole story in 10 minutes. At ×10 the rule was pending for
# 12 s and the 2xlarge incident opened 50 s into the demo.
DEMO_SPEED = 6.0


@dataclass(frozen=True)
class Job:
    id: int
    at: float  # enqueue time, simulated seconds
    workflow: Workflow


def workflow_ref(job: Job) -> str:
    """ARC's `job_workflow_ref` of the job: its workflow file at the ref its run was triggered on:
    a pull request's merge ref (a run's jobs, ids in tens as `hud_row`'s runs, share one); a
    push's branch, or its tag for a `ciflow/` push (PyTorch's ciflow labels push tags); a
    schedule's default branch."""
    workflow = job.workflow
    path = f"{REPOSITORY}/.github/workflows/{workflow.name}.yml"
    if workflow.event == "pull_request":
        return f"{path}@refs/pull/{PULL_REQUESTS + job.id // 10 % OPEN_PULL_REQUESTS}/merge"
    refs = "tags" if workflow.branch.startswith("ciflow/") else "heads"
    return f"{path}@refs/{refs}/{workflow.branch}"


@dataclass(frozen=True)
class Started:
    """A job a runner took: when (fleet seconds) and how long it had waited."""

    at: float
    waited: float
    job: Job


@dataclass(frozen=True)
class Stall:
    """`runner_type`'s ARC listener stops acting on its jobs at `starts_min`, for good."""

    runner_type: str
    starts_min: float


DEMO_STALL = Stall("linux.2xlarge", 3.0)


@dataclass
class _Runners:
    """One runner type's live state, in simulated seconds."""

    spec: RunnerTypeSpec
    minimum: int  # the scale set's minRunners and maxRunners, as its spec has them now
    maximum: int
    queue: deque[Job] = field(default_factory=deque)  # oldest first
    running: list[tuple[float, float]] = field(default_factory=list)  # (end, duration)
    booted: int = 0
    booting: list[float] = field(default_factory=list)  # ready times
    unplaced: list[float] = field(default_factory=list)  # creation times of pods no node fits
    # Events for rates over a window: arrival and start times, (end, duration) of finished jobs.
    arrived: deque[float] = field(default_factory=deque)
    started: deque[float] = field(default_factory=deque)
    starts: deque[Started] = field(default_factory=deque)  # oldest first
    completed: deque[tuple[float, float]] = field(default_factory=deque)
    owed: float = 0.0  # fractional arrivals carried to the next step
    owed_burst: float = 0.0  # the same, of a burst's workflow
    # ARC's listener has stopped acting on its jobs: it assigns none to runners and asks for no
    # runners, and the assigned count it reports stays where it was (None: it works).
    stalled_at: int | None = None
    # The spec has maxRunners below minRunners: ARC's listener refuses such a config and does
    # not run (it acts on nothing and asks for nothing) until the spec is valid again.
    refused: bool = False

    @property
    def acting(self) -> bool:
        """ARC's listener runs and acts on its jobs."""
        return self.stalled_at is None and not self.refused

    @property
    def busy(self) -> int:
        return len(self.running)

    @property
    def desired(self) -> int:
        return min(self.maximum, max(self.minimum, self.busy + len(self.queue)))


@dataclass(frozen=True)
class TypeReading:
    """One runner type's numbers, in the units the bot's readings use (jobs, runners, minutes:
    fleet minutes as `Fleet.reading` gives them, real ones through `in_real_time`)."""

    queued: int
    assigned: int  # ARC's gha_assigned_jobs: queued and running
    longest_wait_mins: float
    registered: int
    booting: int  # asked for, not yet registered (those no node fits among them)
    busy: int
    idle: int
    minimum: int
    maximum: int
    desired: int
    arrival_per_min: float
    started_per_min: float
    completed_per_min: float
    job_duration_mins: float
    arrival_baseline_per_min: float
    duration_baseline_mins: float
    # The age of each runner pod Pending (booting, or no node fits), and of those no node fits.
    pending_ages_mins: tuple[float, ...] = ()
    unschedulable_ages_mins: tuple[float, ...] = ()


class Fleet:
    """The simulated fleet; thread-safe (the HTTP server and the alert loop both read it)."""

    def __init__(
        self,
        types: Iterable[RunnerTypeSpec] = DEMO_TYPES,
        bursts: Iterable[Burst] = DEMO_BURSTS,
        *,
        stalls: Iterable[Stall] = (),
        speed: float = 1.0,
        seed: int = 7,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.bursts = tuple(bursts)
        self.stalls = tuple(stalls)
        self._clock = clock
        self._started_at = clock()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._now = 0.0
        self._types = {s.name: _Runners(s, s.minimum, s.maximum) for s in types}
        self._jobs = 0  # job ids, fleet-wide
        for runners in self._types.values():  # the fleet starts warm, at its minimum
            runners.booted = runners.spec.minimum

    # -- time ----------------------------------------------------------------------------

    @property
    def minute(self) -> float:
        """Simulated minutes since the fleet started (advanced to now)."""
        with self._lock:
            self._advance()
            return self._now / 60

    def _advance(self) -> None:
        target = (self._clock() - self._started_at) * self.speed
        while self._now + STEP_S <= target:
            self._now += STEP_S
            for runners in self._types.values():
                self._step(runners)

    def _step(self, r: _Runners) -> None:
        now, minute = self._now, self._now / 60
        stalling = any(x.runner_type == r.spec.name and minute >= x.starts_min for x in self.stalls)
        if stalling and r.stalled_at is None:
            r.stalled_at = len(r.queue) + r.busy
        bursting = (b for b in self.bursts if b.runner_type == r.spec.name and b.active(minute))
        burst = next(bursting, None)
        jitter = self._rng.uniform(0.6, 1.4)
        r.owed += r.spec.arrival_per_min * STEP_S / 60 * jitter
        usual, r.owed = int(r.owed), r.owed - int(r.owed)
        extra = 0
        if burst is not None:  # the jobs above the usual rate: the burst's workflow
            r.owed_burst += max(burst.arrival_per_min - r.spec.arrival_per_min, 0) * STEP_S / 60
            extra, r.owed_burst = int(r.owed_burst), r.owed_burst - int(r.owed_burst)
        weights = [w.share for w in WORKFLOWS]
        arriving = [*self._rng.choices(WORKFLOWS, weights, k=usual)]
        arriving += [burst.workflow] * extra if burst is not None else []
        for workflow in arriving:
            self._jobs += 1
            r.queue.append(Job(self._jobs, now, workflow))
            r.arrived.append(now)
        r.completed.extend((now, d) for end, d in r.running if end <= now)
        r.running = [(end, d) for end, d in r.running if end > now]
        ready = [t for t in r.booting if t <= now]
        r.booting = [t for t in r.booting if t > now]
        r.booted += len(ready)
        while r.queue and r.booted > r.busy and r.acting:
            job = r.queue.popleft()
            r.started.append(now)
            r.starts.append(Started(now, now - job.at, job))
            duration = r.spec.job_minutes * 60 * self._rng.uniform(0.75, 1.25)
            r.running.append((now + duration, duration))
        if r.acting:
            self._autoscale(r)
        horizon = now - KEPT_S
        for events in (r.arrived, r.started):
            while events and events[0] < horizon:
                events.popleft()
        while r.completed and r.completed[0][0] < horizon:
            r.completed.popleft()
        while r.starts and r.starts[0].at < now - STARTS_KEPT_S:
            r.starts.popleft()

    def _autoscale(self, r: _Runners) -> None:
        """ARC's listener: as many runners as busy + queued jobs, within [min, max]."""
        have = r.booted + len(r.booting) + len(r.unplaced)
        want = r.desired
        if have < want:
            # A pod that no node fits waits for one; none frees while it waits, since the
            # pods that cannot start are the first to go when fewer are wanted.
            capacity = r.spec.node_capacity
            room = want - have if capacity is None else max(capacity - r.booted - len(r.booting), 0)
            placed = min(want - have, room)
            r.booting.extend([self._now + r.spec.boot_minutes * 60] * placed)
            r.unplaced.extend([self._now] * (want - have - placed))
        elif have > want:
            # Only idle runners go; pods that cannot start are deleted first, then booting ones.
            surplus = have - want
            for pods in (r.unplaced, r.booting):
                cancel = min(surplus, len(pods))
                del pods[len(pods) - cancel :]
                surplus -= cancel
            r.booted -= min(surplus, r.booted - r.busy)

    # -- what the outside world sees ---------------------------------------------------------

    @property
    def scale_sets(self) -> dict[str, str]:
        """Runner type -> the name of the ARC scale set serving it."""
        return {name: r.spec.scale_set or name for name, r in self._types.items()}

    def reading(self, window_min: float = 10.0) -> dict[str, TypeReading]:
        with self._lock:
            self._advance()
            return {name: self._read(r, window_min) for name, r in self._types.items()}

    def _read(self, r: _Runners, window_min: float) -> TypeReading:
        now = self._now
        since = now - window_min * 60
        span = min(window_min, max(now / 60, STEP_S / 60))  # a young fleet has a shorter window
        done = [d for end, d in r.completed if end > since]
        return TypeReading(
            queued=len(r.queue),
            assigned=r.stalled_at if r.stalled_at is not None else len(r.queue) + r.busy,
            longest_wait_mins=round((now - r.queue[0].at) / 60, 2) if r.queue else 0.0,
            registered=r.booted,
            booting=len(r.booting) + len(r.unplaced),
            busy=r.busy,
            idle=r.booted - r.busy,
            minimum=r.minimum,
            maximum=r.maximum,
            desired=r.desired,
            arrival_per_min=round(sum(1 for t in r.arrived if t > since) / span, 3),
            started_per_min=round(sum(1 for t in r.started if t > since) / span, 3),
            completed_per_min=round(len(done) / span, 3),
            job_duration_mins=round(sum(done) / len(done) / 60, 2) if done else r.spec.job_minutes,
            arrival_baseline_per_min=r.spec.arrival_per_min,
            duration_baseline_mins=r.spec.job_minutes,
            pending_ages_mins=tuple(
                round((now - created) / 60, 2)
                for created in (*(t - r.spec.boot_minutes * 60 for t in r.booting), *r.unplaced)
            ),
            unschedulable_ages_mins=tuple(round((now - t) / 60, 2) for t in r.unplaced),
        )

    def startup_waits(self, window_min: float) -> dict[str, list[float]]:
        """Per runner type, how long each job that started within the window had waited (fleet
        seconds): what ARC's startup histogram observes."""
        with self._lock:
            self._advance()
            since = self._now - window_min * 60
            found = self._types.items()
            return {name: [s.waited for s in r.starts if s.at > since] for name, r in found}

    def started_within(self, window_s: float, ended_s_ago: float = 0.0) -> dict[str, list[Started]]:
        """Per runner type, the jobs that started within the `window_s` fleet seconds that ended
        `ended_s_ago` fleet seconds ago: what ARC's startup histogram grew by over that range."""
        with self._lock:
            self._advance()
            until = self._now - max(ended_s_ago, 0.0)
            since = until - window_s
            return {
                name: [s for s in r.starts if since < s.at <= until]
                for name, r in self._types.items()
            }

    def set_bounds(self, runner_type: str, minimum: int, maximum: int | None) -> bool:
        """ARC's listener seeing its scale set's new minRunners and maxRunners (None: unbounded):
        it asks for runners (or lets idle ones go) at once. False when nothing changed."""
        with self._lock:
            self._advance()
            r = self._types[runner_type]
            bounds = (minimum, UNBOUNDED if maximum is None else maximum)
            if (r.minimum, r.maximum) == bounds:
                return False
            r.minimum, r.maximum = bounds
            r.refused = r.maximum < r.minimum
            if r.acting:  # a stalled or refused listener sees nothing
                self._autoscale(r)
            return True

    def stall(self, runner_type: str, stalled: bool = True) -> None:
        """Stop (or restart) a runner type's listener: jobs wait while runners sit idle."""
        with self._lock:
            self._advance()
            r = self._types[runner_type]
            r.stalled_at = (len(r.queue) + r.busy) if stalled else None

    def queued_jobs(self) -> list[tuple[str, Job, float]]:
        """Every queued job: its runner type, the job, and how long it has waited (seconds)."""
        with self._lock:
            self._advance()
            return [
                (name, job, self._now - job.at)
                for name, r in self._types.items()
                for job in r.queue
            ]

    def worst(self, window_min: float = 10.0, leave_out: Collection[str] = ()) -> tuple[int, float]:
        """(largest queue, longest wait in fleet minutes) over every runner type but `leave_out`:
        what the fleet's alert rule holds to its thresholds."""
        readings = [r for name, r in self.reading(window_min).items() if name not in leave_out]
        return (
            max((t.queued for t in readings), default=0),
            max((t.longest_wait_mins for t in readings), default=0.0),
        )


def in_real_time(reading: TypeReading, speed: float) -> TypeReading:
    """`reading` (in fleet time) as the outside world reads it, by the wall clock: waits and job
    durations `speed` times shorter, rates `speed` times higher; counts as they are. The rates'
    window stays the fleet's (its smoothing, which no message shows)."""
    return replace(
        reading,
        longest_wait_mins=round(reading.longest_wait_mins / speed, 2),
        arrival_per_min=round(reading.arrival_per_min * speed, 3),
        started_per_min=round(reading.started_per_min * speed, 3),
        completed_per_min=round(reading.completed_per_min * speed, 3),
        job_duration_mins=round(reading.job_duration_mins / speed, 2),
        arrival_baseline_per_min=round(reading.arrival_baseline_per_min * speed, 3),
        duration_baseline_mins=round(reading.duration_baseline_mins / speed, 2),
        pending_ages_mins=tuple(round(age / speed, 2) for age in reading.pending_ages_mins),
        unschedulable_ages_mins=tuple(
            round(age / speed, 2) for age in reading.unschedulable_ages_mins
        ),
    )


def minutes(text: str) -> float:
    """A Prometheus duration ("10m", "1h", "90s") in minutes."""
    units = {"s": 1 / 60, "m": 1.0, "h": 60.0, "d": 1440.0}
    value, unit = text[:-1], text[-1:]
    if unit not in units or not value.isdigit():
        raise ValueError(f"not a duration: {text!r}")
    return int(value) * units[unit]


def main(argv: list[str] | None = None) -> int:
    """`python -m sandbox.fleet`: serve the simulated fleet on its own."""
    import argparse
    import logging

    import uvicorn

    from sandbox.fleet_api import FleetApi, FleetApiConfig

    parser = argparse.ArgumentParser(prog="python -m sandbox.fleet", description=__doc__)
    parser.add_argument("--speed", type=float, default=10.0, help="simulated seconds per second")
    parser.add_argument("--port", type=int, default=9090)
    parser.add_argument("--webhook-url", help="where to POST Grafana alerts (the bot's URL)")
    parser.add_argument("--webhook-token", help="bearer token for the webhook")
    parser.add_argument(
        "--kube-token", default="sandbox-kube-token", help="the Kubernetes API's bearer token"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    config = FleetApiConfig(args.webhook_url, args.webhook_token, kube_token=args.kube_token)
    api = FleetApi(Fleet(speed=args.speed), config)
    api.url = f"http://127.0.0.1:{args.port}"
    uvicorn.run(api.app, host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
