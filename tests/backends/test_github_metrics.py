"""The `github` backend against a local server shaped like GitHub's REST API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import suppress
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bot.backends.github_api import EtagCache, GithubApi
from bot.backends.http import BackendError
from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.github_jobs import fleet_of, queued_jobs_of
from bot.config import Settings
from bot.config.memory import cache_bytes
from bot.domain.queue_cost.jobs import Trigger
from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.github_api import FakeGithub

NOW = datetime.now(UTC).replace(microsecond=0)
GPU, CPU = "linux.g5.4xlarge.nvidia.gpu", "linux.2xlarge"


def ago(minutes: int) -> str:
    return (NOW - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def github() -> Iterator[tuple[FakeGithub, RunningServer]]:
    fake = FakeGithub()
    server = serve_in_thread(fake.app)
    fake.base_url = server.url
    # Five runners over three pages: the client must follow `link` to see them all.
    fake.runner(1, "AWS:us-east-1", GPU, busy=True)
    fake.runner(2, "AWS:us-east-1", GPU, busy=True)
    fake.runner(3, "AWS:us-east-1", GPU, status="offline")
    fake.runner(4, CPU, busy=False)
    fake.runner(5, CPU, busy=True)
    job = FakeGithub.job
    fake.run("pytorch/pytorch", 11, "in_progress", [
        job(101, [GPU], "in_progress", ago(50)),
        job(102, [GPU], "queued", ago(114)),  # the oldest: the longest wait
        job(103, ["self-hosted", GPU], "queued", ago(30)),
    ])  # fmt: skip
    fake.run("pytorch/pytorch", 12, "queued", [job(104, [CPU], "queued", ago(3))])
    fake.run("pytorch/vision", 13, "queued", [job(105, [GPU], "queued", ago(71))])
    for run in [run for runs in fake.runs.values() for run in runs]:
        run["updated_at"] = ago(1)  # before the tests' readings
    try:
        yield fake, server
    finally:
        server.stop()


def config_of(server: RunningServer, **settings: object) -> Settings:
    values: dict[str, object] = {
        "github_token": "ghp-test",
        "github_api_url": server.url,
        "github_org": "pytorch",
        "github_repos": ("pytorch/pytorch", "pytorch/vision"),
        **settings,
    }
    return Settings(**values)  # type: ignore[arg-type]


def backend(server: RunningServer, *, max_pages: int = 20, **settings: object) -> GithubMetrics:
    return GithubMetrics(config_of(server, **settings), max_pages=max_pages)


async def test_queued_jobs_and_runners_per_label(github: tuple[FakeGithub, RunningServer]) -> None:
    fake, server = github
    metrics = backend(server)
    snap = await metrics.read(now=NOW)
    await metrics.aclose()
    gpu, cpu = snap.runner_types[GPU], snap.runner_types[CPU]
    assert gpu.queued == 3 and gpu.longest_wait_mins == pytest.approx(114)
    assert (gpu.registered, gpu.busy, gpu.idle, gpu.offline) == (3, 2, 0, 1)
    assert cpu.queued == 1 and cpu.longest_wait_mins == pytest.approx(3)
    assert (cpu.registered, cpu.busy, cpu.idle) == (2, 1, 1)
    assert "AWS:us-east-1" not in snap.runner_types  # a runner's label, not a type jobs ask for
    # The runners' later pages were read where `link` pointed, not where we would have guessed.
    assert any("/organizations/1/actions/runners" in call for call in fake.calls)


async def test_a_type_with_no_job_left_is_empty_only_when_every_listing_was_read_whole(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    fake, server = github
    fake.runs["pytorch/pytorch"] = [r for r in fake.runs["pytorch/pytorch"] if r["id"] != 12]
    metrics = backend(server)
    snap = await metrics.read(now=NOW)
    # CPU's only job finished: it is not in the reading, and every run was listed to the end.
    assert CPU not in snap.runner_types and snap.absent_means_empty
    await metrics.aclose()
    # One page per listing: run 11's three jobs are cut after two. A type could hide there.
    cut = backend(server, max_pages=1)
    snap = await cut.read(now=NOW)
    assert snap.runner_types[GPU].queued == 2 and not snap.absent_means_empty
    await cut.aclose()
    # Only the org's runners, no repository's jobs: nothing was listed that absence could mean.
    runners_only = backend(server, github_repos=())
    snap = await runners_only.read(now=NOW)
    assert snap.runner_types == {} and not snap.absent_means_empty
    await runners_only.aclose()


async def test_a_run_listing_cut_by_githubs_cap_is_not_complete() -> None:
    # GitHub answers at most 1,000 runs for a listing filtered by `status`: the `link` chain
    # ends there while `total_count` still counts them all. Here: one page of one run, of 1,500.
    total = [1500]

    async def capped(request: Request) -> JSONResponse:
        run = {"id": 1, "url": f"{request.base_url}repos/o/r/actions/runs/1"}
        return JSONResponse({"total_count": total[0], "workflow_runs": [run]})

    async def no_jobs(request: Request) -> JSONResponse:
        return JSONResponse({"total_count": 0, "jobs": []})

    async def no_runners(request: Request) -> JSONResponse:
        return JSONResponse({"total_count": 0, "runners": []})

    routes = [
        Route("/repos/o/r/actions/runs", capped),
        Route("/repos/o/r/actions/runners", no_runners),
        Route("/repos/o/r/actions/runs/1/jobs", no_jobs),
    ]
    server = serve_in_thread(Starlette(routes=routes))
    metrics = GithubMetrics(
        Settings(github_token="t", github_api_url=server.url, github_repos=("o/r",))
    )
    try:
        listing = await metrics.api.pages("/repos/o/r/actions/runs?status=queued", "workflow_runs")
        assert len(listing.items) == 1 and not listing.complete
        assert not (await metrics.read(now=NOW)).absent_means_empty
        # The same run, all of it: the reading may say a type with no job has none queued.
        total[0] = 1
        assert (await metrics.read(now=NOW)).absent_means_empty
    finally:
        await metrics.aclose()
        server.stop()


async def test_unchanged_pages_are_asked_with_their_etag_and_cost_no_quota(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    fake, server = github
    metrics = backend(server)
    first = await metrics.read(now=NOW)
    spent, asked = 5000 - fake.remaining, len(fake.calls)
    second = await metrics.read(now=NOW)
    assert second == first
    # Unchanged runs' jobs are not asked again at all; every listing page answered 304.
    again = fake.calls[asked:]
    assert again and not [url for url in again if "/jobs" in url]
    assert metrics.api.not_modified == len(again)
    assert 5000 - fake.remaining == spent
    await metrics.aclose()


async def test_a_job_that_changed_unseen_in_its_runs_listing_is_seen_in_ten_minutes(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    """GitHub moves a run's `updated_at` when its jobs change, but not always: every run in
    progress is read again after ten minutes even when its entry stands. A job that started
    leaves the queue; one that newly queued, in a run whose jobs all ran, joins it."""
    fake, server = github
    job = FakeGithub.job
    fake.run("pytorch/pytorch", 14, "in_progress", [job(106, [CPU], "in_progress", ago(20))])
    fake.runs["pytorch/pytorch"][-1]["updated_at"] = ago(1)
    metrics = backend(server)
    first = await metrics.read(now=NOW)
    assert (first.runner_types[GPU].queued, first.runner_types[CPU].queued) == (3, 1)
    runs = {r["id"]: r for r in fake.runs["pytorch/pytorch"]}
    runs[11]["jobs"][1].update(status="in_progress", runner_id=78, runner_name="i-78")
    runs[14]["jobs"].append(job(107, [CPU], "queued", ago(1)))
    asked = len(fake.calls)
    later = await metrics.read(now=NOW + timedelta(minutes=9))
    assert (later.runner_types[GPU].queued, later.runner_types[CPU].queued) == (3, 1)
    assert not [url for url in fake.calls[asked:] if "/jobs" in url], "entries unchanged"
    asked = len(fake.calls)
    later = await metrics.read(now=NOW + timedelta(minutes=10))
    assert (later.runner_types[GPU].queued, later.runner_types[CPU].queued) == (2, 2)
    # Only those runs: the queued runs, whose own status moves when a job starts, are not asked.
    jobs_of = {url.split("/runs/")[1].split("/")[0] for url in fake.calls[asked:] if "/jobs" in url}
    assert jobs_of == {"11", "14"}
    await metrics.aclose()


async def test_a_run_that_changes_again_in_the_second_it_was_read_is_read_again(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    """GitHub's `updated_at` has whole seconds: a job that starts in the second a reading read
    its run leaves the entry as it was. Such a run is read again at the next reading."""
    fake, server = github
    [run] = [r for r in fake.runs["pytorch/pytorch"] if r["id"] == 11]
    run["updated_at"] = ago(0)  # it changed in the second of the reading
    metrics = backend(server)
    assert (await metrics.read(now=NOW)).runner_types[GPU].queued == 3
    run["jobs"][1].update(status="in_progress", runner_id=78, runner_name="i-78")
    assert (await metrics.read(now=NOW + timedelta(minutes=1))).runner_types[GPU].queued == 2
    await metrics.aclose()


class Clock:
    """The GitHub client's clock, moved by the test: waits of minutes without waiting."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


