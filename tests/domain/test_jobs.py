"""The jobs behind a queue: triggers, grouping per runner type and workflow, and the surge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.queue_cost.jobs import (
    Arrivals,
    JobsListing,
    QueuedJob,
    Trigger,
    jobs_view,
    queued_said,
    surging,
    trigger_of,
    trigger_of_hud,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics, with_job_waits

NOW = datetime(2026, 8, 21, 16, 30, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"


def job(
    n: int,
    workflow: str,
    *,
    runner_type: str = GPU,
    waited_mins: float = 10,
    trigger: Trigger = Trigger.PULL_REQUEST,
) -> QueuedJob:
    return QueuedJob(
        runner_type=runner_type,
        workflow=workflow,
        job=f"test ({n})",
        repository="pytorch/pytorch",
        url=f"https://github.com/pytorch/pytorch/actions/runs/1/job/{n}",
        created_at=NOW - timedelta(minutes=waited_mins),
        trigger=trigger,
        run_attempt=1,
        source_id=f"github:{n}",
    )


@pytest.mark.parametrize(
    ("event", "branch", "trigger"),
    [
        ("push", "main", Trigger.MAIN),
        ("push", "master", Trigger.MAIN),
        ("push", "fix-sdpa-mask", Trigger.PUSH),
        ("push", "ciflow/periodic/165432", Trigger.TAG),
        ("pull_request", "gh/someone/123/head", Trigger.PULL_REQUEST),
        ("pull_request_target", "x", Trigger.PULL_REQUEST),
        ("workflow_dispatch", "main", Trigger.DISPATCH),
        ("schedule", "main", Trigger.SCHEDULE),
        ("release", "v2.9.0", Trigger.OTHER),
        (None, None, Trigger.OTHER),
        (12, ["main"], Trigger.OTHER),
    ],
)
def test_a_runs_trigger_from_githubs_event_and_branch(
    event: object, branch: object, trigger: Trigger
) -> None:
    assert trigger_of(event, branch) == trigger


@pytest.mark.parametrize(
    ("source_type", "event", "branch", "trigger"),
    [
        ("main", "push", "main", Trigger.MAIN),
        ("ciflow", "push", "ciflow/periodic/165432", Trigger.TAG),
        ("autorevert", "workflow_dispatch", "trunk/0f1e", Trigger.DISPATCH),
        ("other", "pull_request", "gh/someone/123/head", Trigger.PULL_REQUEST),
        ("other", "schedule", "main", Trigger.SCHEDULE),
        (None, "push", "release/2.9", Trigger.PUSH),
    ],
)
def test_the_huds_source_type_says_the_trigger(
    source_type: object, event: object, branch: object, trigger: Trigger
) -> None:
    assert trigger_of_hud(source_type, event, branch) == trigger


def test_workflows_are_ranked_by_queued_jobs_then_longest_wait() -> None:
    jobs = [
        job(1, "pull", waited_mins=30),
        job(2, "pull", waited_mins=95),
        job(3, "pull", waited_mins=5, trigger=Trigger.TAG),
        job(4, "trunk", waited_mins=200, trigger=Trigger.MAIN),
        job(5, "periodic", waited_mins=300, trigger=Trigger.SCHEDULE),
        job(6, "build", runner_type="linux.2xlarge"),
    ]
    view = jobs_view(JobsListing(tuple(jobs), ghosts=2), Arrivals(), source="GitHub", at=NOW)

    gpu = view.runner_types[GPU]
    assert gpu.queued == 5 and view.ghosts == 2
    assert [w.workflow for w in gpu.workflows] == ["pull", "periodic", "trunk"]
    pull = gpu.workflows[0]
    assert (pull.queued, pull.longest_wait_mins) == (3, 95)
    assert pull.oldest_url.endswith("/job/2"), "the link goes to the job waiting longest"
    assert pull.triggers == ((Trigger.PULL_REQUEST, 2), (Trigger.TAG, 1))
    assert pull.trigger == Trigger.PULL_REQUEST
    assert dict(gpu.triggers) == {
        Trigger.PULL_REQUEST: 2, Trigger.TAG: 1, Trigger.MAIN: 1, Trigger.SCHEDULE: 1
    }  # fmt: skip
    assert view.runner_types["linux.2xlarge"].queued == 1


def test_a_workflow_that_only_arrived_is_listed_after_those_queued() -> None:
    arrivals = Arrivals(last_hour={(GPU, "nightly"): 9}, day_before={(GPU, "nightly"): 8})
    view = jobs_view(JobsListing((job(1, "pull"),)), arrivals, source="ARC", at=NOW)
    assert [w.workflow for w in view.runner_types[GPU].workflows] == ["pull", "nightly"]
    nightly = view.runner_types[GPU].workflows[1]
    assert (nightly.queued, nightly.last_hour, nightly.longest_wait_mins) == (0, 9, None)
    assert nightly.day_before is None, "no history: the day before is not known, not zero"


def many(workflow: str, count: int, trigger: Trigger, start: int = 0) -> list[QueuedJob]:
    return [job(start + n, workflow, trigger=trigger) for n in range(count)]


@pytest.mark.parametrize(
    ("last", "before", "history", "queued", "surge"),
    [
        # Arrivals tripled against the day before: periodic surges.
        (
            {"periodic": 38, "pull": 10},
            {"periodic": 12, "pull": 9},
            True,
            {"periodic": 42},
            "periodic",
        ),
        # Doubled, but by 3 jobs: noise.
        ({"periodic": 6}, {"periodic": 3}, True, {"periodic": 6}, None),
        # Up by 5 but not doubled.
        ({"pull": 25}, {"pull": 20}, True, {"pull": 30}, None),
        # A new workflow (none a day before, others there): it surges.
        ({"nightly": 7, "pull": 10}, {"pull": 10}, True, {"nightly": 7, "pull": 10}, "nightly"),
        # The bigger jump wins.
        ({"a": 20, "b": 60}, {"a": 5, "b": 20}, True, {"a": 1, "b": 1}, "b"),
        # No history: the workflow holding most of the queue.
        ({}, {}, False, {"periodic": 8, "pull": 3}, "periodic"),
        # No history, and nobody holds most of it.
        ({}, {}, False, {"periodic": 5, "pull": 5}, None),
        # No history, a queue too small to say.
        ({}, {}, False, {"periodic": 4}, None),
    ],
)
def test_surging(
    last: dict[str, int],
    before: dict[str, int],
    history: bool,
    queued: dict[str, int],
    surge: str | None,
) -> None:
    jobs: list[QueuedJob] = []
    for workflow, count in queued.items():
        jobs += many(workflow, count, Trigger.SCHEDULE, start=len(jobs))
    arrivals = Arrivals(
        last_hour={(GPU, w): n for w, n in last.items()},
        day_before={(GPU, w): n for w, n in before.items()},
        history=history,
    )
    view = jobs_view(JobsListing(tuple(jobs)), arrivals, source="GitHub", at=NOW)

    found = surging(view, GPU)

    assert (found.workflow if found else None) == surge
    assert surging(view, "linux.unknown") is None


def test_a_surge_says_its_numbers_in_one_line() -> None:
    jobs = many("periodic", 42, Trigger.SCHEDULE) + many("pull", 8, Trigger.PULL_REQUEST, 100)
    arrivals = Arrivals(
        last_hour={(GPU, "periodic"): 38}, day_before={(GPU, "periodic"): 12}, history=True
    )
    view = jobs_view(JobsListing(tuple(jobs)), arrivals, source="GitHub", at=NOW)

    surge = surging(view, GPU)

    assert surge is not None
    assert (surge.runner_type, surge.trigger, surge.queued, surge.share) == (
        GPU, Trigger.SCHEDULE, 42, pytest.approx(0.84)
    )  # fmt: skip
    assert surge.text == (
        "periodic (schedule): 42 jobs queued, 38 arrivals in the last hour against 12 a day "
        "before (3.2×)"
    )


def test_without_history_the_surge_says_its_share() -> None:
    jobs = many("periodic", 8, Trigger.SCHEDULE) + many("pull", 2, Trigger.PULL_REQUEST, 100)
    view = jobs_view(JobsListing(tuple(jobs)), Arrivals(), source="GitHub", at=NOW)
    surge = surging(view, GPU)
    assert surge is not None
    assert surge.text == (
        "periodic (schedule): 8 jobs queued, 80% of the queue (no arrivals recorded a day before "
        "to compare)"
    )


def test_without_history_the_last_hours_arrivals_are_compared_with_nothing() -> None:
    """22 arrived in the last hour and nothing was recorded a day before: not "against none a
    day before", which says none arrived then."""
    jobs = many("periodic", 8, Trigger.SCHEDULE) + many("pull", 2, Trigger.PULL_REQUEST, 100)
    arrivals = Arrivals(last_hour={(GPU, "periodic"): 22}, history=False)
    view = jobs_view(JobsListing(tuple(jobs)), arrivals, source="GitHub", at=NOW)
    surge = surging(view, GPU)
    assert surge is not None
    assert surge.text == (
        "periodic (schedule): 8 jobs queued, 80% of the queue, 22 arrivals in the last hour (no "
        "arrivals recorded a day before to compare)"
    )


