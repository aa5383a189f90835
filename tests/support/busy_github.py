"""A busy repository on GitHub's stand-ins, on one token's quota and one clock the test moves:
150 runs queued and 150 in progress, 20 jobs each; every minute a tenth of the runs move on (15
finish, 15 queued start, 15 new queue) and 70% of those in progress change a job (pytorch/pytorch
at its peak). The Actions API and the issues API share the quota, as on GitHub. Each job's
change is kept as the `workflow_job` delivery GitHub would send (`changes`); a finished run's
jobs still to finish complete with it, and it stays readable (no longer listed), as on GitHub."""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from sandbox.github_issues import TOKEN, GithubIssues
from sandbox.github_quota import GithubQuota
from tests.support.fakes.github_api import FakeGithub, one_github

REPO = "pytorch/pytorch"
TYPES = ("linux.2xlarge", "linux.4xlarge", "linux.g5.4xlarge.nvidia.gpu", "windows.4xlarge")
RUNS, JOBS, RUNNERS = 150, 20, 150
MOVE_ON, CHANGING = 15, 0.7
LIVED = 10  # minutes the repository lived before the test starts
# httpx's in-process transport imports sniffio on every request to see whether trio runs; where
# it is not installed each failed import searches the path again (a fifth of the scenario's time).
# Known absent, the import fails at once.
if "sniffio" not in sys.modules:
    try:
        import sniffio  # noqa: F401
    except ImportError:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


@dataclass
class Clock:
    """Epoch seconds for GitHub and its client; `at()` the same moment for the bot."""

    now: float = datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def at(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


@dataclass
class Answers(httpx.AsyncBaseTransport):
    """The in-process GitHub, every answer's status kept (the rate limit's 403s counted)."""

    inner: httpx.AsyncBaseTransport
    statuses: list[int] = field(default_factory=list)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        self.statuses.append(response.status_code)
        return response


@dataclass
class BusyGithub:
    clock: Clock = field(default_factory=Clock)
    seed: int = 61

    def __post_init__(self) -> None:
        self.quota = GithubQuota()
        self.actions = FakeGithub(token=TOKEN, page_size=100, quota=self.quota, clock=self.clock)
        self.issues = GithubIssues(limits=self.quota, clock=self.clock)
        self.issues.repo(REPO)
        self.transport = Answers(httpx.ASGITransport(app=one_github(self.actions, self.issues)))
        self._random = random.Random(self.seed)
        self._ids = 1000
        self.jobs: dict[int, dict[str, Any]] = {}  # every job, by id, as GitHub has it now
        # (action, the job as delivered, when): what the workflow_job webhook sends
        self.changes: list[tuple[str, dict[str, Any], str]] = []
        for n in range(RUNNERS):
            self.actions.runner(n + 1, TYPES[n % len(TYPES)], busy=n % 3 > 0)
        for _ in range(RUNS):
            self._run("in_progress", self._now())
            self._run("queued", self._now())
        for _ in range(LIVED):  # its runs changed at their own moments before the bot came
            self.clock.now += 60
            self.minute()

    def client(self, base_url: str = "http://api.github.test") -> httpx.AsyncClient:
        from bot.backends.github_api import HEADERS

        self.actions.base_url = self.issues.base_url = base_url
        return httpx.AsyncClient(transport=self.transport, base_url=base_url, headers=HEADERS)

    @property
    def runs(self) -> list[dict[str, Any]]:
        """The runs queued and in progress."""
        return [run for run in self.actions.runs[REPO] if run["status"] != "completed"]

    def delivery(self, change: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
        """A change as GitHub's `workflow_job` delivery body says it."""
        action, job, _ = change
        return {"action": action, "workflow_job": job, "repository": {"full_name": REPO}}

    def minute(self) -> None:
        """A minute of the repository's life (the test moves the clock)."""
        pick, now = self._random, self._now()
        running = [r for r in self.runs if r["status"] == "in_progress"]
        for run in pick.sample(running, MOVE_ON):
            self._finish(run, now)
        for run in pick.sample([r for r in self.runs if r["status"] == "queued"], MOVE_ON):
            run["status"] = run["listed_as"] = "in_progress"
            self._start(run["jobs"][0], now)
            self.actions.touch(run)
        for _ in range(MOVE_ON):
            self._run("queued", now)
        for run in [r for r in self.runs if r["status"] == "in_progress"]:
            # A finished job does not change again (a run whose jobs all have, waits to end).
            left = [job for job in run["jobs"] if job["status"] != "completed"]
            if pick.random() < CHANGING and left:
                job = pick.choice(left)
                if job["status"] == "queued":
                    self._start(job, now)
                else:
                    self._complete(job, now)
                self.actions.touch(run)
        for runner in pick.sample(self.actions.runners, 10):
            runner["busy"] = not runner["busy"]

    def _run(self, status: str, now: str) -> None:
        self._ids += 1
        jobs = [
            FakeGithub.job(self._ids * 100 + j, [TYPES[j % len(TYPES)]], "queued", now)
            for j in range(JOBS)
        ]
        self.actions.run(REPO, self._ids, status, jobs)
        self.jobs |= {job["id"]: job for job in jobs}
        for job in jobs:
            self._told("queued", job, now)
        if status == "in_progress":
            self._start(jobs[0], now)

    def _start(self, job: dict[str, Any], now: str) -> None:
        job.update(status="in_progress", started_at=now, runner_id=77, runner_name="i-77")
        self._told("in_progress", job, now)

    def _complete(self, job: dict[str, Any], now: str) -> None:
        job.update(status="completed", conclusion="success", completed_at=now)
        self._told("completed", job, now)

    def _finish(self, run: dict[str, Any], now: str) -> None:
        """A run ends: its jobs still to run are cancelled, and it is listed as completed."""
        for job in run["jobs"]:
            if job["status"] != "completed":
                job.update(status="completed", conclusion="cancelled", completed_at=now)
                self._told("completed", job, now)
        run.update(status="completed", listed_as="completed", conclusion="success")
        self.actions.touch(run)

    def _told(self, action: str, job: dict[str, Any], now: str) -> None:
        # A copy as sent: the job's later changes do not reach a delivery made (its one list too).
        self.changes.append((action, {**job, "labels": list(job["labels"])}, now))

    def _now(self) -> str:
        return self.clock.at().strftime("%Y-%m-%dT%H:%M:%SZ")
