"""What the queue cost, from ARC's startup histogram through a real `prometheus` scraping a fake
listener labelled with `job_workflow_ref`: jobs started in a window with known waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings
from bot.domain.queue_cost.cost import ARC
from bot.render.cost import cost_said
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcFleet
from tests.support.running import eventually

WORKFLOWS = "pytorch/pytorch/.github/workflows"
PR_101 = f"{WORKFLOWS}/pull.yml@refs/pull/101/merge"
PR_102 = f"{WORKFLOWS}/pull.yml@refs/pull/102/merge"
PR_103 = f"{WORKFLOWS}/lint.yml@refs/pull/103/merge"
TRUNK = f"{WORKFLOWS}/trunk.yml@refs/heads/main"
PERIODIC = f"{WORKFLOWS}/periodic.yml@refs/heads/main"
# (ref, seconds waited, jobs): 14 jobs wait past 5 min, one past ARC's top bucket (60 min).
STARTS = [
    (PR_101, 420, 6), (PR_101, 60, 2), (PR_102, 1000, 4), (TRUNK, 2000, 3), (TRUNK, 30, 5),
    (PERIODIC, 4000, 1), (PR_103, 100, 10),
]  # fmt: skip
THRESHOLD_MINS = 5


def scraped(url: str, name: str) -> tuple[datetime, float]:
    """The listener's last scrape: its time, and its jobs' startup count then (Prometheus stamps
    each sample of one scrape alike)."""

    def asked(query: str, **params: str) -> float:
        answer = httpx.get(
            f"{url}/api/v1/query", params={"query": query, **params}, timeout=10
        ).json()
        return float(answer["data"]["result"][0]["value"][1])

    at = asked(f'timestamp(gha_assigned_jobs{{name="{name}"}})')
    count = asked(
        "sum(gha_job_startup_duration_seconds_count and on (instance) "
        f'gha_assigned_jobs{{name="{name}"}})',
        time=f"{at:.3f}",
    )
    return datetime.fromtimestamp(at, UTC), count


async def test_a_windows_jobs_waited_from_arcs_startup_histogram() -> None:
    fleet = ArcFleet(workflow_label="job_workflow_ref")
    # The fleet ran before the window: each workflow's series exists when it opens.
    for ref in dict.fromkeys(ref for ref, _, _ in STARTS):
        fleet.queueing.start(waited_s=1, workflow=ref)
    fleet.healthy.start(waited_s=1, workflow=TRUNK)
    backend = PrometheusMetrics(Settings(prometheus_url=fleet.prometheus.url))
    try:
        url, name = fleet.prometheus.url, fleet.queueing.name
        opened, before = scraped(url, name)
        for ref, waited_s, count in STARTS:
            fleet.queueing.start(waited_s=waited_s, count=count, workflow=ref)
        started = sum(count for _, _, count in STARTS)

        def all_scraped() -> datetime | None:
            at, count = scraped(url, name)
            # A few seconds: the other listener is scraped within the window too.
            long_enough = at - opened >= timedelta(seconds=3)
            return at if count == before + started and long_enough else None

        closed = await eventually(all_scraped, what="the window's starts scraped", timeout=30)
        # The window from just before one scrape to another of the same listener: the increase
        # is the jobs started between them, not extrapolated past them.
        since = opened - timedelta(milliseconds=1)
        found = await backend.waited(since=since, until=closed, threshold_mins=THRESHOLD_MINS)
    finally:
        await backend.aclose()
        fleet.stop()

    assert set(found) == {QUEUEING, HEALTHY}
    queueing = found[QUEUEING]
    truth_mins = sum(waited_s * count for _, waited_s, count in STARTS) / 60
    truth_past = sum(
        (waited_s / 60 - THRESHOLD_MINS) * count
        for _, waited_s, count in STARTS
        if waited_s > THRESHOLD_MINS * 60
    )
    assert (queueing.source, queueing.jobs, queueing.jobs_past) == (ARC, started, 14)
    assert queueing.minutes == pytest.approx(truth_mins, rel=0.1)
    assert queueing.minutes_past == pytest.approx(truth_past, rel=0.1)
    assert (queueing.longest_mins, queueing.longest_over) == (60, True)
    # Trunk's 3 jobs waited 85 job-minutes past the threshold: the most of any workflow.
    assert queueing.top_workflows()[0][0] == "trunk"
    # PRs 101 and 102 waited past the threshold (103's jobs did not); main did, twice.
    assert (queueing.prs, queueing.branches) == (2, 1)
    assert cost_said(queueing).startswith(
        f"{round(queueing.minutes_past)} job-minutes past 5 min: 14 jobs in 3 workflows, trunk "
    )
    # The other scale set's one job started before the window: nothing waited within it.
    assert found[HEALTHY].jobs == 0 and cost_said(found[HEALTHY]).startswith("no job got a runner")