def backend_at(server: RunningServer, clock: Clock) -> GithubMetrics:
    config = config_of(server)
    return GithubMetrics(config, GithubApi(config, clock=clock))


async def held_for(
    metrics: GithubMetrics, clock: Clock, at_least: float, at_most: float | None = None
) -> None:
    """No call is sent for `at_least` after the last limit was met; by `at_most` (a backoff's
    jittered wait lies between), calls are sent again (and meet the limit again, while the fake
    keeps it). A time GitHub names is waited exactly."""
    at_most = at_least if at_most is None else at_most
    sent = metrics.api.calls
    clock.now += at_least - 1
    left = "1 s" if at_most == at_least else "[0-9]+ s"
    with pytest.raises(BackendError, match=rf"rate limit: no calls until .*\(another {left}\)"):
        await metrics.read(now=NOW)
    assert metrics.api.calls == sent, f"held for {at_least:g} s"
    clock.now += at_most - at_least + 1
    with suppress(BackendError):
        await metrics.read(now=NOW)
    assert metrics.api.calls > sent, f"asked again by {at_most:g} s"


async def limited(metrics: GithubMetrics, match: str = "secondary rate limit") -> None:
    with pytest.raises(BackendError, match=match) as caught:
        await metrics.read(now=NOW)
    assert caught.value.retryable


