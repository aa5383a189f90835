"""With `METRICS_BACKEND=github` the capacity report's history is queuepilot's own readings: a
real bot reading a GitHub-shaped API keeps them on its own schedule, with no incident open and
the early warning off, and `/queue report` reads them."""

from __future__ import annotations

from typing import Any

from bot.actions.commands import run_command
from bot.actions.core import Actor
from sandbox.serve import RunningServer
from tests.support.fakes.github_api import FakeGithub
from tests.support.running import eventually, run_bot


async def test_the_readings_are_kept_with_no_incident_and_the_report_reads_them(
    settings_for: Any, github_jobs: tuple[FakeGithub, RunningServer]
) -> None:
    _, server = github_jobs
    settings = settings_for(
        metrics_backend="github",
        github_token="ghp-test",
        github_api_url=server.url,
        github_org="pytorch",
        github_repos="pytorch/pytorch",
        metrics_interval_seconds=1,
        early_warning_minutes=0,  # nothing else reads the fleet on a schedule
    )
    async with run_bot(settings) as running:
        redis, keys = running.bot.redis, running.bot.store.keys

        async def kept() -> list[str]:
            return [k async for k in redis.scan_iter(match=keys.readings_day("*"))]

        await eventually(kept, what="a kept reading, no incident open", timeout=20)
        answer = await run_command(running.bot.core, Actor("U1", "al"), "report")
    assert answer.ok, answer.message
    assert "sampled longest wait p50" in answer.message
    assert "from queuepilot's history" in answer.message