def test_a_source_that_lists_only_older_jobs_says_so_with_its_count() -> None:
    jobs = many("periodic", 8, Trigger.SCHEDULE) + many("pull", 2, Trigger.PULL_REQUEST, 100)
    listing = JobsListing(tuple(jobs), listed_over_mins=5)
    view = jobs_view(listing, Arrivals(), source="the HUD", at=NOW)
    surge = surging(view, GPU)
    assert surge is not None
    # 80% of the jobs the source lists, not of the reading's queue it stands beside.
    assert surge.text.startswith(
        "periodic (schedule): 8 jobs waiting over 5 min, 80% of those waiting that long"
    )
    assert queued_said(1, 5) == "1 job waiting over 5 min"
    assert queued_said(40, None) == "40 queued"


@pytest.mark.parametrize(
    ("now", "before", "slower"),
    [
        (40.0, 20.0, True),  # twice as long
        (25.0, 20.0, False),  # 1.25×: within the usual
        (2.5, 1.0, False),  # 2.5× but 1.5 minutes: not what a queue is made of
        (40.0, None, False),  # nothing a day before to compare
    ],
)
def test_whose_jobs_got_slower(now: float, before: float | None, slower: bool) -> None:
    key = ("gpu", "periodic")
    arrivals = Arrivals(
        minutes_last_hour={key: now}, minutes_day_before={key: before} if before else {}
    )
    view = jobs_view(JobsListing(), arrivals, source="github", at=NOW)
    found = view.slower.get("gpu", ())
    assert bool(found) is slower
    if slower:
        assert found[0].text == "periodic jobs take 40 min against 20 a day before (2.0×)"