async def test_a_rate_limit_stops_every_call_until_githubs_reset(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    fake, server = github
    clock = Clock()
    metrics = backend_at(server, clock)
    fake.limit, fake.reset_at = "primary", int(clock.now) + 600
    await limited(metrics, "rate limit is exhausted until")
    fake.limit = None
    await held_for(metrics, clock, 600)
    await metrics.aclose()


@pytest.mark.parametrize("status", [403, 429])
async def test_secondary_limits_in_a_row_wait_a_minute_then_twice_as_long_each(
    github: tuple[FakeGithub, RunningServer], status: int
) -> None:
    """GitHub: at least a minute, then exponentially longer while it continues (each wait
    between half its step and the step). Every read sends calls together: those that meet the
    same limit count once."""
    fake, server = github
    clock = Clock()
    metrics = backend_at(server, clock)
    fake.limit, fake.limit_status = "secondary", status
    await limited(metrics)
    for step in (120, 240, 480, 900, 900, 900):
        await held_for(metrics, clock, step / 2, step)
    await metrics.aclose()


async def test_a_secondary_limit_waits_retry_after_when_it_gives_one(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    fake, server = github
    clock = Clock()
    metrics = backend_at(server, clock)
    fake.limit, fake.retry_after = "secondary", 30
    await limited(metrics)
    await held_for(metrics, clock, 30)  # as asked, however many in a row
    await held_for(metrics, clock, 30)
    fake.retry_after = None
    await held_for(metrics, clock, 30)
    fake.limit = None
    await held_for(metrics, clock, 450, 900)  # the fourth in a row names no time: doubled, capped
    assert (await metrics.read(now=NOW)).runner_types[GPU].queued == 3
    await metrics.aclose()


async def test_a_secondary_limit_with_the_quota_spent_waits_for_the_reset(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    fake, server = github
    clock = Clock()
    metrics = backend_at(server, clock)
    fake.limit, fake.remaining, fake.reset_at = "secondary", 0, int(clock.now) + 1800
    await limited(metrics)
    await held_for(metrics, clock, 1800)
    await metrics.aclose()


async def test_an_answer_after_secondary_limits_starts_the_wait_again_at_a_minute(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    fake, server = github
    clock = Clock()
    metrics = backend_at(server, clock)
    fake.limit = "secondary"
    await limited(metrics)
    await held_for(metrics, clock, 60, 120)
    fake.limit = None
    await held_for(metrics, clock, 120, 240)  # the calls sent then are answered
    assert (await metrics.read(now=NOW)).runner_types[GPU].queued == 3
    fake.limit = "secondary"
    await limited(metrics)
    await held_for(metrics, clock, 60, 120)
    await metrics.aclose()


async def test_calls_waiting_for_a_slot_see_a_limit_met_meanwhile(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    """A sibling call sent before the limit was known may still reach the fake after the first
    read ends; the second read asks for another repository, so its calls stand out."""
    fake, server = github
    clock = Clock()
    metrics = backend_at(server, clock)
    fake.limit, fake.retry_after, fake.limit_status = "secondary", 3, 429
    await limited(metrics)
    fake.limit = None
    second = GithubMetrics(
        Settings(github_token="ghp-test", github_api_url=server.url, github_repos="pytorch/second"),
        metrics.api,
    )
    with pytest.raises(BackendError, match="rate limit"):
        await second.read(now=NOW)
    assert not [c for c in fake.calls if "pytorch/second" in c], "no call before Retry-After"
    await metrics.aclose()


async def test_a_token_without_permission_is_a_clear_refusal(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    _, server = github
    metrics = backend(server, github_token="wrong")
    with pytest.raises(BackendError, match="GitHub answered 401: Bad credentials") as caught:
        await metrics.read(now=NOW)
    assert not caught.value.retryable
    await metrics.aclose()


def test_the_link_header_of_githubs_docs_gives_the_next_page() -> None:
    header = (
        '<https://api.github.com/repositories/1300192/issues?page=2>; rel="prev", '
        '<https://api.github.com/repositories/1300192/issues?page=4>; rel="next", '
        '<https://api.github.com/repositories/1300192/issues?page=515>; rel="last", '
        '<https://api.github.com/repositories/1300192/issues?page=1>; rel="first"'
    )
    links = httpx.Response(200, headers={"link": header}).links
    assert links["next"]["url"] == "https://api.github.com/repositories/1300192/issues?page=4"
    assert (
        "next"
        not in httpx.Response(200, headers={"link": '<https://x/?page=1>; rel="first"'}).links
    )


json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12)
labels = st.lists(
    st.sampled_from(["self-hosted", "Linux", GPU, CPU, "X64", ""]) | json_scalars, max_size=4
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "labels": labels | json_scalars,
                "status": st.sampled_from(["queued", "in_progress", "completed"]) | json_scalars,
                "created_at": st.sampled_from([ago(5), "not a time", "2026-02-30T00:00:00Z"])
                | json_scalars,
                "runner_id": json_scalars,
            },
        )
        | json_scalars,
        max_size=6,
    ),
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "labels": st.lists(
                    st.fixed_dictionaries({}, optional={"name": json_scalars}) | json_scalars,
                    max_size=3,
                )
                | json_scalars,
                "status": json_scalars,
                "busy": json_scalars,
            },
        )
        | json_scalars,
        max_size=6,
    ),
)
def test_any_jobs_and_runners_give_a_reading_never_an_exception(jobs: list, runners: list) -> None:
    snap = fleet_of(jobs, runners, now=NOW)
    for metrics in snap.runner_types.values():
        assert metrics.queued is not None and metrics.queued >= 0
        assert metrics.longest_wait_mins is None or metrics.longest_wait_mins >= 0


