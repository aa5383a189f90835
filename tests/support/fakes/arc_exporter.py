"""One ARC scale-set listener's `/metrics`, in the exposition format ARC serves, with values a
test changes between scrapes. Families, label names and buckets are ARC's (`metrics.go`, see
`../shared/fixtures/arc/README.md`): gauges carry the runner set's `name`, job counters and
histograms carry the job's labels only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from sandbox.serve import RunningServer
    from tests.support.servers import Prometheus

BUCKETS = (
    0.01, 0.05, 0.1, 0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 20, 25, 30, 40, 50, 60, 70,
    80, 90, 100, 110, 120, 150, 180, 210, 240, 300, 360, 420, 480, 540, 600, 900, 1200, 1800,
    2400, 3000, 3600,
)  # fmt: skip
GAUGES = ("assigned_jobs", "running_jobs", "registered_runners", "busy_runners", "idle_runners",
          "min_runners", "max_runners", "desired_runners")  # fmt: skip
JOB = 'enterprise="",event_name="pull_request",job_name="build",organization="pytorch",repository="pytorch"'  # noqa: E501


@dataclass
class Histogram:
    observations: list[float] = field(default_factory=list)

    def lines(self, family: str, labels: str) -> list[str]:
        out = []
        for le in BUCKETS:
            count = sum(1 for o in self.observations if o <= le)
            out.append(f'{family}_bucket{{{labels},le="{le:g}"}} {count}')
        out.append(f'{family}_bucket{{{labels},le="+Inf"}} {len(self.observations)}')
        out.append(f"{family}_sum{{{labels}}} {sum(self.observations):g}")
        out.append(f"{family}_count{{{labels}}} {len(self.observations)}")
        return out


@dataclass
class ArcListener:
    """A scale set's listener: set the gauges, `start()` and `complete()` jobs, scrape."""

    name: str  # the EphemeralRunnerSet's name, e.g. "mt-l-x86iavx512-8-64-x7q2k"
    # A label `spec.listenerMetrics` adds to the job metrics ("job_workflow_name" or
    # "job_workflow_ref"); ARC's defaults have none.
    workflow_label: str = ""
    gauges: dict[str, float] = field(default_factory=dict)
    started: int = 0
    started_by: dict[str, int] = field(default_factory=dict)  # per workflow label value
    completed: int = 0
    startup: Histogram = field(default_factory=Histogram)
    startup_by: dict[str, Histogram] = field(default_factory=dict)  # per workflow label value
    execution: Histogram = field(default_factory=Histogram)
    execution_by: dict[str, Histogram] = field(default_factory=dict)  # per workflow label value
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, **gauges: float) -> None:
        with self.lock:
            self.gauges.update(gauges)

    def start(self, waited_s: float, count: int = 1, workflow: str = "") -> None:
        with self.lock:
            self.started += count
            self.started_by[workflow] = self.started_by.get(workflow, 0) + count
            self.startup.observations.extend([waited_s] * count)
            by = self.startup_by.setdefault(workflow, Histogram())
            by.observations.extend([waited_s] * count)

    def complete(self, took_s: float, count: int = 1, workflow: str = "") -> None:
        with self.lock:
            self.completed += count
            self.execution.observations.extend([took_s] * count)
            by = self.execution_by.setdefault(workflow, Histogram())
            by.observations.extend([took_s] * count)

    def exposition(self) -> str:
        labels = (
            f'enterprise="",name="{self.name}",namespace="arc-runners",'
            f'organization="pytorch",repository=""'
        )
        lines = []
        with self.lock:
            for gauge in GAUGES:
                if gauge in self.gauges:
                    lines += [
                        f"# TYPE gha_{gauge} gauge",
                        f"gha_{gauge}{{{labels}}} {self.gauges[gauge]:g}",
                    ]
            # Counters and histograms appear after the listener's first job event, as in ARC.
            if self.started:
                lines += ["# TYPE gha_started_jobs_total counter"]
                lines += self._started_lines()
                lines += ["# TYPE gha_job_startup_duration_seconds histogram"]
                lines += self._labelled_lines(
                    "gha_job_startup_duration_seconds", JOB, self.startup, self.startup_by
                )
            if self.completed:
                done = f'{JOB},job_result="succeeded"'
                lines += ["# TYPE gha_completed_jobs_total counter",
                          f"gha_completed_jobs_total{{{done}}} {self.completed}"]  # fmt: skip
                lines += ["# TYPE gha_job_execution_duration_seconds histogram"]
                lines += self._execution_lines(done)
        return "\n".join(lines) + "\n"

    def _started_lines(self) -> list[str]:
        if not self.workflow_label:
            return [f"gha_started_jobs_total{{{JOB}}} {self.started}"]
        # client_golang sorts label names: the added label goes in its place.
        lines = []
        for workflow, count in sorted(self.started_by.items()):
            pairs = [*JOB.split(","), f'{self.workflow_label}="{workflow}"']
            lines.append(f"gha_started_jobs_total{{{','.join(sorted(pairs))}}} {count}")
        return lines

    def _execution_lines(self, done: str) -> list[str]:
        family = "gha_job_execution_duration_seconds"
        return self._labelled_lines(family, done, self.execution, self.execution_by)

    def _labelled_lines(
        self, family: str, labels: str, whole: Histogram, by: dict[str, Histogram]
    ) -> list[str]:
        """A histogram's series, one per workflow label value where the listener carries one."""
        if not self.workflow_label:
            return whole.lines(family, labels)
        lines = []
        for workflow, histogram in sorted(by.items()):
            pairs = [*labels.split(","), f'{self.workflow_label}="{workflow}"']
            lines += histogram.lines(family, ",".join(sorted(pairs)))
        return lines

    @property
    def app(self) -> Starlette:
        async def metrics(request: Request) -> PlainTextResponse:
            return PlainTextResponse(
                self.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8"
            )

        return Starlette(routes=[Route("/metrics", metrics)])


