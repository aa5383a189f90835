"""The `prometheus` backend against a real `prometheus` scraping two ARC listeners."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.backends.http import BackendError
from bot.backends.metrics.prometheus import (
    NO_STARTS,
    NO_WORKFLOW,
    PrometheusMetrics,
    parse_vector,
    workflow_of,
)
from bot.config import Settings
from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incident_fleet import incident_fleet
from bot.domain.incident.incidents import Incident
from bot.domain.queue_cost.jobs import JobsListing
from bot.domain.reading.fleet import FIELDS as PROMETHEUS_FIELDS
from bot.domain.reading.fleet import FleetSnapshot, Reading
from tests.support.fakes.arc_exporter import HEALTHY, QUEUEING, ArcFleet
from tests.support.running import eventually


@pytest.fixture(scope="module")
def arc_fleet() -> Iterator[ArcFleet]:
    fleet = ArcFleet()
    try:
        yield fleet
    finally:
        fleet.stop()


async def read(url: str, **settings: Any) -> FleetSnapshot:
    values = {"prometheus_url": url, "prometheus_rate_window": "30s", **settings}
    metrics = PrometheusMetrics(Settings(**values))
    try:
        return await metrics.read(now=datetime.now(UTC))
    finally:
        await metrics.aclose()


async def test_per_runner_type_numbers_from_arcs_listener_metrics(arc_fleet: ArcFleet) -> None:
    async def scraped() -> FleetSnapshot | None:
        # Jobs keep starting and finishing, so the counters have rates between scrapes.
        arc_fleet.queueing.start(waited_s=600, count=2)
        arc_fleet.queueing.complete(took_s=1500, count=2)
        snap = await read(arc_fleet.prometheus.url)
        gpu = snap.runner_types.get(QUEUEING)
        ready = (
            gpu is not None and gpu.job_duration_mins is not None and HEALTHY in snap.runner_types
        )
        return snap if ready else None

    snap = await eventually(scraped, what="both listeners scraped", timeout=30)
    gpu, healthy = snap.runner_types[QUEUEING], snap.runner_types[HEALTHY]
    # The random suffix is gone: the type is the scale set, as alerts and scale targets name it.
    assert set(snap.runner_types) == {QUEUEING, HEALTHY}
    assert (gpu.queued, gpu.registered, gpu.busy, gpu.idle) == (43, 120, 120, 0)
    assert (gpu.minimum, gpu.maximum, gpu.desired) == (0, 120, 120)
    assert gpu.job_duration_mins == pytest.approx(25.0)
    # The slowest recent start: 600 s falls in the (540, 600] bucket.
    assert gpu.longest_wait_mins is not None and 9 <= gpu.longest_wait_mins <= 10
    assert gpu.started_per_min is not None and gpu.started_per_min > 0
    # The healthy set has no job metrics yet (ARC shows them after the first job event).
    assert (healthy.queued, healthy.busy, healthy.registered) == (0, 17, 19)
    assert healthy.job_duration_mins is None and healthy.started_per_min is None


# -- scale sets named as Helm releases are: `linux-2xlarge` serves the label `linux.2xlarge` ------

GPU = "linux.g5.4xlarge.nvidia.gpu"


@pytest.fixture(scope="module")
def released() -> Iterator[ArcFleet]:
    """A fleet whose scale sets are named as real installs name them: one derived from its
    runner type, one named by hand (RUNNER_SCALE_SETS)."""
    fleet = ArcFleet(names=("linux-2xlarge", "gpu-a10g"))
    try:
        yield fleet
    finally:
        fleet.stop()


async def both_read(url: str, **names: Any) -> FleetSnapshot:
    async def both() -> FleetSnapshot | None:
        snap = await read(url, **names)
        return snap if len(snap.runner_types) == 2 else None

    return await eventually(both, what="both listeners scraped", timeout=30)


async def test_each_series_is_named_for_the_runner_type_the_alerts_use(
    released: ArcFleet,
) -> None:
    # RUNNER_SCALE_SETS names the GPU type's scale set; the other is derived from its target's.
    names = {"runner_scale_sets": {GPU: "gpu-a10g"}, "scaler_targets": {"linux.2xlarge": {}}}
    snap = await both_read(released.prometheus.url, **names)
    assert set(snap.runner_types) == {"linux.2xlarge", GPU}
    assert snap.runner_types["linux.2xlarge"].queued == 43
    assert snap.runner_types[GPU].registered == 19


async def test_with_nothing_configured_an_alerts_type_still_finds_its_scale_set(
    released: ArcFleet,
) -> None:
    snap = await both_read(released.prometheus.url)
    assert set(snap.runner_types) == {"linux-2xlarge", "gpu-a10g"}  # no type knows them
    now = snap.at
    alert = Incident(
        id="1",
        group_key="g",
        group_hash="h",
        source="grafana",
        title="jobs queueing",
        runner_types={"linux.2xlarge": RunnerQueue(queued=40)},
        started_at=now,
        opened_at=now,
        updated_at=now,
    )
    view = incident_fleet(
        alert, Reading(snap, now), backend="Prometheus", now=now, interval=timedelta(minutes=1)
    )
    assert view.is_live and not view.note
    shown = view.runner_types["linux.2xlarge"]  # the alert's name, the scale set's numbers
    assert (shown.queued, shown.busy, shown.maximum) == (43, 120, 120)
    assert list(view.runner_types) == ["linux.2xlarge"]


async def test_a_replaced_query_fits_another_exporter(arc_fleet: ArcFleet) -> None:
    """An EC2 autoscaler's metrics, say: one query per field, any label naming the type."""
    queries = {
        "queued": 'label_replace(max by (name) (gha_assigned_jobs), "pool", "$1", "name", "(.*)")',
        "busy": "",  # an exporter without such a number
    }

    async def scraped() -> FleetSnapshot | None:
        snap = await read(
            arc_fleet.prometheus.url,
            prometheus_queries=queries,
            prometheus_runner_type_label="pool",
        )
        return snap if QUEUEING in snap.runner_types else None

    # Waited for: with the suite's workers, this test may be the first of its module here.
    snap = await eventually(scraped, what="a reading with the scale set", timeout=30)
    assert snap.runner_types[QUEUEING].queued == 163
    assert snap.runner_types[QUEUEING].busy is None