# -- the jobs behind the queue ----------------------------------------------------------------


@pytest.fixture
def github_jobs() -> Iterator[tuple[FakeGithub, RunningServer]]:
    """A queue of three workflows over pages of two, with two ghosts: a job whose run has
    completed (the `?status=` listing lags behind), and a queued job already concluded."""
    fake = FakeGithub()
    server = serve_in_thread(fake.app)
    fake.base_url = server.url
    fake.runner(1, GPU, busy=True)
    job = FakeGithub.job
    fake.run("pytorch/pytorch", 21, "in_progress", [
        job(201, [GPU], "in_progress", ago(50)),
        job(202, [GPU], "queued", ago(40), name="linux-jammy / test (1, 5)"),
        job(203, ["self-hosted", GPU], "queued", ago(95), name="linux-jammy / test (2, 5)"),
    ])  # fmt: skip
    fake.run(
        "pytorch/pytorch", 22, "queued",
        [job(300 + n, [GPU], "queued", ago(20 + n), name=f"periodic-test ({n})") for n in range(5)],
        name="periodic", event="schedule", head_branch="main",
    )  # fmt: skip
    fake.run(
        "pytorch/pytorch", 23, "queued", [job(401, [CPU], "queued", ago(12), name="build")],
        name="trunk", event="push", head_branch="main", run_attempt=2,
    )  # fmt: skip
    fake.run(
        "pytorch/pytorch", 24, "completed", [job(501, [GPU], "queued", ago(300))],
        conclusion="cancelled", listed_as="in_progress",
    )  # fmt: skip
    fake.run(
        "pytorch/vision", 25, "queued", [job(601, [GPU], "queued", ago(8), conclusion="skipped")]
    )
    try:
        yield fake, server
    finally:
        server.stop()