QUEUEING, HEALTHY = "mt-l-x86iavx512-8-64", "mt-l-x86iamx-8-32"
# A scale set at its maximum of 20, every runner busy, 30 jobs assigned: 10 queued.
AT_MAXIMUM = {
    "assigned_jobs": 30,
    "running_jobs": 20,
    "registered_runners": 20,
    "busy_runners": 20,
    "idle_runners": 0,
    "min_runners": 0,
    "max_runners": 20,
    "desired_runners": 20,
}


class ArcFleet:
    """Two scale sets' listeners, each its own scrape target of a real `prometheus` (as in a
    cluster: the job metrics join the gauges on `instance`); the first one queueing. `names`:
    the two scale sets (as Helm releases name them: `linux-2xlarge` serves `linux.2xlarge`).
    The Prometheus was started ahead (`tests.support.warm_prometheus`): it scrapes the
    listeners within half a second of their being served, once the test asks for it."""

    def __init__(
        self,
        workflow_label: str = "",
        names: tuple[str, str] = (QUEUEING, HEALTHY),
        *,
        pods: tuple[str, ...] = (),
    ) -> None:
        """`pods`: the runner pods' sources scraped beside the listeners ("ksm", "cadvisor";
        `sandbox.runner_pods`), one more target."""
        from sandbox.runner_pods import RunnerPodsExporter
        from tests.support.warm_prometheus import scraper

        # The runner sets' names as ARC 0.14 makes them: "<scale set>-<5 chars>".
        self.queueing = ArcListener(f"{names[0]}-x7q2k", workflow_label)
        self.healthy = ArcListener(f"{names[1]}-d4zt9", workflow_label)
        self.queueing.set(
            assigned_jobs=163, running_jobs=120, registered_runners=120, busy_runners=120,
            idle_runners=0, min_runners=0, max_runners=120, desired_runners=120,
        )  # fmt: skip
        self.healthy.set(
            assigned_jobs=17, running_jobs=17, registered_runners=19, busy_runners=17,
            idle_runners=2, min_runners=2, max_runners=200, desired_runners=19,
        )  # fmt: skip
        self.pods = RunnerPodsExporter([self.queueing.name, self.healthy.name], scraped=pods)
        # Its nodes and containers have run a while before their first scrape, as in a cluster
        # (within a second here otherwise): their counters' first samples are not near zero,
        # where Prometheus stops a rate's extrapolation short of its window.
        self.pods.started -= 60
        self._apps = [self.queueing.app, self.healthy.app, *([self.pods.app] if pods else [])]
        self._scraper = scraper(len(self._apps))
        self.servers: list[RunningServer] = []

    @property
    def prometheus(self) -> Prometheus:
        """The fleet's Prometheus; the listeners are served from the first time it is asked
        for, and scraped twice when it is given. A test sets what they report first: no
        scrape reads the defaults before (an advice the bot saw once is held over its
        window)."""
        if not self.servers:
            self._serve()
        return self._scraper.prometheus

    def _serve(self) -> None:
        from sandbox.serve import serve_in_thread
        from tests.support.warm_prometheus import wait_scraped

        try:
            for app, sock in zip(self._apps, self._scraper.sockets, strict=True):
                self.servers.append(serve_in_thread(app, sock=sock))
            # A server's first request is its slowest (Starlette builds its middleware on it):
            # made here, before Prometheus's first scrape (within half a second), so each sample a
            # rate is taken from is read as promptly (these exporters serve no timestamps).
            for server in self.servers:
                httpx.get(f"{server.url}/metrics", timeout=10).raise_for_status()
            wait_scraped(self._scraper)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        self._scraper.stop()  # the sockets no server took
