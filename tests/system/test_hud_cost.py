"""What the queue cost, read from a HUD: its `queued_jobs` query run over a table of GitHub's
jobs as its SQL does (queued past 5 minutes, the longest first), the bot following each listed job
across its readings until it leaves the list. Jobs get runners in batches while the incident is
open; the summary and the postmortem say what they waited, in one sentence, against the truth
the table knows, and the dashboards' counters count it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sandbox.serve import RunningServer, serve_in_thread
from tests.support.fakes.hud_api import FakeHud
from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack, post_event, shown, slash

GPU, CPU = "linux.g5.4xlarge.nvidia.gpu", "linux.4xlarge"
RUNS = "https://github.com/pytorch/pytorch/actions/runs"


def job(n: int, machine: str, workflow: str, waited_min: float, **trigger: str) -> dict[str, Any]:
    return {
        "created_at": datetime.now(UTC) - timedelta(minutes=waited_min),
        "started_at": None,
        "name": f"{workflow} / linux-jammy-cuda12.8 / test (default, {n}, 9, {machine})",
        "html_url": f"{RUNS}/196330{n:05d}/job/562117{n:05d}",
        "machine_type": machine,
        "head_sha": f"{n:040x}",
        "ciflow_id": None,
        **trigger,
    }


PR_A = {"head_branch": "gh/alice/1/head", "event": "pull_request", "source_type": "other"}
PR_B = {"head_branch": "gh/bob/2/head", "event": "pull_request", "source_type": "other"}
MAIN = {"head_branch": "main", "event": "push", "source_type": "main"}


@pytest.fixture
def hud() -> Iterator[tuple[FakeHud, RunningServer]]:
    fake = FakeHud()
    fake.rows["queued_jobs_aggregate"] = [
        {
            "runner_label": GPU,
            "org": "pytorch",
            "repo": "pytorch",
            "num_queued_jobs": 9,
            "min_queue_time_minutes": 6,
            "max_queue_time_minutes": 40,
        }
    ]
    fake.jobs = [
        # Waiting already when the incident opens, each listed from the first reading.
        *(job(i, GPU, "pull", 12 + 4 * i, **(PR_A if i % 2 else PR_B)) for i in range(6)),
        *(job(10 + i, GPU, "trunk", 7 + i, **MAIN) for i in range(3)),
        job(20, GPU, "pull", 2, **PR_A),  # never listed: a runner takes it under 5 min
        job(21, CPU, "trunk", 30, **MAIN),  # another type's: not this incident's cost
    ]
    server = serve_in_thread(fake.app)
    try:
        yield fake, server
    finally:
        server.stop()


def replies(slack: Slack) -> list[str]:
    roots = slack.emulator.channel_messages(CHANNEL)
    return [shown(m) for m in slack.emulator.thread(CHANNEL, roots[0].ts)[1:]] if roots else []


def listings(fake: FakeHud) -> int:
    return sum(name == "queued_jobs" for name, _ in fake.asked)


async def test_the_cost_of_jobs_the_hud_lists_is_their_waits_followed_to_their_start(
    settings_for: Any, slack: Slack, hud: tuple[FakeHud, RunningServer]
) -> None:
    fake, server = hud
    settings = settings_for(
        metrics_backend="hud",
        hud_url=server.url,
        hud_token=fake.token,
        metrics_interval_seconds=1,
        status_interval_seconds=2,
        status_tick_seconds=0.5,
    )
    jobs = fake.jobs or []
    async with run_bot(settings) as running:
        await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        await slack.first_thread()
        # Runners take the jobs in three batches, each after two more readings listed them.
        for batch in (jobs[0:3], jobs[3:6] + jobs[9:11], jobs[6:8]):
            asked = listings(fake)
            await eventually(lambda a=asked: listings(fake) >= a + 2, what="two listings")
            for started in batch:
                started["started_at"] = datetime.now(UTC)
        truth = [
            (j["started_at"] - j["created_at"]).total_seconds() / 60
            for j in jobs
            if j["started_at"] is not None
            and j["machine_type"] == GPU
            and j["started_at"] - j["created_at"] > timedelta(minutes=5)
        ]
        assert len(truth) == 8

        async def counted() -> float | None:
            text = (await running.http.get("/metrics")).text
            name = "queuepilot_queue_wait_job_seconds_total"
            found = re.search(
                rf'^{name}{{runner_type="{re.escape(GPU)}"}} ([0-9.e+]+)$', text, re.M
            )
            seconds = float(found[1]) if found else 0.0
            return seconds if seconds >= 0.98 * sum(truth) * 60 else None

        await eventually(counted, what="every started job's wait counted", timeout=60)
        assert (await post_event(running.http, slash("resolve 1 anyway"))).status_code == 200
        summary = await eventually(
            lambda: next((r for r in replies(slack) if "Duration" in r), None),
            what="the summary",
            timeout=30,
        )
        lines = re.findall(rf"💸 (Cost on {re.escape(GPU)}: [^\n\"]+)", summary)
        assert len(lines) == 1, summary
        line = lines[0]
        said = re.search(r"([0-9,.]+) job-minutes waited by ([0-9]+) jobs queued past 5 min", line)
        assert said is not None, line
        minutes, count = float(said[1].replace(",", "")), int(said[2])
        assert count == len(truth), line  # the job under 5 min is not seen, nor the other type's
        assert abs(minutes - sum(truth)) <= 0.1 * sum(truth), (line, sum(truth))
        assert f"longest {round(max(truth))} min" in line, (line, max(truth))
        # Past the alert's 1 min: the same 8 jobs, pull's the most minutes; two PRs, one branch.
        assert re.search(r"past 1 min: 8 jobs in 2 workflows, pull [0-9]+%, 2 PRs, 1 branch", line)
        assert "(the HUD's queued jobs, followed)" in line, line
        assert "jobs that waited 1–5 min not known: the HUD lists a job only once it has" in line

        assert (await post_event(running.http, slash("postmortem 1"))).status_code == 200
        roots = slack.emulator.channel_messages(CHANNEL)
        files = await eventually(
            lambda: [f for m in slack.emulator.thread(CHANNEL, roots[0].ts) for f in m.files],
            what="the postmortem",
            timeout=30,
        )
        markdown = (slack.emulator.file_bytes(files[0]["id"]) or b"").decode()
        assert line.split(" · jobs that")[0] in markdown.replace("\\", ""), markdown