def test_the_listed_oldest_jobs_age_wins_and_a_type_it_lists_none_of_says_why_it_has_none() -> None:
    """Beside Prometheus: the GPU type's oldest listed job (7 min) is its wait; the 2xlarge type,
    whose jobs the HUD does not list yet (none past its threshold), has no wait this reading and
    says why, never ARC's slowest start (0.6 min) under the oldest job's label; the 4xlarge type,
    queueing nothing, has no wait left over."""
    cpu, idle = "linux.2xlarge", "linux.4xlarge"
    read = {
        GPU: RunnerTypeMetrics(queued=9, longest_wait_mins=3, wait_of_starts=True),
        cpu: RunnerTypeMetrics(queued=12, longest_wait_mins=0.6, wait_of_starts=True),
        idle: RunnerTypeMetrics(queued=0, longest_wait_mins=4, wait_of_starts=True),
    }
    fleet = FleetSnapshot(at=NOW, source="prometheus", runner_types=read)
    listing = JobsListing((job(1, "pull", waited_mins=7),), listed_over_mins=5)
    jobs = jobs_view(listing, Arrivals(), source="the HUD", at=NOW)
    waits = with_job_waits(fleet, jobs, "the HUD")
    found = {n: (m.longest_wait_mins, m.wait_of_starts) for n, m in waits.runner_types.items()}
    assert found == {GPU: (7, None), cpu: (None, None), idle: (None, None)}
    said = waits.runner_types[cpu].wait_unknown
    assert said == "the HUD lists none of them yet (it lists a job once it has queued 5 min)"
