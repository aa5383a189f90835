"""A GitHub-shaped API with the jobs of a queue: a surging periodic workflow, PR jobs, a trunk
job on another runner type, and a ghost (a queued job of a run that has completed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.backends.metrics.github import GithubMetrics
from bot.config import Settings
from sandbox.serve import RunningServer
from tests.support.fakes.github_api import FakeGithub

GPU, CPU = "linux.g5.4xlarge.nvidia.gpu", "linux.2xlarge"


def ago(minutes: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def queue_of_jobs(fake: FakeGithub) -> None:
    job = FakeGithub.job
    fake.run(
        "pytorch/pytorch", 31, "queued",
        [job(3100 + n, [GPU], "queued", ago(3), name=f"test ({n}, 38)") for n in range(38)],
        name="periodic", event="schedule", head_branch="main",
    )  # fmt: skip
    fake.run("pytorch/pytorch", 32, "in_progress", [
        job(3201, [GPU], "queued", ago(95), name="linux-jammy / test (1, 5)"),
        job(3202, [GPU], "queued", ago(20), name="linux-jammy / test (2, 5)"),
    ])  # fmt: skip
    fake.run(
        "pytorch/pytorch", 33, "queued", [job(3301, [CPU], "queued", ago(12), name="build")],
        name="trunk", event="push", head_branch="main",
    )  # fmt: skip
    fake.run(
        "pytorch/pytorch", 34, "completed", [job(3401, [GPU], "queued", ago(300))],
        conclusion="cancelled", listed_as="queued",
    )  # fmt: skip
    for n in range(8):  # every GPU runner busy
        fake.runner(500 + n, "self-hosted", GPU, busy=True)
    fake.runner(600, "self-hosted", CPU)
    fake.page_size = 100


def github_metrics(server: RunningServer) -> GithubMetrics:
    return GithubMetrics(
        Settings(
            github_token="ghp-test",
            github_api_url=server.url,
            github_org="pytorch",
            github_repos="pytorch/pytorch",
        )
    )