async def test_queued_jobs_name_their_workflow_trigger_and_link(
    github_jobs: tuple[FakeGithub, RunningServer],
) -> None:
    _, server = github_jobs
    metrics = backend(server)

    listing = await metrics.queued_jobs(now=NOW)
    await metrics.aclose()

    by_id = {job.source_id: job for job in listing.jobs}
    # Every page of runs and jobs was followed; the two ghosts are left out and counted.
    assert len(by_id) == 2 + 5 + 1 and listing.ghosts == 2 and listing.complete
    oldest = by_id["github:203"]
    assert (oldest.runner_type, oldest.workflow, oldest.trigger) == (
        GPU,
        "pull",
        Trigger.PULL_REQUEST,
    )
    assert (oldest.job, oldest.repository) == (
        "linux-jammy / test (2, 5)",
        "pytorch/pytorch",
    )
    assert oldest.url == "https://github.com/pytorch/pytorch/actions/runs/21/job/203"
    assert oldest.wait_mins(NOW) == 95
    periodic = [job for job in listing.jobs if job.workflow == "periodic"]
    assert len(periodic) == 5 and {job.trigger for job in periodic} == {Trigger.SCHEDULE}
    trunk = by_id["github:401"]
    assert (trunk.runner_type, trunk.trigger, trunk.run_attempt) == (CPU, Trigger.MAIN, 2)


