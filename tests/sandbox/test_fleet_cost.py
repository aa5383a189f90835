"""What the queue cost, as the simulated fleet serves it: the bot's own `prometheus` backend asks
the fleet for its startup histogram's increase over an incident's window, and reads the jobs
that started in it, their waits, workflows and pull requests, as the fleet's model has them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.backends.metrics.promql import WAITED, render
from bot.config import Settings
from bot.domain.queue_cost.cost import ARC
from sandbox.fleet import STEP_S, Fleet, workflow_ref
from sandbox.fleet_api import CUT, FleetApi, FleetApiConfig
from sandbox.serve import serve_in_thread
from tests.sandbox.test_fleet import Clock

THRESHOLD_MINS = 5.0
WINDOW = timedelta(minutes=20)


async def test_the_bot_reads_what_the_jobs_that_started_in_the_window_waited_by_workflow() -> None:
    """At ×1 (a fleet minute a minute), 20 minutes from the burst's height to its drain: every
    job that started in them is counted, with its exact wait; the periodic surge tops the
    workflows, and the pull requests and branches are counted from `job_workflow_ref`."""
    clock = Clock()
    fleet = Fleet(speed=1, clock=clock)
    api = FleetApi(fleet, FleetApiConfig(rate_window="10m"))
    # Half a step past minute 30: the window's edges fall between two steps' starts, so the
    # moment the fleet answers (a request's latency later) takes the same ones.
    clock.to_minute(30)
    clock.now += STEP_S / 2
    truth = fleet.started_within(WINDOW.total_seconds())["linux.2xlarge"]
    with serve_in_thread(api.app) as server:
        metrics = PrometheusMetrics(Settings(prometheus_url=server.url))
        try:
            until = datetime.now(UTC)
            found = await metrics.waited(
                since=until - WINDOW, until=until, threshold_mins=THRESHOLD_MINS
            )
        finally:
            await metrics.aclose()
    waited = found["linux-2xlarge"]
    assert waited.source == ARC and waited.not_known == {}
    assert waited.jobs == len(truth) > 20
    assert abs(waited.minutes - sum(s.waited for s in truth) / 60) < 1e-6
    assert waited.longest_mins is not None
    assert max(s.waited for s in truth) / 60 <= waited.longest_mins
    assert waited.top_workflows()[0][0] == "periodic"
    past = [s for s in truth if s.waited > THRESHOLD_MINS * 60]
    pulls = {workflow_ref(s.job) for s in past if "@refs/pull/" in workflow_ref(s.job)}
    assert waited.prs is not None and 0 < waited.prs <= len(pulls)
    # main's pushes and schedules; ciflow/inductor/123 is a tag
    assert waited.branches == 1


def test_refs_are_shaped_as_arcs_for_the_event_that_triggered_the_job() -> None:
    clock = Clock()
    fleet = Fleet(speed=1, clock=clock)
    clock.to_minute(20)
    refs = {workflow_ref(s.job) for s in fleet.started_within(20 * 60)["linux.2xlarge"]}
    workflows = "pytorch/pytorch/.github/workflows"
    assert f"{workflows}/periodic.yml@refs/heads/main" in refs
    assert f"{workflows}/trunk.yml@refs/heads/main" in refs
    assert f"{workflows}/inductor.yml@refs/tags/ciflow/inductor/123" in refs
    pulls = [ref for ref in refs if ref.startswith(f"{workflows}/pull.yml@refs/pull/")]
    assert pulls and all(ref.endswith("/merge") for ref in pulls)


def test_the_cost_queries_are_answered_over_any_range_and_nothing_like_them() -> None:
    """Any range the bot may write, the same throughout the query; a query that differs from
    the bot's (a range of its own in one place, another grouping) is refused as Prometheus
    refuses what it cannot run."""
    api = FleetApi(Fleet(speed=1, clock=Clock()), FleetApiConfig(rate_window="10m"))
    counts = WAITED["counts"]
    with serve_in_thread(api.app) as server:

        def asked(query: str) -> httpx.Response:
            return httpx.get(f"{server.url}/api/v1/query", params={"query": query}, timeout=10)

        for window in ("754123ms", "600s"):
            answer = asked(render(counts.promql, by=counts.by, cut=CUT, range=window))
            assert answer.status_code == 200 and answer.json()["status"] == "success", answer.text
        mixed = render(counts.promql, by=counts.by, cut=CUT, range="600s").replace("600s", "5m", 1)
        regrouped = render(counts.promql, by="queuepilot_type", cut=CUT, range="600s")
        for query in (mixed, regrouped):
            answer = asked(query)
            assert answer.status_code == 400 and answer.json()["errorType"] == "bad_data"
