"""One ARC scale set playing a script, read through a real `prometheus`, its AutoscalingRunnerSet
served by the Kubernetes stand-in: the fleet of `tests/support/trajectory.py`.

Each `Step` sets the listener's gauges (queued is assigned − running; runners busy, registered,
desired; minRunners and maxRunners) and holds them until the test applies the next one. Between
steps the job counters and histograms advance in real time, as ARC's would: runners finish
`busy / job_minutes` jobs a minute (`gha_completed_jobs_total`, each observed in
`gha_job_execution_duration_seconds`), each freed runner starts a waiting job at once, and runners a
step adds start one each (`gha_started_jobs_total`, each start's wait observed in
`gha_job_startup_duration_seconds`: Little's law, the queue over the start rate). What arrived is
then what started plus what the queue grew by, which is how the bot reads arrivals from ARC's
metrics. Completions and the starts that refill them move together, at the same instants, so
Prometheus's rate() of the two differs by exactly the runners added, not by sampling noise.

`minRunners` and `maxRunners` live in the AutoscalingRunnerSet's spec: a step that names them
writes the spec as someone with kubectl would; one that does not reads it back. The bot's own
merge patch shows up in the gauges within a tick, bounds and desired runners, as ARC's listener
reports them once it has the new spec (in a cluster, seconds after its restart): a reading taken
after a scale-up sees it asked for. Its `status.currentRunners` follows the registered runners,
as ARC's controller writes it.

Prometheus's window is far longer than the first seconds of a test: the first step's state is
backfilled (`Prometheus.backfill`) for `history_s` before the server starts, so a rate over the
bot's window reads the script's rates from the first reading, not a fraction of them.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace

from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.arc_exporter import ArcListener
from tests.support.fakes.kube_api import FakeKubeApi
from tests.support.servers import Prometheus

NAMESPACE = "arc-runners"
SUFFIX = "x7q2k"  # ARC 0.14's runner-set suffix: "<scale set>-<5 chars>"
TICK_S = 0.1
QUICK_START_S = 2.0  # a start with nothing queued still waits a moment for its runner
CONTROLLER = "gha-runner-scale-set-controller"
BY_HAND = "kubectl-edit"


@dataclass(frozen=True)
class Step:
    """What the listener reports until the next step. `desired` defaults to what ARC asks for
    (min(minRunners + assigned jobs, maxRunners)); `minimum` and `maximum` to the spec's."""

    queued: int
    busy: int
    registered: int
    desired: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    note: str = ""


