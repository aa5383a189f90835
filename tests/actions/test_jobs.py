"""`/queue jobs [runner-type]` end to end: the command, the action, a GitHub-shaped API (or the
HUD's, or the alert backend), the arrival history on a real Redis, and the answer a responder
reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.actions.commands import MAX_ANSWER, run_command
from bot.actions.core import ActionCore, Actor
from bot.backends.metrics import AlertMetrics, QueueMetrics
from bot.backends.metrics.github import GithubMetrics
from bot.backends.metrics.hud import HudMetrics
from bot.config import Settings
from bot.domain.queue_cost.jobs import Arrivals, JobsListing, QueuedJob, Trigger, jobs_view
from bot.render.jobs import render_jobs
from bot.storage.fleet import JobArrivals
from bot.storage.incident_store import IncidentStore
from sandbox.serve import RunningServer, serve_in_thread
from tests.support.cores import action_core
from tests.support.fakes.github_api import FakeGithub
from tests.support.fakes.hud_api import FakeHud
from tests.support.jobs import CPU, GPU, github_metrics
from tests.support.running import eventually, run_bot
from tests.support.slack import Slack, ephemeral_texts, post_event, slash

AL = Actor("U1", "al")


def core_on(redis: Redis, metrics: QueueMetrics) -> ActionCore:
    return action_core(redis, IncidentStore(redis, "qp"), metrics=metrics)


async def test_queue_jobs_names_the_workflows_grouped_by_trigger_with_links(
    redis: Redis, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    _, server = github_jobs
    core = core_on(redis, github_metrics(server))

    outcome = await run_command(core, AL, "jobs")

    text = outcome.message
    assert outcome.ok and len(text) <= MAX_ANSWER
    # The worst queue first, its workflows under what triggered them.
    assert text.index(f"*`{GPU}`* · 40 queued") < text.index(f"*`{CPU}`* · 1 queued")
    assert "  _schedule_\n    • `periodic` — 38 queued" in text
    assert "  _pull request_\n    • `pull` — 2 queued, longest wait 1 h 35 min" in text
    assert (
        "<https://github.com/pytorch/pytorch/actions/runs/32/job/3201|linux-jammy / test (1, 5)>"
        in text
    )
    assert "1 ghost job left out" in text
    assert "No arrivals recorded a day before yet" in text


async def test_queue_jobs_for_one_runner_type_and_what_changed_since_yesterday(
    redis: Redis, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    _, server = github_jobs
    core = core_on(redis, github_metrics(server))
    # The same hour a day before: 12 periodic jobs arrived.
    yesterday = datetime.now(UTC) - timedelta(days=1)
    before = [
        QueuedJob(GPU, "periodic", "test", "pytorch/pytorch", "", yesterday, Trigger.SCHEDULE, 1,
                  f"github:y{n}")
        for n in range(12)
    ]  # fmt: skip
    await JobArrivals(redis, IncidentStore(redis, "qp").keys).record(before, now=yesterday)

    outcome = await run_command(core, AL, f"jobs {GPU}")
    assert outcome.ok and CPU not in outcome.message
    assert (
        "📈 *What changed:* periodic (schedule): 38 jobs queued, 38 arrivals in the last hour "
        "against 12 a day before (3.2×)"
    ) in outcome.message
    assert "· 38 arrived in the last hour (12 a day before)" in outcome.message
    assert "No arrivals recorded a day before" not in outcome.message


def hud_row(n: int, workflow: str, queue_s: int) -> dict[str, Any]:
    """A row of the HUD's `queued_jobs`, which lists only jobs queued over 5 minutes."""
    return {
        "queue_s": queue_s,
        "name": f"{workflow} / linux-jammy-py3.10-gcc11 / test (default, {n}, 7)",
        "html_url": f"https://github.com/pytorch/pytorch/actions/runs/5/job/{n}",
        "machine_type": "linux.2xlarge",
        "head_sha": "3f1e0c2a9b7d4e5f60718293a4b5c6d7e8f90123",
        "head_branch": "gh/someone/123/head",
        "event": "pull_request",
        "source_type": "other",
        "ciflow_id": None,
    }


