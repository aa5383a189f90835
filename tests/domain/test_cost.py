"""What the queue cost, from GitHub's jobs and from ARC's startup histogram: the numbers a
responder reads, and totals that add up whatever a source sends."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.queue_cost.cost import (
    ARC,
    GITHUB,
    HUD,
    NO_WORKFLOW,
    LeftJob,
    Waited,
    waited_of_buckets,
    waited_of_jobs,
    waited_of_left,
)
from bot.render.cost import cost_said

T0 = datetime(2026, 11, 28, 14, 0, tzinfo=UTC)
SINCE, UNTIL = T0, T0 + timedelta(hours=1)
BOUNDS = (60, 120, 300, 600, 900, 1800, 3600)  # a few of ARC's buckets, in seconds


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def job(
    waited_mins: float,
    *,
    started: datetime = T0 + timedelta(minutes=30),
    label: str = "linux.2xlarge",
    workflow: str = "pull",
    branch: str = "fix-sdpa-mask",
    status: str = "completed",
    runner_id: Any = 7,
) -> dict[str, Any]:
    return {
        "id": 1,
        "status": status,
        "runner_id": runner_id,
        "labels": ["self-hosted", label],
        "workflow_name": workflow,
        "head_branch": branch,
        "created_at": stamp(started - timedelta(minutes=waited_mins)),
        "started_at": stamp(started),
    }


def test_each_job_picked_up_in_the_window_counts_its_own_wait() -> None:
    jobs = [
        job(7, branch="a"),  # 2 past a 5-min threshold
        job(12, branch="b", workflow="trunk", status="in_progress"),  # 7 past
        job(3, branch="c"),
        job(9, started=T0 - timedelta(minutes=1)),  # started before the window
        job(20, label="linux.4xlarge"),  # another type
        job(8, status="queued", runner_id=None),  # not picked up
        job(8, runner_id=0),  # no runner
    ]
    found = waited_of_jobs(jobs, "linux.2xlarge", SINCE, UNTIL, 5)
    assert (found.jobs, found.jobs_past) == (3, 2)
    assert found.minutes == pytest.approx(22) and found.minutes_past == pytest.approx(9)
    assert found.longest_mins == pytest.approx(12) and not found.longest_over
    assert found.workflows["trunk"].minutes_past == pytest.approx(7)
    assert [name for name, _ in found.top_workflows()] == ["trunk", "pull"]
    assert found.branches == 2  # those of the jobs past the threshold
    assert found.prs is None and "pull requests" in found.not_known
    assert found.source == GITHUB and found.unreadable == 0


def test_a_job_with_times_no_one_can_read_is_left_out_and_counted() -> None:
    odd = [
        job(6) | {"created_at": "yesterday"},
        job(6) | {"started_at": None},
        job(-4),  # started before it was created
        "not a job",
    ]
    found = waited_of_jobs([*odd, job(6)], "linux.2xlarge", SINCE, UNTIL, 5)
    assert (found.jobs, found.unreadable) == (1, 4)


def series(le: dict[str, float], jobs: float, seconds: float, **labels: str) -> dict[str, Any]:
    return {
        "buckets": [({**labels, "le": bound}, count) for bound, count in le.items()],
        "sums": [(labels, seconds)],
        "counts": [(labels, jobs)],
    }


def read(*parts: dict[str, Any], threshold_mins: float = 5) -> Waited:
    return waited_of_buckets(
        [b for p in parts for b in p["buckets"]],
        [s for p in parts for s in p["sums"]],
        [c for p in parts for c in p["counts"]],
        threshold_mins,
    )


PULL = "pytorch/pytorch/.github/workflows/pull.yml"


def test_arc_totals_are_exact_and_the_share_past_the_threshold_is_interpolated() -> None:
    # 10 jobs: 4 within 5 min, 4 in (5, 10] min, 2 in (15, 30] min; 300 job-minutes in all.
    pr = series(
        {"300": 4, "600": 8, "900": 8, "1800": 10, "+Inf": 10},
        10,
        18000,
        job_workflow_ref=f"{PULL}@refs/pull/42/merge",
    )
    found = read(pr)
    assert (found.jobs, found.jobs_past) == (10, 6)
    assert found.minutes == pytest.approx(300)
    # Spread evenly within their buckets: 4 jobs 2.5 min past, 2 jobs 17.5 min past.
    assert found.minutes_past == pytest.approx(4 * 2.5 + 2 * 17.5)
    assert (found.longest_mins, found.longest_over) == (30, False)
    assert list(found.workflows) == ["pull"] and found.prs == 1 and found.branches == 0
    assert found.source == ARC and found.not_known == {}


def test_arc_longest_past_its_top_bucket_is_only_a_bound() -> None:
    found = read(series({"3600": 1, "+Inf": 3}, 3, 3 * 5000, job_workflow_ref=f"{PULL}@x"))
    assert (found.longest_mins, found.longest_over) == (60, True)
    assert found.jobs_past == 3  # past 5 min, counted at the top bound
    # The one within (0, 60] min spread over it; the two past it taken at 60 min.
    assert found.minutes_past == pytest.approx((3300 / 3600 * 1650 + 2 * 3300) / 60)


def test_arc_prs_and_branches_come_from_the_refs_of_the_jobs_delayed() -> None:
    late = {"300": 0, "600": 2, "+Inf": 2}
    parts = [
        series(late, 2, 900, job_workflow_ref=f"{PULL}@refs/pull/1/merge"),
        series(late, 2, 900, job_workflow_ref=f"{PULL}@refs/pull/2/merge"),
        series(late, 2, 900, job_workflow_ref=f"{PULL}@refs/heads/main"),
        series({"300": 2, "+Inf": 2}, 2, 60, job_workflow_ref=f"{PULL}@refs/pull/3/merge"),
    ]
    found = read(*parts)
    assert (found.prs, found.branches, found.jobs_past) == (2, 1, 6)


def test_arc_without_a_workflow_label_knows_the_totals_not_the_workflows() -> None:
    found = read(series({"300": 1, "600": 3, "+Inf": 3}, 3, 1200))
    assert (found.jobs, found.jobs_past) == (3, 2)
    assert set(found.not_known) == {"workflows", "pull requests", "branches"}
    assert found.prs is None and found.branches is None
    assert list(found.workflows) == [NO_WORKFLOW] and found.top_workflows() == []
    # None past a longer threshold: still not known, not none.
    calm = read(series({"300": 1, "600": 3, "+Inf": 3}, 3, 1200), threshold_mins=30)
    assert calm.jobs_past == 0 and calm.prs is None and "pull requests" in calm.not_known


odd_numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10_000).map(float)
)
labels = st.fixed_dictionaries(
    {},
    optional={
        "job_workflow_ref": st.sampled_from(
            ["", f"{PULL}@refs/pull/7/merge", "o/r/.github/workflows/trunk.yml@refs/heads/main"]
        ),
        "job_workflow_name": st.sampled_from(["", "nightly", "pull"]),
        "le": st.sampled_from([*(str(b) for b in BOUNDS), "+Inf", "NaN", "-1", "soon", ""]),
    },
)
vector = st.lists(st.tuples(labels, odd_numbers), max_size=12)


def adds_up(found: Waited) -> None:
    assert 0 <= found.jobs_past <= found.jobs
    assert 0 <= found.minutes_past <= found.minutes + 1e-6
    assert sum(t.minutes for t in found.workflows.values()) == pytest.approx(found.minutes)
    assert all(t.jobs_past <= t.jobs for t in found.workflows.values())
    assert all(math.isfinite(n) for n in (found.minutes, found.minutes_past))
    assert found.longest_mins is None or found.longest_mins >= 0


@given(vector, vector, vector, st.sampled_from([0, 1, 5, 30, 90]))
def test_any_answer_from_prometheus_gives_totals_that_add_up(
    buckets: Any, sums: Any, counts: Any, threshold: float
) -> None:
    adds_up(waited_of_buckets(buckets, sums, counts, threshold))


times = st.one_of(
    st.datetimes(
        min_value=datetime(2026, 11, 28, 13),
        max_value=datetime(2026, 11, 28, 16),
        timezones=st.just(UTC),
    ).map(stamp),
    st.sampled_from([None, "", "NaN", "2026-13-01T00:00:00Z", 17, -1.5]),
)
jobs = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "status": st.sampled_from(["queued", "in_progress", "completed", None, 3]),
                "runner_id": st.sampled_from([None, 0, "", 5, "r"]),
                "labels": st.sampled_from([["linux.2xlarge"], [], None, "linux.2xlarge", [3]]),
                "workflow_name": st.sampled_from(["pull", "trunk", "", None, 5]),
                "head_branch": st.sampled_from(["main", "gh/x/1/head", None, ""]),
                "created_at": times,
                "started_at": times,
            },
        ),
        st.sampled_from([None, "job", 3, []]),
    ),
    max_size=15,
)


@given(jobs, st.sampled_from([0, 5, 30]))
def test_any_jobs_from_github_give_totals_that_add_up(found: Any, threshold: float) -> None:
    waited = waited_of_jobs(found, "linux.2xlarge", SINCE, UNTIL, threshold)
    adds_up(waited)
    assert waited.branches is not None and waited.branches <= waited.jobs_past


def test_two_scale_sets_of_one_runner_type_add_up() -> None:
    ref = f"{PULL}@refs/pull/9/merge"
    one = series({"300": 1, "600": 3, "+Inf": 3}, 3, 1200, job_workflow_ref=ref)
    found = read(one, one)
    assert (found.jobs, found.jobs_past, found.prs) == (6, 4, 1)
    assert found.minutes == pytest.approx(40)


# -- The HUD's queued jobs, followed -----------------------------------------------------------

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def left(
    waited_min: float, *, gap_s: float = 60, workflow: str = "pull", pr: bool = True, n: int = 0
) -> LeftJob:
    """A job gone from the HUD's list between T and T + gap, created `waited_min` before the
    gap's middle."""
    middle = T + timedelta(seconds=gap_s / 2)
    return LeftJob(
        runner_type="linux.2xlarge",
        workflow=workflow,
        branch=f"gh/x/{n}/head" if pr else "main",
        pull_request=pr,
        created_at=middle - timedelta(minutes=waited_min),
        last_listed=T,
        gone_by=T + timedelta(seconds=gap_s),
    )


