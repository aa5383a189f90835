"""Soak, the GitHub pages case: a busy fleet's `/jobs` pages of about 50 kB, ten new workflow runs
a second, read every second by one `queuepilot serve` process with `METRICS_BACKEND=github`; its
resident memory must level off under the Helm chart's memory request.

Each run's page is new to the process (a new URL), is read again while the run lives (queued for
3 s, in progress for 5 s: a 304, then a 200 when its jobs start), and is never asked for again
once the run is gone. So the GitHub readings' ETag cache fills to its bound in bytes, the share
of MEMORY_LIMIT_MIB that `bot.config.memory` gives it (the chart's limit here, as the chart sets
it), and evicts from then on. RSS is read from /proc every 5 s and shown every 30 s; the run
passes when RSS never reaches the chart's `resources.requests.memory` (at another
`--limit-mib`, the request in the chart's ratio to its limit) and grows by less than `FLAT_MIB`
over the last third. Linux only (/proc)."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench import cpu_name, write_table
from bench.footprint import CHART_VALUES, MIB, serve_env, wait_for
from bot.config.memory import cache_bytes
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator
from tests.support.fakes.github_api import FakeGithub

REPO, ORG, TOKEN = "pytorch/pytorch", "pytorch", "ghp-soak-pages"
RUNNER_TYPES = ("linux.2xlarge", "linux.4xlarge.nvidia.gpu", "linux.arm64.2xlarge")
# The most RSS may grow over the last third. A cache that kept every run's page would add some
# 130 MiB there; the allocator's heap grows by steps of up to 6 MiB now and then.
FLAT_MIB = 8.0
QUEUED_S, RUNNING_S = 3.0, 5.0
JOBS_PER_RUN = 8
QUOTA = 10**9  # never met: what is spent counts the pages not answered from the cache
# A GitHub job's step as `/jobs` lists it (some 200 bytes), and a job without its steps with the
# run's fields (some 600).
STEP_BYTES, JOB_BYTES = 207, 600


@dataclass(frozen=True)
class Plan:
    duration_s: float = 480.0
    runs_per_s: float = 10.0
    page_bytes: int = 50_000
    limit_mib: int = 0  # 0: the chart's limit
    sample_s: float = 5.0
    shown_every_s: float = 30.0


def chart_memory() -> tuple[int, int]:
    """The chart's memory request and limit, in MiB."""
    resources = yaml.safe_load(CHART_VALUES.read_text())["resources"]
    return mib_of(resources["requests"]["memory"]), mib_of(resources["limits"]["memory"])


def mib_of(quantity: str) -> int:
    number, unit = re.fullmatch(r"([0-9]+)(Mi|Gi)", str(quantity)).groups()  # type: ignore[union-attr]
    return int(number) * (1024 if unit == "Gi" else 1)


def job(job_id: int, runner_type: str, stamp: str, steps: int) -> dict[str, Any]:
    found = FakeGithub.job(job_id, [runner_type], "queued", stamp)
    found["steps"] = [
        {
            "name": f"Run pytorch/test-infra/.github/actions/setup-linux@main ({n})",
            "status": "queued",
            "conclusion": None,
            "number": n,
            "started_at": None,
            "completed_at": None,
        }
        for n in range(1, steps + 1)
    ]
    return found


class Fleet:
    """The runs the stand-in lists: `runs_per_s` new ones, each gone after QUEUED_S + RUNNING_S."""

    def __init__(self, fake: FakeGithub, plan: Plan) -> None:
        self.fake, self.plan, self.runs = fake, plan, 0
        self._born: dict[int, float] = {}
        self._steps = max(1, round((plan.page_bytes / JOBS_PER_RUN - JOB_BYTES) / STEP_BYTES))

    def step(self, now: float, due: int) -> None:
        """Runs up to `due` started; those past their time started or gone."""
        stamp = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        while self.runs < due:
            run_id = 1_000_000 + self.runs
            kind = RUNNER_TYPES[run_id % len(RUNNER_TYPES)]
            jobs = [job(run_id * 100 + n, kind, stamp, self._steps) for n in range(JOBS_PER_RUN)]
            self.fake.run(REPO, run_id, "queued", jobs)
            self._born[run_id] = now
            self.runs += 1
        kept = []
        for run in self.fake.runs.get(REPO, []):
            age = now - self._born[run["id"]]
            if age >= QUEUED_S + RUNNING_S:
                del self._born[run["id"]]
                continue
            if age >= QUEUED_S and run["status"] == "queued":
                run["status"] = run["listed_as"] = "in_progress"
                for one in run["jobs"]:
                    one.update(status="in_progress", runner_id=77, runner_name="i-77")
            kept.append(run)
        self.fake.runs[REPO] = (
            kept  # one assignment: the server's thread sees one list or the other
        )


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]