async def test_a_query_prometheus_refuses_is_named_and_the_rest_still_read(
    arc_fleet: ArcFleet,
) -> None:
    async def scraped() -> FleetSnapshot | None:
        snap = await read(arc_fleet.prometheus.url, prometheus_queries={"queued": "sum("})
        return snap if QUEUEING in snap.runner_types else None

    snap = await eventually(scraped, what="a reading with the scale set", timeout=30)
    assert "Prometheus could not answer for queued" in snap.note
    assert snap.runner_types[QUEUEING].registered == 120
    every = {field: "sum(" for field in ("queued", "busy")}
    with pytest.raises(BackendError, match="Prometheus answered 400"):
        await read(
            arc_fleet.prometheus.url,
            prometheus_queries={**every, **{f: "" for f in PROMETHEUS_FIELDS if f not in every}},
        )


async def test_an_unreachable_prometheus_is_a_retryable_error() -> None:
    from tests.support.servers import free_port

    with pytest.raises(BackendError, match="unreachable") as caught:
        await read(f"http://127.0.0.1:{free_port()}")
    assert caught.value.retryable


# -- the parser of Prometheus's answers -----------------------------------------------------


def test_nan_and_infinities_are_unknown_not_numbers() -> None:
    body = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"name": "a"}, "value": [1, "NaN"]},
                {"metric": {"name": "b"}, "value": [1, "+Inf"]},
                {"metric": {"name": "c"}, "value": [1, "4"]},
            ],
        },
    }
    assert parse_vector(body) == [({"name": "c"}, 4.0)]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    st.fixed_dictionaries(
        {"status": st.sampled_from(["success", "error"]) | json_values},
        optional={
            "data": st.fixed_dictionaries(
                {},
                optional={
                    "resultType": st.sampled_from(["vector", "scalar", "matrix"]) | json_values,
                    "result": json_values,
                },
            )
            | json_values,
            "error": json_values,
        },
    )
)
def test_any_answer_parses_to_finite_samples_or_a_backend_error(body: dict) -> None:
    try:
        samples = parse_vector(body)
    except BackendError as exc:
        assert str(exc)
        return
    for labels, value in samples:
        assert isinstance(labels, dict) and value == value and abs(value) != float("inf")


# -- the jobs behind the queue: ARC's started-job counters per workflow ----------------------


