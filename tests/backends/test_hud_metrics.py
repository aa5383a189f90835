"""The `hud` backend against a local server answering like PyTorch's HUD."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.backends.http import BackendError
from bot.backends.metrics.hud import (
    HudMetrics,
    job_rows,
    per_label,
)
from bot.config import Settings
from bot.domain.queue_cost.jobs import JobsListing, Trigger
from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.hud_api import FakeHud

ROWS = Path(__file__).resolve().parents[1] / "fixtures" / "backends" / "hud"
NOW = datetime(2026, 8, 21, 16, 5, 12, tzinfo=UTC)


@pytest.fixture
def hud() -> Iterator[tuple[FakeHud, RunningServer]]:
    fake = FakeHud()
    for name in ("queued_jobs_aggregate", "queued_jobs_by_label"):
        fake.rows[name] = json.loads((ROWS / f"{name}.json").read_text())
    server = serve_in_thread(fake.app)
    try:
        yield fake, server
    finally:
        server.stop()


async def read(server: RunningServer, **settings: object) -> tuple[HudMetrics, object]:
    values = {"hud_url": server.url, "hud_token": "hud-bot-token", **settings}
    metrics = HudMetrics(Settings(**values))  # type: ignore[arg-type]
    try:
        return metrics, await metrics.read(now=NOW)
    finally:
        await metrics.aclose()


async def test_the_aggregate_adds_up_a_labels_rows_over_repos(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    fake, server = hud
    _, snap = await read(server)
    gpu = snap.runner_types["linux.g5.4xlarge.nvidia.gpu"]  # type: ignore[attr-defined]
    # 14 in pytorch/pytorch plus 3 in pytorch/vision; the longest of both waits.
    assert (gpu.queued, gpu.longest_wait_mins) == (17, 114)
    assert snap.runner_types["lf.linux.2xlarge"].queued == 37  # type: ignore[attr-defined]
    # Counted like PyTorch's queue alert: jobs queued longer than 5 minutes.
    assert fake.seen[-1] == {"queuedThresholdMinutes": 5, "maxAgeDays": 3}


async def test_parameters_are_configurable(hud: tuple[FakeHud, RunningServer]) -> None:
    fake, server = hud
    await read(server, hud_parameters={"orgs": ["pytorch"], "repo": "pytorch/pytorch"})
    assert fake.seen[-1] == {
        "queuedThresholdMinutes": 5,
        "maxAgeDays": 3,
        "orgs": ["pytorch"],
        "repo": "pytorch/pytorch",
    }


async def test_by_label_reads_count_and_the_maximum_hidden_in_avg_queue_s(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    fake, server = hud
    _, snap = await read(server, hud_query="queued_jobs_by_label")
    gpu = snap.runner_types["linux.g5.4xlarge.nvidia.gpu"]  # type: ignore[attr-defined]
    assert gpu.queued == 16 and gpu.longest_wait_mins == pytest.approx(6871 / 60)
    assert fake.seen[-1] == {}  # no parameters, but `parameters` is sent: the route needs it


async def test_without_the_bot_token_the_refusal_is_clear(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    _, server = hud
    with pytest.raises(BackendError, match="The HUD answered 403") as caught:
        await read(server, hud_token="wrong")
    assert not caught.value.retryable


async def test_a_malformed_row_is_left_out_and_said(hud: tuple[FakeHud, RunningServer]) -> None:
    fake, server = hud
    fake.rows["queued_jobs_aggregate"] = [
        {"runner_label": "linux.4xlarge", "num_queued_jobs": "5", "max_queue_time_minutes": 58},
        {"runner_label": "linux.4xlarge", "num_queued_jobs": None},
    ]
    _, snap = await read(server)
    assert snap.runner_types["linux.4xlarge"].queued == 5  # type: ignore[attr-defined]
    assert "1 unreadable HUD rows left out" in snap.note  # type: ignore[attr-defined]


async def test_a_label_whose_queue_drained_leaves_the_answer_and_its_absence_means_empty(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    fake, server = hud
    rows = fake.rows["queued_jobs_aggregate"]
    fake.rows["queued_jobs_aggregate"] = [
        r for r in rows if r["runner_label"] != "lf.linux.2xlarge"
    ]
    _, snap = await read(server)
    assert "lf.linux.2xlarge" not in snap.runner_types  # type: ignore[attr-defined]
    # Empty, as far as the query sees: nothing queued longer than its threshold.
    assert snap.absent_means_empty and snap.queued_over_mins == 5  # type: ignore[attr-defined]
    fake.rows["queued_jobs_by_label"] = []  # nothing queues anywhere
    _, snap = await read(server, hud_query="queued_jobs_by_label")
    assert snap.runner_types == {} and snap.absent_means_empty  # type: ignore[attr-defined]
    assert snap.queued_over_mins == 5  # type: ignore[attr-defined]  # its fixed 5 minutes


async def test_the_reading_says_the_threshold_the_hud_was_asked_for(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    """An operator's 30 minutes: a label the HUD lacks may have jobs waiting 29 (the drain
    rule is told, and does not take that as drained)."""
    fake, server = hud
    _, snap = await read(server, hud_parameters={"queuedThresholdMinutes": 30})
    assert fake.seen[-1]["queuedThresholdMinutes"] == 30
    assert snap.queued_over_mins == 30  # type: ignore[attr-defined]


@pytest.mark.parametrize("threshold", ["30", 2.5, -1, True, None])
def test_a_threshold_that_is_no_whole_number_of_minutes_is_refused(threshold: object) -> None:
    config = Settings(
        hud_url="http://hud.invalid", hud_parameters={"queuedThresholdMinutes": threshold}
    )
    with pytest.raises(ValueError, match="queuedThresholdMinutes must be a whole number"):
        HudMetrics(config)


async def test_after_an_unreadable_row_absence_means_nothing(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    fake, server = hud
    # The unreadable row may be the missing label's own: its queue is unknown, not empty.
    fake.rows["queued_jobs_aggregate"] = [
        {"runner_label": "linux.4xlarge", "num_queued_jobs": 5, "max_queue_time_minutes": 58},
        {"runner_label": "linux.2xlarge", "num_queued_jobs": "many"},
    ]
    _, snap = await read(server)
    assert "linux.2xlarge" not in snap.runner_types  # type: ignore[attr-defined]
    assert not snap.absent_means_empty  # type: ignore[attr-defined]


rows = st.lists(
    st.dictionaries(
        st.sampled_from(
            [
                "runner_label",
                "num_queued_jobs",
                "max_queue_time_minutes",
                "machine_type",
                "count",
                "avg_queue_s",
            ]
        ),
        st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats() | st.text(max_size=10),
    )
    | st.none()
    | st.integers(),
    max_size=8,
)


@given(rows)
def test_any_rows_parse_to_non_negative_numbers(data: list) -> None:
    for query in ("queued_jobs_aggregate", "queued_jobs_by_label"):
        types, skipped = per_label(data, query)
        assert 0 <= skipped <= len(data)
        for metrics in types.values():
            assert metrics.queued is not None and metrics.queued >= 0
            assert metrics.longest_wait_mins is None or metrics.longest_wait_mins >= 0


@given(st.none() | st.integers() | st.text() | st.dictionaries(st.text(max_size=3), st.integers()))
def test_an_answer_that_is_not_a_list_is_a_backend_error(data: object) -> None:
    with pytest.raises(BackendError):
        per_label(data, "queued_jobs_aggregate")


# -- queued_jobs: one row per queued job -------------------------------------------------------

# ../shared/fixtures/hud/queued_jobs.json: HUD's metrics page's rows, worst first.
QUEUED_JOBS = [
    {
        "queue_s": 6840,
        "name": "pull / linux-jammy-cuda12.8-py3.10-gcc11 / test (default, 1, 5, linux.g5.4xlarge.nvidia.gpu)",  # noqa: E501
        "html_url": "https://github.com/pytorch/pytorch/actions/runs/19633301122/job/56211710001",
        "machine_type": "linux.g5.4xlarge.nvidia.gpu",
        "head_sha": "3f1e0c2a9b7d4e5f60718293a4b5c6d7e8f90123",
        "head_branch": "gh/someone/123/head",
        "event": "pull_request",
        "source_type": "other",
        "ciflow_id": None,
    },
    {
        "queue_s": 5410,
        "name": "trunk / linux-jammy-cuda12.8-py3.10-gcc11 / test (default, 3, 5, linux.g5.4xlarge.nvidia.gpu)",  # noqa: E501
        "html_url": "https://github.com/pytorch/pytorch/actions/runs/19633302233/job/56211720002",
        "machine_type": "linux.g5.4xlarge.nvidia.gpu",
        "head_sha": "9a8b7c6d5e4f30211f0e9d8c7b6a594837261504",
        "head_branch": "main",
        "event": "push",
        "source_type": "main",
        "ciflow_id": None,
    },
    {
        "queue_s": 2290,
        "name": "periodic / linux-jammy-cuda12.8-py3.10-gcc11-debug / test (default, 2, 7, linux.g5.4xlarge.nvidia.gpu)",  # noqa: E501
        "html_url": "https://github.com/pytorch/pytorch/actions/runs/19633303344/job/56211730003",
        "machine_type": "linux.g5.4xlarge.nvidia.gpu",
        "head_sha": "ccdd11ee22ff33aa44bb55cc66dd77ee88ff9900",
        "head_branch": "ciflow/periodic/165432",
        "event": "push",
        "source_type": "ciflow",
        "ciflow_id": "165432",
    },
    {
        "queue_s": 1900,
        "name": "trunk / linux-jammy-py3.10-gcc11 / build",
        "html_url": "https://github.com/pytorch/pytorch/actions/runs/19633304455/job/56211740004",
        "machine_type": "linux.2xlarge",
        "head_sha": "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
        "head_branch": "trunk/0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
        "event": "workflow_dispatch",
        "source_type": "autorevert",
        "ciflow_id": None,
    },
]


async def queued_jobs(server: RunningServer) -> JobsListing:
    metrics = HudMetrics(Settings(hud_url=server.url, hud_token="hud-bot-token"))
    try:
        return await metrics.queued_jobs(now=NOW)
    finally:
        await metrics.aclose()


async def test_queued_jobs_rows_are_jobs_with_workflow_and_trigger(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    fake, server = hud
    fake.rows["queued_jobs"] = QUEUED_JOBS

    listing = await queued_jobs(server)

    assert fake.seen[-1] == {} and fake.passed[-1] == {}, "`parameters={}`: the route needs it"
    assert listing.complete and not listing.note and listing.ghosts == 0
    shown = [(j.runner_type, j.workflow, j.trigger, round(j.wait_mins(NOW))) for j in listing.jobs]
    assert shown == [
        ("linux.g5.4xlarge.nvidia.gpu", "pull", Trigger.PULL_REQUEST, 114),
        ("linux.g5.4xlarge.nvidia.gpu", "trunk", Trigger.MAIN, 90),
        ("linux.g5.4xlarge.nvidia.gpu", "periodic", Trigger.TAG, 38),
        ("linux.2xlarge", "trunk", Trigger.DISPATCH, 32),
    ]
    first = listing.jobs[0]
    assert (
        first.job
        == "linux-jammy-cuda12.8-py3.10-gcc11 / test (default, 1, 5, linux.g5.4xlarge.nvidia.gpu)"
    )
    assert first.repository == "pytorch/pytorch"
    assert first.url == QUEUED_JOBS[0]["html_url"]


async def test_unreadable_job_rows_are_left_out_and_said(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    fake, server = hud
    fake.rows["queued_jobs"] = [*QUEUED_JOBS[:2], {"name": "pull / x"}, "garbage"]

    listing = await queued_jobs(server)

    assert len(listing.jobs) == 2 and not listing.complete
    assert listing.note == "2 unreadable HUD rows left out"


async def test_a_hud_without_the_queued_jobs_query_is_a_clear_error(
    hud: tuple[FakeHud, RunningServer],
) -> None:
    """The HUD's route throws reading a query it does not have: Next.js's bare 500."""
    _, server = hud
    with pytest.raises(BackendError, match="The HUD answered 500: Internal Server Error"):
        await queued_jobs(server)


job_row = st.fixed_dictionaries(
    {},
    optional={
        "queue_s": st.integers(-5, 10**9) | st.floats() | st.text(max_size=5) | st.none(),
        "name": st.sampled_from(["pull / build", "periodic", " / ", ""]) | st.text(max_size=30),
        "html_url": st.just(QUEUED_JOBS[0]["html_url"]) | st.text(max_size=30) | st.none(),
        "machine_type": st.sampled_from(["linux.2xlarge", ""]) | st.integers(),
        "source_type": st.sampled_from(["main", "ciflow", "autorevert", "other"]) | st.none(),
        "event": st.text(max_size=20) | st.none(),
        "head_branch": st.text(max_size=20) | st.integers(),
    },
)


@given(st.lists(job_row | st.none() | st.integers(), max_size=8))
def test_any_job_rows_give_jobs_or_a_count_of_left_out_rows(rows: list) -> None:
    jobs, skipped = job_rows(rows, now=NOW)
    assert len(jobs) + skipped == len(rows)
    for job in jobs:
        assert job.runner_type and job.wait_mins(NOW) >= 0 and job.source_id.startswith("hud:")


@given(st.none() | st.integers() | st.text(max_size=10) | st.dictionaries(st.text(), st.none()))
def test_an_answer_that_is_not_rows_is_a_backend_error(answer: object) -> None:
    with pytest.raises(BackendError, match="not a list of rows"):
        job_rows(answer, now=NOW)