def test_a_job_gone_from_the_hud_waited_to_the_middle_of_the_gap_it_left_in() -> None:
    jobs = [left(12, n=1), left(8, n=2), left(40, workflow="trunk", pr=False)]
    cost = waited_of_left(jobs, "linux.2xlarge", T - HOUR, T + HOUR, 10.0, 5.0)
    assert (cost.source, cost.jobs, cost.jobs_past) == (HUD, 3, 2)
    assert cost.minutes == pytest.approx(60) and cost.minutes_past == pytest.approx(32)
    assert (cost.prs, cost.branches, cost.longest_mins) == (1, 1, pytest.approx(40))
    assert cost.not_known == {} and cost.seen_over_mins == 5.0
    assert [name for name, _ in cost.top_workflows()] == ["trunk", "pull"]


def test_below_the_hud_s_five_minutes_the_jobs_are_not_known() -> None:
    cost = waited_of_left([left(7)], "linux.2xlarge", T - HOUR, T + HOUR, 1.0, 5.0)
    assert cost.not_known == {
        "jobs that waited 1–5 min": "the HUD lists a job only once it has queued 5 min"
    }
    said = cost_said(cost)
    assert "7 job-minutes waited by 1 job queued past 5 min" in said, said
    assert said.endswith(
        "jobs that waited 1–5 min not known: the HUD lists a job only once it has queued 5 min"
    )