async def jobs_of(url: str) -> JobsListing:
    metrics = PrometheusMetrics(Settings(prometheus_url=url))
    try:
        return await metrics.queued_jobs(now=datetime.now(UTC))
    finally:
        await metrics.aclose()


async def test_without_a_workflow_label_arc_says_how_to_add_it(arc_fleet: ArcFleet) -> None:
    async def started() -> JobsListing | None:
        arc_fleet.queueing.start(waited_s=60)
        listing = await jobs_of(arc_fleet.prometheus.url)
        return listing if listing.note != NO_STARTS else None

    listing = await eventually(started, what="started jobs scraped", timeout=30)

    assert listing.note == NO_WORKFLOW and "listenerMetrics" in listing.note
    assert listing.jobs == () and listing.arrivals is not None and not listing.arrivals.last_hour


async def test_with_job_workflow_name_arc_gives_each_workflows_starts_as_arrivals() -> None:
    fleet = ArcFleet(workflow_label="job_workflow_name")
    try:

        async def started() -> JobsListing | None:
            fleet.queueing.start(waited_s=60, count=3, workflow="periodic")
            fleet.queueing.start(waited_s=60, workflow="pull")
            listing = await jobs_of(fleet.prometheus.url)
            last = listing.arrivals.last_hour if listing.arrivals else {}
            return listing if last.get((QUEUEING, "pull"), 0) > 0 else None

        listing = await eventually(started, what="per-workflow starts", timeout=30)
    finally:
        fleet.stop()

    assert listing.note == "" and listing.jobs == ()
    assert listing.arrivals is not None
    last = listing.arrivals.last_hour
    # Per scale set (the random suffix gone) and workflow; three periodic starts for each pull.
    assert set(last) == {(QUEUEING, "periodic"), (QUEUEING, "pull")}
    assert last[(QUEUEING, "periodic")] > last[(QUEUEING, "pull")]
    assert not listing.arrivals.history, "Prometheus has no day before yet"


async def test_with_job_workflow_name_arc_gives_each_workflows_mean_job_minutes() -> None:
    """What "whose jobs got slower" compares: the mean minutes of each workflow's jobs that
    finished in the last hour (ARC's execution histogram, labelled by workflow)."""
    fleet = ArcFleet(workflow_label="job_workflow_name")
    try:

        async def finished() -> JobsListing | None:
            fleet.queueing.start(waited_s=60, workflow="periodic")
            fleet.queueing.complete(took_s=2400, count=3, workflow="periodic")
            fleet.queueing.complete(took_s=600, workflow="pull")
            listing = await jobs_of(fleet.prometheus.url)
            means = listing.arrivals.minutes_last_hour if listing.arrivals else {}
            return listing if (QUEUEING, "pull") in means else None

        listing = await eventually(finished, what="per-workflow job minutes", timeout=30)
    finally:
        fleet.stop()

    assert listing.arrivals is not None
    means = listing.arrivals.minutes_last_hour
    assert means[(QUEUEING, "periodic")] == pytest.approx(40)
    assert means[(QUEUEING, "pull")] == pytest.approx(10)
    assert listing.arrivals.minutes_day_before == {}


async def test_the_reading_carries_the_assigned_jobs(arc_fleet: ArcFleet) -> None:
    async def scraped() -> FleetSnapshot | None:
        snap = await read(arc_fleet.prometheus.url)
        return snap if QUEUEING in snap.runner_types else None

    snap = await eventually(scraped, what="a reading with the scale set", timeout=30)
    assert snap.runner_types[QUEUEING].assigned == 163


@given(
    st.dictionaries(
        st.sampled_from(["job_workflow_name", "job_workflow_ref", "name", "event_name"]),
        st.sampled_from(
            ["", "periodic", "pytorch/pytorch/.github/workflows/periodic.yml@refs/heads/main"]
        )
        | st.text(max_size=40),
    )
)
def test_any_label_values_give_a_workflow_name_or_none(labels: dict[str, str]) -> None:
    workflow = workflow_of(labels)
    assert len(workflow) <= 200
    if labels.get("job_workflow_name", "").strip():
        assert workflow == labels["job_workflow_name"].strip()[:200]


def test_a_workflow_ref_names_its_file() -> None:
    ref = "pytorch/pytorch/.github/workflows/periodic.yml@refs/heads/main"
    assert workflow_of({"job_workflow_ref": ref}) == "periodic"
    assert workflow_of({"job_workflow_ref": "", "job_workflow_name": ""}) == ""