async def test_jobs_that_ran_to_their_end_say_how_long_they_took(
    github_jobs: tuple[FakeGithub, RunningServer],
) -> None:
    """A run in progress lists its finished jobs beside its queued ones: their minutes are what
    "whose jobs got slower" compares. A job cancelled before any runner took it says nothing."""
    fake, server = github_jobs
    job = FakeGithub.job
    fake.run("pytorch/pytorch", 26, "in_progress", [
        job(701, [GPU], "completed", ago(90), started_at=ago(85), completed_at=ago(45),
            conclusion="success"),
        job(702, [GPU], "completed", ago(90), completed_at=ago(80), conclusion="cancelled")
        | {"runner_id": None},
        job(703, [GPU], "queued", ago(5)),
    ], name="periodic", event="schedule", head_branch="main")  # fmt: skip
    metrics = backend(server)
    listing = await metrics.queued_jobs(now=NOW)
    await metrics.aclose()
    (finished,) = listing.finished
    assert (finished.runner_type, finished.workflow, finished.minutes) == (GPU, "periodic", 40)
    assert finished.source_id == "github:701"


async def test_a_jobs_listing_after_a_reading_reuses_its_calls(
    github_jobs: tuple[FakeGithub, RunningServer],
) -> None:
    fake, server = github_jobs
    metrics = backend(server)
    await metrics.read(now=NOW)
    calls = len(fake.calls)

    # Within the reading's interval: its listing, no call at all.
    listing = await metrics.queued_jobs(now=NOW + timedelta(seconds=59))
    assert len(listing.jobs) == 8 and len(fake.calls) == calls

    # Past it, the runs are listed again with their ETags: 304s, no quota; no runner is asked.
    spent = 5000 - fake.remaining
    assert len((await metrics.queued_jobs(now=NOW + timedelta(seconds=60))).jobs) == 8
    assert 5000 - fake.remaining == spent and metrics.api.not_modified > 0
    assert not any("/runners" in call for call in fake.calls[calls:])
    await metrics.aclose()


runs_and_jobs = st.tuples(
    st.dictionaries(
        json_scalars,
        st.fixed_dictionaries(
            {},
            optional={
                "name": json_scalars,
                "event": st.sampled_from(["push", "schedule", "pull_request"]) | json_scalars,
                "head_branch": st.sampled_from(["main", "ciflow/trunk/1"]) | json_scalars,
                "status": st.sampled_from(["completed", "queued"]) | json_scalars,
                "conclusion": json_scalars,
                "repository": st.fixed_dictionaries({}, optional={"full_name": json_scalars})
                | json_scalars,
                "url": json_scalars,
            },
        )
        | json_scalars,
        max_size=3,
    ),
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "id": json_scalars,
                "run_id": json_scalars,
                "labels": st.lists(json_scalars, max_size=3) | json_scalars,
                "status": st.just("queued") | json_scalars,
                "conclusion": json_scalars,
                "created_at": st.sampled_from([ago(5), "not a time"]) | json_scalars,
                "run_attempt": json_scalars,
                "html_url": json_scalars,
                "name": json_scalars,
                "workflow_name": json_scalars,
                "runner_name": json_scalars,
            },
        )
        | json_scalars,
        max_size=6,
    ),
)


@given(runs_and_jobs)
def test_any_runs_and_jobs_give_a_listing_never_an_exception(given_: tuple) -> None:
    runs, jobs = given_
    listing = queued_jobs_of(runs, jobs)
    queued = [j for j in jobs if isinstance(j, dict) and j.get("status") == "queued"]
    assert len(listing.jobs) + listing.ghosts <= len(queued)
    for job in listing.jobs:
        assert job.runner_type and job.workflow and job.source_id.startswith("github:")
        assert isinstance(job.trigger, Trigger) and job.wait_mins(NOW) >= 0
    assert listing.runners is not None
    assert all(isinstance(r, str) and r and w for r, w in listing.runners.items())


