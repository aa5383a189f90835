"""Which source costs which runner type: PyTorch's fleet has ARC's types, whose startup histogram
a real Prometheus scrapes, beside EC2 types only the HUD lists. With `JOBS_BACKEND=hud` beside
`METRICS_BACKEND=prometheus`, each type is costed from the source that knows it: ARC's from
Prometheus, the rest from the HUD's queued jobs followed across readings."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.backends.metrics.hud import job_rows
from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings
from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.queue_cost.cost import ARC, HUD
from bot.domain.queue_cost.jobs import JobsListing
from bot.fleet.cost import CostReader
from bot.storage.listed_jobs import ListedJobs
from bot.storage.workflow_jobs import WorkflowJobs
from tests.support.fakes.arc_exporter import AT_MAXIMUM, QUEUEING, ArcFleet
from tests.support.incidents import make_incident
from tests.support.running import eventually
from tests.support.store import KEYS

GPU = "linux.g5.4xlarge.nvidia.gpu"  # an EC2 type: no ARC listener, so no histogram
PULL = "pytorch/pytorch/.github/workflows/pull.yml@refs/pull/101/merge"


def gpu_row(n: int, queued_s: float) -> dict[str, object]:
    return {
        "queue_s": int(queued_s),
        "name": "pull / linux-jammy-cuda12.8 / test (default, 1, 5, linux.g5.4xlarge.nvidia.gpu)",
        "html_url": f"https://github.com/pytorch/pytorch/actions/runs/1/job/{n}",
        "machine_type": GPU,
        "head_branch": f"gh/someone/{n}/head",
        "event": "pull_request",
        "source_type": "other",
    }


async def test_each_type_is_costed_from_the_source_that_knows_it(
    redis: Redis, settings_for: Callable[..., Settings]
) -> None:
    fleet = ArcFleet(workflow_label="job_workflow_ref")
    fleet.queueing.set(**AT_MAXIMUM)
    fleet.queueing.start(waited_s=1, workflow=PULL)  # the series exist before the window
    settings = settings_for(
        metrics_backend="prometheus",
        prometheus_url=fleet.prometheus.url,
        jobs_backend="hud",
        hud_url="http://127.0.0.1:9",
    )
    metrics = PrometheusMetrics(settings)
    followed = ListedJobs(redis, KEYS)
    now = datetime.now(UTC)
    incident = make_incident(
        started_at=now - timedelta(minutes=10),
        opened_at=now - timedelta(minutes=9),
        peak_types={
            QUEUEING: RunnerQueue(queued=10, longest_wait_mins=7),
            GPU: RunnerQueue(queued=3, longest_wait_mins=30),
        },
    )
    reader = CostReader(settings, metrics, WorkflowJobs(redis, KEYS), followed)
    try:
        # Two GPU jobs listed by the HUD a minute apart; one has left by the second listing.
        first = now - timedelta(minutes=2)
        rows = [gpu_row(1, 20 * 60), gpu_row(2, 8 * 60)]
        await followed.follow(JobsListing(tuple(job_rows(rows, now=first)[0])), now=first)
        second = first + timedelta(minutes=1)
        rows = [gpu_row(1, 21 * 60)]
        await followed.follow(JobsListing(tuple(job_rows(rows, now=second)[0])), now=second)
        # ARC's type: 4 jobs start after waiting 7 min each.
        fleet.queueing.start(waited_s=420, count=4, workflow=PULL)

        async def both() -> dict[str, object] | None:
            found = (await reader.costs([incident], datetime.now(UTC))).get(incident.id)
            arc = (found or {}).get(QUEUEING)
            return found if arc is not None and arc.jobs >= 4 else None

        found = await eventually(both, what="ARC's jobs in Prometheus", timeout=60)
    finally:
        await metrics.aclose()
        fleet.stop()
    arc, hud = found[QUEUEING], found[GPU]
    assert arc.source == ARC and arc.jobs >= 4 and arc.prs == 1
    assert (hud.source, hud.jobs, hud.prs) == (HUD, 1, 1)
    assert abs(hud.minutes - 8.5) < 0.05, "its wait to the middle of the minute it left in"