class ScriptedScaleSet:
    """One scale set's listener, the Prometheus scraping it, and its AutoscalingRunnerSet."""

    def __init__(
        self,
        scale_set: str,
        kube: FakeKubeApi,
        first: Step,
        *,
        job_minutes: float,
        history_s: float,
        scrape_interval: str = "500ms",
    ) -> None:
        self.scale_set = scale_set
        self.kube = kube
        self.job_minutes = job_minutes
        self.listener = ArcListener(f"{scale_set}-{SUFFIX}")
        kube.add_from_fixture(
            scale_set, minRunners=first.minimum or 0, maxRunners=first.maximum or first.registered
        )
        self._lock = threading.Lock()
        self._setting = threading.Lock()  # one writer of the gauges: a step, or the spec's change
        self._owed = 0.0  # completions due, not yet whole
        self._at = time.time()  # when completions were last counted
        self.step = first
        self._scripted = first  # as the script gave it: the bounds it names, if any
        self.applied_at = 0.0
        self._stopping = threading.Event()
        self._ticker: threading.Thread | None = None
        self.server: RunningServer = serve_in_thread(self.listener.app)
        self.prometheus = Prometheus(
            targets=[self.server.url.split("//", 1)[1]], scrape_interval=scrape_interval
        )
        try:
            self._set(first)
            self.prometheus.backfill(self._history(first, history_s))
            self._ticker = threading.Thread(target=self._tick, name="arc-script", daemon=True)
            self._ticker.start()
            self.prometheus.start()
        except BaseException:
            self.stop()
            raise

    @property
    def spec(self) -> dict[str, int]:
        """The AutoscalingRunnerSet's minRunners and maxRunners now."""
        spec = self.kube.sets[(NAMESPACE, self.scale_set)]["spec"]
        return {"minRunners": spec["minRunners"], "maxRunners": spec["maxRunners"]}

    def apply(self, step: Step) -> Step:
        """Report `step` from now on; returns it with the spec's bounds and ARC's desired count."""
        with self._setting:
            self._advance(time.time())
            shown = self._set(step)
            self._scripted = step
            self.applied_at = time.time()
        return shown

    def stop(self) -> None:
        self._stopping.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self.prometheus.stop()
        self.server.stop()

    def _set(self, step: Step) -> Step:
        spec = self.spec
        changed = {
            name: value
            for name, value in (("minRunners", step.minimum), ("maxRunners", step.maximum))
            if value is not None and value != spec[name]
        }
        if changed:
            self.kube.write(self.scale_set, manager=BY_HAND, spec=changed, namespace=NAMESPACE)
            spec.update(changed)
        current = self.kube.sets[(NAMESPACE, self.scale_set)].get("status", {})
        if current.get("currentRunners") != step.registered:
            status = {"currentRunners": step.registered, "runningEphemeralRunners": step.busy}
            self.kube.write(self.scale_set, manager=CONTROLLER, status=status, namespace=NAMESPACE)
        minimum, maximum = spec["minRunners"], spec["maxRunners"]
        assigned = step.queued + step.busy
        desired = step.desired if step.desired is not None else min(minimum + assigned, maximum)
        shown = replace(step, desired=desired, minimum=minimum, maximum=maximum)
        with self._lock:
            added = max(step.busy - self.step.busy, 0)
            self.step = shown
        if added:
            self.listener.start(self._wait_s(shown), added)
        self.listener.set(
            assigned_jobs=assigned,
            running_jobs=step.busy,
            registered_runners=step.registered,
            busy_runners=step.busy,
            idle_runners=max(step.registered - step.busy, 0),
            min_runners=minimum,
            max_runners=maximum,
            desired_runners=desired,
        )
        return shown

    def _wait_s(self, step: Step) -> float:
        """How long the jobs starting now waited: the queue ahead of them over the start rate."""
        if step.queued <= 0 or step.busy <= 0:
            return QUICK_START_S
        return max(step.queued * self.job_minutes * 60 / step.busy, QUICK_START_S)

    def _advance(self, now: float) -> None:
        """Finish the jobs due since the last call; each freed runner starts a waiting job."""
        with self._lock:
            elapsed, self._at = max(now - self._at, 0.0), now
            step = self.step
            self._owed += step.busy / self.job_minutes * elapsed / 60
            done = math.floor(self._owed)
            self._owed -= done
        if done:
            self.listener.complete(self.job_minutes * 60, done)
            self.listener.start(self._wait_s(step), done)

    def _tick(self) -> None:
        while not self._stopping.wait(TICK_S):
            self._advance(time.time())
            self._follow_spec()

    def _follow_spec(self) -> None:
        """Report a spec changed since the step (the bot's patch): its bounds, and the desired
        runners they allow."""
        with self._setting:
            step, spec = self.step, self.spec
            if (step.minimum, step.maximum) != (spec["minRunners"], spec["maxRunners"]):
                self._set(replace(self._scripted, minimum=None, maximum=None))

    def _history(self, first: Step, history_s: float) -> str:
        """OpenMetrics of `first` held for `history_s` up to now, a sample a second, labelled
        as the live scrape will label them: the counters then go on from where it ends."""
        instance = self.server.url.split("//", 1)[1]
        end = math.floor(time.time()) - 1
        families: dict[str, tuple[str, list[str]]] = {}
        self._at = end - history_s
        for at in range(end - math.ceil(history_s), end + 1):
            self._advance(at)
            for family, kind, samples in _families(self.listener.exposition()):
                kept = families.setdefault(family, (kind, []))[1]
                kept += [_labelled(s, instance) + f" {at}" for s in samples]
        lines = []
        for family, (kind, samples) in families.items():
            lines += [f"# TYPE {family} {kind}", *samples]
        return "\n".join([*lines, "# EOF"]) + "\n"


def _families(exposition: str) -> list[tuple[str, str, list[str]]]:
    """(family, type, samples) of a scrape, named as OpenMetrics names them (a counter's family
    without its `_total`)."""
    found: list[tuple[str, str, list[str]]] = []
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            found.append((name.removesuffix("_total") if kind == "counter" else name, kind, []))
        elif line and found:
            found[-1][2].append(line)
    return found


def _labelled(sample: str, instance: str) -> str:
    """The sample with the labels Prometheus adds to a scraped one."""
    head, _, value = sample.rpartition(" ")
    name, _, labels = head.partition("{")
    return f'{name}{{instance="{instance}",job="fleet",{labels.rstrip("}")}}} {value}'