def test_the_jobs_that_ran_name_their_runners_workflow_and_a_queued_job_none() -> None:
    """ARC registers a runner under its pod's name: a killed pod's job is found by it."""
    job = FakeGithub.job
    runs = {1: {"id": 1, "name": "pull"}, 2: {"id": 2, "name": "trunk"}}
    jobs = [
        {**job(11, ["linux.2xlarge"], "completed", ago(20), runner_name="arc-runner-k7x2p",
               conclusion="failure", completed_at=ago(2)), "run_id": 1},
        {**job(12, ["linux.2xlarge"], "in_progress", ago(9), runner_name="arc-runner-m4q9z"),
         "run_id": 2},
        {**job(13, ["linux.2xlarge"], "queued", ago(1)), "run_id": 2},
    ]  # fmt: skip
    listing = queued_jobs_of(runs, jobs)
    assert listing.runners == {"arc-runner-k7x2p": "pull", "arc-runner-m4q9z": "trunk"}


@pytest.mark.parametrize(("entries", "size"), [(8, 1 << 20), (100, 2048)])  # each bound binds
async def test_the_etag_cache_stays_within_its_bounds_and_a_hot_page_keeps_its_304(
    github: tuple[FakeGithub, RunningServer], entries: int, size: int
) -> None:
    """Runs come and go: their `/jobs` pages are read once and never again. The cache keeps the
    most recently read within its entries and bytes, so memory stays flat, and a page read every
    time (the runners) still answers 304."""
    fake, server = github
    for n in range(40):
        job = FakeGithub.job(5000 + n, [CPU], "queued", ago(1))
        fake.run("pytorch/pytorch", 1000 + n, "queued", [job])
    api = GithubApi(config_of(server))
    api.etags = EtagCache(max_entries=entries, max_bytes=size)
    hot = "/orgs/pytorch/actions/runners?per_page=100"
    try:
        for n in range(40):
            await api.get(hot)
            await api.get(f"/repos/pytorch/pytorch/actions/runs/{1000 + n}/jobs")
            assert len(api.etags) <= entries and api.etags.bytes <= size
        assert len(api.etags) < 10  # the runs' pages were let go
        before = api.not_modified
        await api.get(hot)
        assert api.not_modified == before + 1
    finally:
        await api.aclose()


async def test_under_a_small_memory_limit_the_pages_stay_within_the_readings_share(
    github: tuple[FakeGithub, RunningServer],
) -> None:
    """MEMORY_LIMIT_MIB=128 gives the readings' pages their 2 MiB floor: 60 runs' `/jobs` pages
    of 50 kB each (3 MB) are read, the cache never holds more than its share, and the page read
    every time (the runners) still answers 304."""
    fake, server = github
    steps = [{"name": f"step {n}", "status": "queued", "number": n} for n in range(1000)]
    for n in range(60):
        job = {**FakeGithub.job(6000 + n, [CPU], "queued", ago(1)), "steps": steps}
        fake.run("pytorch/pytorch", 2000 + n, "queued", [job])
    share = cache_bytes(128)["github_readings"]
    api = GithubApi(config_of(server), cache_size=share)
    hot = "/orgs/pytorch/actions/runners?per_page=100"
    try:
        assert api.etags.max_bytes == share <= 2 * 1024 * 1024
        for n in range(60):
            await api.get(hot)
            await api.get(f"/repos/pytorch/pytorch/actions/runs/{2000 + n}/jobs")
            assert api.etags.bytes <= share
        assert api.etags.bytes > share - 100_000  # full: the oldest pages went to make room
        before = api.not_modified
        await api.get(hot)
        assert api.not_modified == before + 1
    finally:
        await api.aclose()