@pytest.fixture
def hud_jobs() -> Iterator[tuple[FakeHud, RunningServer]]:
    """The HUD listing six of one workflow's jobs and one of another's, on `linux.2xlarge`."""
    fake = FakeHud()
    fake.rows["queued_jobs"] = [hud_row(n, "pull", 400 + 60 * n) for n in range(6)]
    fake.rows["queued_jobs"].append(hud_row(9, "trunk", 1200))
    with serve_in_thread(fake.app) as server:
        yield fake, server


HUD_LIMIT = "7 jobs waiting over 5 min (the HUD lists only those)"


async def test_jobs_from_the_hud_say_they_are_only_those_waiting_over_5_min(
    redis: Redis, hud_jobs: tuple[FakeHud, RunningServer]
) -> None:
    """Beside Prometheus' 22 queued, the HUD's "7 queued" read as the same count; and before a
    day of history, the arrivals were said "against none a day before" beside "No arrivals
    recorded a day before"."""
    fake, server = hud_jobs
    core = core_on(redis, HudMetrics(Settings(hud_url=server.url, hud_token=fake.token)))

    text = (await run_command(core, AL, "jobs")).message

    assert f"*`linux.2xlarge`* · {HUD_LIMIT} · pull request 7" in text
    assert "    • `pull` — 6 jobs waiting over 5 min, longest wait 11 min" in text
    assert (
        "📈 *Most of the queue:* pull (pull request): 6 jobs waiting over 5 min, 86% of those "
        "waiting that long, 6 arrivals in the last hour (no arrivals recorded a day before to "
        "compare)"
    ) in text
    assert "No arrivals recorded a day before yet" in text
    assert "against none a day before" not in text and "What changed" not in text
    other = (await run_command(core, AL, "jobs linux.arm64")).message
    assert "*`linux.arm64`*: no jobs waiting over 5 min seen (the HUD lists only those)" in other


async def test_queue_jobs_from_the_hud_in_slack(
    settings_for: Callable[..., Settings], slack: Slack, hud_jobs: tuple[FakeHud, RunningServer]
) -> None:
    fake, server = hud_jobs
    settings = settings_for(jobs_backend="hud", hud_url=server.url, hud_token=fake.token)
    async with run_bot(settings) as running:
        await post_event(running.http, slash("jobs"))
        [answer] = await eventually(lambda: ephemeral_texts(slack), what="the answer")
    assert HUD_LIMIT in answer


async def test_a_listing_that_fails_says_why(redis: Redis) -> None:
    config = Settings(github_token="x", github_api_url="http://127.0.0.1:9", github_repos="a/b")
    metrics = GithubMetrics(config)
    outcome = await run_command(core_on(redis, metrics), AL, "jobs")
    assert not outcome.ok and outcome.message.startswith("No queued jobs to show: GitHub")


async def test_without_a_source_of_jobs_the_answer_says_which_backends_list_them(
    redis: Redis,
) -> None:
    outcome = await run_command(core_on(redis, AlertMetrics()), AL, "jobs")
    assert not outcome.ok
    assert "`JOBS_BACKEND=github` or `hud`" in outcome.message


def hostile_view(types: int, workflows: int) -> tuple[list[str], object]:
    now = datetime.now(UTC)
    jobs = [
        QueuedJob(
            runner_type=f"<!channel> type {t}" + "x" * 200,
            workflow=f"<@U123> & wf {w}" + "y" * 300,
            job="<https://evil.example|click> " + "z" * 300,
            repository="o/r",
            url=f"https://github.com/o/r/actions/runs/1/job/{t}{w}?a=1&b=<2>",
            created_at=now - timedelta(minutes=w),
            trigger=Trigger.PULL_REQUEST,
            run_attempt=1,
            source_id=f"github:{t}:{w}",
        )
        for t in range(types)
        for w in range(workflows)
    ]
    view = jobs_view(
        JobsListing(tuple(jobs), ghosts=3, note="<!here> " * 200),
        Arrivals(),
        source="GitHub",
        at=now,
    )
    return sorted(view.runner_types), view


@pytest.mark.parametrize(("types", "workflows"), [(1, 1), (3, 40), (30, 30)])
def test_any_names_stay_inert_and_within_slacks_limits(types: int, workflows: int) -> None:
    names, view = hostile_view(types, workflows)

    text = render_jobs(view, names, limit=MAX_ANSWER)  # type: ignore[arg-type]

    assert len(text) <= MAX_ANSWER
    assert "<!channel>" not in text and "<!here>" not in text and "<@U123>" not in text
    assert "<https://evil.example" not in text