def run(plan: Plan, limit_mib: int) -> tuple[list[tuple[float, float]], Fleet, FakeGithub]:
    emulator = SlackEmulator(token="xoxb-soak", channels=("C0SOAK",), enforce_rate_limits=False)
    fake = FakeGithub(token=TOKEN, page_size=100, remaining=QUOTA)
    fleet, samples, port = Fleet(fake, plan), [], free_port()
    with (
        RedisServer() as redis_server,
        serve_in_thread(emulator.app) as slack,
        serve_in_thread(fake.app) as github,
        tempfile.TemporaryDirectory(prefix="qp-soak-pages-") as workdir,
        open(Path(workdir) / "serve.log", "wb") as log,
    ):
        fake.base_url = github.url
        fake.runner(1, RUNNER_TYPES[0])
        env = serve_env(slack.url, redis_server.url, port, "native")
        env.update(
            SLACK_BOT_TOKEN="xoxb-soak",
            SLACK_CHANNEL="C0SOAK",
            METRICS_BACKEND="github",
            METRICS_INTERVAL_SECONDS="1",
            STATUS_TICK_SECONDS="1",  # what looks for a due reading, each second
            GITHUB_TOKEN=TOKEN,
            GITHUB_API_URL=github.url,
            GITHUB_ORG=ORG,
            GITHUB_REPOS=REPO,
            MEMORY_LIMIT_MIB=str(limit_mib),
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}/readyz"
            wait_for(lambda: _ready(url), 60, "queuepilot serve ready")
            started = next_sample = time.monotonic()
            while (now := time.monotonic()) - started < plan.duration_s:
                fleet.step(now, int((now - started) * plan.runs_per_s) + 1)
                if now >= next_sample:
                    samples.append((now - started, rss_mib(process.pid)))
                    next_sample += plan.sample_s
                if process.poll() is not None:
                    raise RuntimeError(f"queuepilot serve exited: {log.name}")
                time.sleep(0.05)
            return samples, fleet, fake
        finally:
            process.terminate()
            process.wait(timeout=30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def verdict(samples: list[tuple[float, float]], request_mib: int) -> tuple[float, float, bool]:
    """The growth over the last third (the median of its first three samples against that of
    its last three), the highest RSS, and whether both are within bounds."""
    third = [rss for at, rss in samples if at >= samples[-1][0] * 2 / 3]
    growth = statistics.median(third[-3:]) - statistics.median(third[:3])
    peak = max(rss for _, rss in samples)
    return growth, peak, growth < FLAT_MIB and peak < request_mib


def report(
    samples: list[tuple[float, float]], fleet: Fleet, fake: FakeGithub, plan: Plan, limit_mib: int
) -> tuple[bool, str, list[str]]:
    """Prints the curve and the verdict; answers the verdict, and the header and table that
    benchmarks.md shows."""
    # The chart's request, or at another limit the request the chart's proportion would give.
    request_mib, chart_limit_mib = chart_memory()
    request_mib = request_mib * limit_mib // chart_limit_mib
    cache_mib = cache_bytes(limit_mib)["github_readings"] / MIB
    growth, peak, ok = verdict(samples, request_mib)
    calls, spent = len(fake.calls), QUOTA - fake.remaining  # a 304 spends none
    header = (
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {cpu_name()}, {os.cpu_count()} cores: "
        f"{plan.duration_s:.0f} s, {fleet.runs} workflow runs ({plan.runs_per_s:g} a second, "
        f"`/jobs` pages of {plan.page_bytes / 1000:.0f} kB), a reading a second: {calls} calls "
        f"to GitHub, {calls - spent} of them answered 304 from the cache; "
        f"`MEMORY_LIMIT_MIB={limit_mib}`: the readings' pages up to {cache_mib:.1f} MiB. Last "
        f"third {growth:+.1f} MiB (flat: under {FLAT_MIB:g}); highest {peak:.1f} MiB "
        f"(the request, at the chart's ratio to the limit: {request_mib} MiB)."
    )
    table = ["| time (s) | bot RSS (MiB) |", "|---|---|"]
    shown_at = 0.0
    for at, rss in samples:
        if at >= shown_at:
            table.append(f"| {at:.0f} | {rss:.1f} |")
            shown_at += plan.shown_every_s
    print(f"soak, GitHub pages: {header}")
    print("\n".join(table))
    print("flat under the chart's request:", "yes" if ok else "NO")
    return ok, header, table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=Plan.duration_s)
    parser.add_argument("--runs-per-second", type=float, default=Plan.runs_per_s)
    parser.add_argument("--page-bytes", type=int, default=Plan.page_bytes)
    parser.add_argument("--limit-mib", type=int, default=0, help="default: the chart's limit")
    parser.add_argument("--write", action="store_true", help="put the curve in benchmarks.md")
    args = parser.parse_args(argv)
    plan = Plan(args.seconds, args.runs_per_second, args.page_bytes, args.limit_mib)
    limit_mib = plan.limit_mib or chart_memory()[1]
    samples, fleet, fake = run(plan, limit_mib)
    ok, header, table = report(samples, fleet, fake, plan, limit_mib)
    if args.write and not plan.limit_mib:  # benchmarks.md shows the chart's defaults
        write_table("soak-pages", header, table)
    if not ok:
        sys.exit("soak, GitHub pages: RSS not flat under the chart's memory request")


if __name__ == "__main__":
    main()