def test_a_job_gone_in_a_long_gap_of_readings_is_left_out_and_said() -> None:
    """The HUD unread for 20 minutes: a start could be anywhere in them. Left out, and said, so
    a cost whose jobs all started then never reads as none having waited."""
    jobs = [left(30, gap_s=20 * 60), left(40, gap_s=20 * 60), left(9)]
    cost = waited_of_left(jobs, "linux.2xlarge", T - HOUR, T + HOUR, 5.0, 5.0)
    assert (cost.jobs, cost.unreadable) == (1, 2)
    said = cost_said(cost)
    assert "the waits of 2 jobs not known: they left the HUD's list while it went unread" in said
    alone = cost_said(waited_of_left(jobs[:1], "linux.2xlarge", T - HOUR, T + HOUR, 5.0, 5.0))
    assert alone.startswith("no job queued past 5 min got a runner"), alone
    assert "the waits of 1 job not known" in alone, alone


def test_a_job_github_may_have_ended_at_a_day_is_no_wait() -> None:
    """GitHub ends it 24 h after it was created; the next reading, 10 s later, finds it gone: the
    middle of that gap is under a day, but it may have been GitHub's end, not a runner."""
    ended = left(24 * 60 - 0.25, gap_s=60)  # created 23 h 59 min 45 s before the gap's middle
    cost = waited_of_left([ended], "linux.2xlarge", T - HOUR, T + HOUR, 5.0, 5.0)
    assert (cost.jobs, cost.unreadable) == (0, 0)


