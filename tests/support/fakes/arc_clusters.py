"""Two clusters' ARC fleets of the same names (scale sets, runner sets, runner pods and nodes) in
one real `prometheus`, each cluster's series labelled `cluster` as a shared Thanos or Mimir holds
them: prod queueing on its scale set, staging's same-named one queueing more, on fewer runners."""

from __future__ import annotations

import time

import httpx

from sandbox.runner_pods import RunnerPodsExporter
from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcListener
from tests.support.servers import Prometheus, wait_until

# Each cluster's numbers, chosen so that a series read from both (a `max by` of the two, or a
# sum) gives neither cluster's.
PROD = {
    QUEUEING: dict(assigned_jobs=163, running_jobs=120, registered_runners=120, busy_runners=120,
                   idle_runners=0, min_runners=0, max_runners=120, desired_runners=120),
    HEALTHY: dict(assigned_jobs=17, running_jobs=17, registered_runners=19, busy_runners=17,
                  idle_runners=2, min_runners=2, max_runners=200, desired_runners=19),
}  # fmt: skip
STAGING = {
    QUEUEING: dict(assigned_jobs=400, running_jobs=100, registered_runners=100, busy_runners=100,
                   idle_runners=0, min_runners=0, max_runners=100, desired_runners=100),
    HEALTHY: dict(assigned_jobs=5, running_jobs=5, registered_runners=60, busy_runners=5,
                  idle_runners=55, min_runners=50, max_runners=60, desired_runners=60),
}  # fmt: skip
# The runner sets as ARC 0.14 names them, alike in both clusters (as a Helm release installed in
# each would, though the suffixes are random: alike, nothing tells their series apart but the
# cluster).
RUNNER_SETS = {QUEUEING: f"{QUEUEING}-x7q2k", HEALTHY: f"{HEALTHY}-d4zt9"}
WAITED_S = {"prod": 600, "staging": 30}  # each cluster's jobs' wait for a runner
TOOK_S = {"prod": 1500, "staging": 120}


class Cluster:
    """One cluster's two listeners and its runner pods (kube-state-metrics, cAdvisor and
    node-exporter), each a target; the runner sets named alike in every cluster."""

    def __init__(self, name: str, gauges: dict[str, dict[str, float]]) -> None:
        self.name = name
        self.listeners = {t: ArcListener(name) for t, name in RUNNER_SETS.items()}
        for runner_type, values in gauges.items():
            self.listeners[runner_type].set(**values)
        self.pods = RunnerPodsExporter(
            [listener.name for listener in self.listeners.values()],
            scraped=("ksm", "cadvisor", "node"),
        )
        apps = [*(listener.app for listener in self.listeners.values()), self.pods.app]
        self.servers: list[RunningServer] = [serve_in_thread(app) for app in apps]

    @property
    def targets(self) -> dict[str, dict[str, str]]:
        return {s.url.split("//", 1)[1]: {"cluster": self.name} for s in self.servers}

    def work(self) -> None:
        """Jobs start and finish, so ARC's counters have rates between scrapes."""
        queueing = self.listeners[QUEUEING]
        queueing.start(waited_s=WAITED_S[self.name], count=2)
        queueing.complete(took_s=TOOK_S[self.name], count=2)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


class TwoClusters:
    def __init__(self) -> None:
        self.prod = Cluster("prod", PROD)
        self.staging = Cluster("staging", STAGING)
        queueing = self.prod.listeners[QUEUEING].name
        ten_minutes_ago = time.time() - 600
        self.prod.pods.set(
            queueing, running=3, unschedulable=2, node_condition="DiskPressure",
            pending_since=ten_minutes_ago,
        )  # fmt: skip
        self.staging.pods.set(
            queueing, running=9, unschedulable=6, image_pull=2, pending_since=ten_minutes_ago
        )
        self.prometheus = Prometheus(labelled=self.prod.targets | self.staging.targets)
        try:
            self.prometheus.start()
            # Each cluster's series in before any reading: one read while only a part of the
            # targets was scraped would be one cluster's by chance, not by its selector.
            wait_until(self._all_scraped, what="every target of both clusters scraped")
        except BaseException:
            self.stop()
            raise

    def _all_scraped(self) -> bool:
        answer = httpx.get(f"{self.prometheus.url}/api/v1/targets", timeout=2).json()
        targets = answer["data"]["activeTargets"]
        return len(targets) == 6 and all(t["health"] == "up" for t in targets)

    def work(self) -> None:
        self.prod.work()
        self.staging.work()

    def stop(self) -> None:
        self.prometheus.stop()
        self.prod.stop()
        self.staging.stop()