def test_an_arc_type_s_waits_count_its_containers_start() -> None:
    """The HUD's query lists an ARC job (a label with `l-`) until its containers have started."""
    job = replace(left(9), runner_type="mt-l-x86iavx512-8-64")
    cost = waited_of_left([job], "mt-l-x86iavx512-8-64", T - HOUR, T + HOUR, 5.0, 5.0)
    assert "containers start, up to 10 min" in cost.not_known["when a runner took each job"]
    plain = waited_of_left([left(9)], "linux.2xlarge", T - HOUR, T + HOUR, 5.0, 5.0)
    assert "when a runner took each job" not in plain.not_known


def test_a_ciflow_tag_counts_as_its_pull_request() -> None:
    """`ciflow/trunk/123` and `ciflow/periodic/123` are two tags of PR 123: one PR, no branch."""
    tags = [
        replace(left(20, pr=False, n=1), branch="ciflow/trunk/123"),
        replace(left(20, pr=False, n=2), branch="ciflow/periodic/123"),
        left(20, n=7),
        left(20, pr=False, n=3),
    ]
    cost = waited_of_left(tags, "linux.2xlarge", T - HOUR, T + HOUR, 5.0, 5.0)
    assert (cost.prs, cost.branches) == (2, 1)


def test_a_job_gone_after_a_day_got_no_runner() -> None:
    """GitHub ends a job no self-hosted runner took in a day; the HUD lists an abandoned run's
    jobs as queued for a week. Neither leaving is a start."""
    jobs = [left(24 * 60), left(6 * 24 * 60), left(9)]
    cost = waited_of_left(jobs, "linux.2xlarge", T - HOUR, T + HOUR, 5.0, 5.0)
    assert (cost.jobs, cost.longest_mins, cost.unreadable) == (1, pytest.approx(9), 0)


left_jobs = st.builds(
    LeftJob,
    runner_type=st.sampled_from(["linux.2xlarge", "other"]),
    workflow=st.text(max_size=5),
    branch=st.text(max_size=5),
    pull_request=st.booleans(),
    created_at=st.datetimes(timezones=st.just(UTC)),
    last_listed=st.datetimes(timezones=st.just(UTC)),
    gone_by=st.datetimes(timezones=st.just(UTC)),
)


@given(st.lists(left_jobs, max_size=20), st.sampled_from([0, 1, 5, 30]))
def test_any_jobs_followed_give_totals_that_add_up(found: list[LeftJob], threshold: float) -> None:
    since, until = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    cost = waited_of_left(found, "linux.2xlarge", since, until, threshold, 5.0)
    assert cost.jobs + cost.unreadable <= len(found)
    assert 0 <= cost.jobs_past <= cost.jobs and 0 <= cost.minutes_past <= cost.minutes
    assert cost.longest_mins is None or cost.longest_mins >= 0
    assert (cost.prs or 0) + (cost.branches or 0) <= cost.jobs_past
    cost_said(cost)
