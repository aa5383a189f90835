"""Soak: a compressed week of a busy fleet against one `queuepilot serve` process, watching that
its memory, Redis's, its asyncio tasks and its open files stay flat once warmed up.

The production command runs as its own process (`--serve` below wraps it only to count its
asyncio tasks from a side thread), with a real redis-server, the Slack emulator, and one GitHub
stand-in on loopback: GitHub's Actions API (`tests.support.fakes.github_api`, read by the
`github` metrics backend) and its Issues API (`sandbox.github_issues`, GITHUB_ISSUES_OPEN on),
served under one URL as GitHub serves both. Throughout the week:
- every reading (each second) finds new workflow runs, each with new jobs, that queue, run and
  are gone a few readings later: a new `/jobs` URL each time;
- a new alert group fires every `--open-every` seconds and resolves `--hold` seconds later: a
  root, statuses, a summary, and a GitHub issue opened, commented on and closed for each;
- App Home viewers (a workspace of `--viewers` people) open their Home tab several times a
  second.

Time is compressed by settings (production's value → the soak's), so that a week plays in
`--day` × 7 seconds:
- a day → `--day` seconds (45 s: 1920× faster);
- the metrics interval 60 s → 1 s (its floor), the status interval 10 min → 5 s, the status
  tick 5 s → 1 s, the Home's numbers 5 min → 30 s (its floor);
- GITHUB_ISSUES_OPEN_AFTER_SECONDS 90 s → 0 (no pipeline opens issues beside it here);
- INCIDENT_RETENTION_DAYS 30 days → 2 minutes (under three compressed days), so Redis reaches
  the size retention gives it within the warm-up;
- Slack's pace (a post a second a channel, an edit each 1.2 s) → 20 per second: the emulator
  does not enforce Slack's limits here, as a week's posts must fit in minutes.

Every 5 seconds it reads the bot's RSS (/proc/<pid>/status), its open file descriptors
(/proc/<pid>/fd), its asyncio tasks (counted inside the process), Redis's `used_memory` and its
number of keys (and the memory of each key, `MEMORY USAGE`: `used_memory` also counts buffers that
come and go), and the process's connections to Redis, whose pools open connections up to their
bound as load peaks. A few key kinds live a fixed wall-clock span that no setting compresses (an
hour, a day) or hold a fixed number of readings (`FIXED_SPAN`); a real week reaches their size in
its first hours, a compressed one does not, so they are measured apart and what is asserted is
Redis less them. After the warm-up (the first `--warm-up` days, longer than the retention) it
asserts each figure grows by at most 5% (the median of the last three samples against that of the
first three after warm-up; tasks, descriptors and keys by 5% and 3 more, for what is in flight
at a sample). It ends with every key kind, its count and whether it carries a TTL. Linux only
(/proc). `--case pages` is the GitHub backend's case: its bounded caches under a busy fleet
(`bench/soak_pages.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import redis

from bench import cpu_name, soak_pages, write_table
from bench.footprint import ALERTS, MIB, RUNNER_TYPES, firing, resolved, serve_env, wait_for
from sandbox.github_issues import TOKEN as GITHUB_TOKEN
from sandbox.github_issues import GithubIssues
from sandbox.github_quota import GithubQuota
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator
from sandbox.slack_interactions import Person, app_home_opened, event_callback
from tests.support.fakes.github_api import FakeGithub, one_github

REPO, ISSUES_REPO, ORG = "pytorch/pytorch", "pytorch/alerting-issues", "pytorch"
SECRET = "soak-signing-secret"
GROWTH = 0.05  # the most any figure may grow after the warm-up
JSON = {"Content-Type": "application/json"}
SLACK_FREE = 3  # tasks or descriptors of slack beyond 5% (a request in flight at a sample)


@dataclass(frozen=True)
class Plan:
    day_s: float = 45.0
    warm_up_days: float = 3.0
    open_every_s: float = 1.5
    hold_s: float = 15.0
    viewers: int = 300
    homes_per_s: float = 4.0
    runs_per_reading: int = 4
    sample_s: float = 5.0

    @property
    def week_s(self) -> float:
        return 7 * self.day_s


# Keys kept a fixed wall-clock span whatever the settings (a Slack event's once-only claim and a
# reading's claim for an hour, a five-minute slot's jobs for 26 hours, a day's kept readings for
# the report), and the fleet's history, its last 360 readings (six hours at the default interval,
# six minutes at the soak's): a real week reaches their size in its first hours or day, a
# compressed one does not. Counted apart, so that what is asserted flat is what the week's
# activity and the retention decide.
FIXED_SPAN = ("slack-event:", "warnings:reading:", "jobs:", "fleet:kept:", "fleet:history")


@dataclass
class Sample:
    at_s: float
    rss: int
    fds: int
    tasks: int
    redis_used: int
    redis_keys: int
    redis_kept: int  # MEMORY USAGE of every key but the fixed-span ones
    fixed_keys: int
    redis_conns: int  # the process's connections to Redis (its pools grow to their bound)

    @property
    def keys_kept(self) -> int:
        return self.redis_keys - self.fixed_keys

    @property
    def fds_less_redis(self) -> int:
        return self.fds - self.redis_conns


@dataclass
class Load:
    """What the soak made happen, counted."""

    groups: int = 0
    resolved: int = 0
    homes: int = 0
    runs: int = 0
    refused: list[str] = field(default_factory=list)


def serve_counting(tasks_file: str) -> None:
    """`queuepilot serve`, with a side thread writing how many asyncio tasks are alive."""

    def count() -> None:
        while True:
            time.sleep(1.0)
            try:
                alive = sum(1 for task in list(asyncio.tasks._all_tasks) if not task.done())
            except RuntimeError:  # the set changed while it was copied: next time
                continue
            Path(tasks_file).write_text(str(alive))

    threading.Thread(target=count, daemon=True).start()
    from bot.__main__ import main

    sys.exit(main(["serve"]))


def new_runs(fake: FakeGithub, first_id: int, count: int, now: float) -> None:
    """`count` new runs, each with two jobs; runs queue for 3 s, run 5 s, then are gone."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for n in range(count):
        run_id = first_id + n
        labels = [RUNNER_TYPES[run_id % len(RUNNER_TYPES)]]
        jobs = [FakeGithub.job(run_id * 10 + j, labels, "queued", stamp) for j in range(2)]
        fake.run(REPO, run_id, "queued", jobs)
        fake.runs[REPO][-1]["born"] = now
    kept = []
    for run in fake.runs.get(REPO, []):
        age = now - run["born"]
        if age < 3:
            kept.append(run)
        elif age < 8:
            run["status"] = run["listed_as"] = "in_progress"
            for job in run["jobs"]:
                job.update(status="in_progress", runner_id=77, runner_name="i-77")
            kept.append(run)
    fake.runs[REPO] = kept  # one assignment: the server's thread sees the old list or this one


def signed(body: str) -> dict[str, str]:
    stamp = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }


def soak_env(base: dict[str, str], github_url: str, plan: Plan) -> dict[str, str]:
    env = dict(base)
    env.update(
        SLACK_SIGNING_SECRET=SECRET,
        CHART_STYLE="native",
        STATUS_INTERVAL_SECONDS="5",
        STATUS_TICK_SECONDS="1",
        METRICS_BACKEND="github",
        METRICS_INTERVAL_SECONDS="1",
        GITHUB_TOKEN=GITHUB_TOKEN,
        GITHUB_API_URL=github_url,
        GITHUB_ORG=ORG,
        GITHUB_REPOS=REPO,
        GITHUB_ISSUES_REPO=ISSUES_REPO,
        GITHUB_ISSUES_OPEN="true",
        GITHUB_ISSUES_OPEN_AFTER_SECONDS="0",
        GITHUB_ISSUES_INTERVAL_MS="20",
        INCIDENT_RETENTION_DAYS="2m",
        HOME_NUMBERS_SECONDS="30",
        SLACK_POST_INTERVAL_MS="50",
        SLACK_UPDATE_INTERVAL_MS="50",
        ROOT_EDIT_INTERVAL_MS="500",
    )
    return env


def connections_to(pid: int, port: int) -> int:
    """The process's TCP sockets whose peer is `port` on loopback (from /proc/<pid>/net/tcp)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                found += 1
    return found


def sample(pid: int, tasks_file: Path, r: redis.Redis, redis_port: int, started: float) -> Sample:
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kib = int(re.search(r"VmRSS:\s+(\d+)", status)[1])  # type: ignore[index]
    tasks = int(tasks_file.read_text() or 0) if tasks_file.exists() else 0
    keys = [k.decode() for k in r.scan_iter(count=1000)]
    kept = [k for k in keys if not any(f":{kind}" in k for kind in FIXED_SPAN)]
    with r.pipeline(transaction=False) as pipe:
        for key in kept:
            pipe.memory_usage(key, samples=0)
        sizes = pipe.execute()
    return Sample(
        at_s=time.monotonic() - started,
        rss=rss_kib * 1024,
        fds=len(os.listdir(f"/proc/{pid}/fd")),
        tasks=tasks,
        redis_used=int(r.info("memory")["used_memory"]),
        redis_keys=len(keys),
        redis_kept=sum(size or 0 for size in sizes),
        fixed_keys=len(keys) - len(kept),
        redis_conns=connections_to(pid, redis_port),
    )


def drive(
    plan: Plan, http: httpx.Client, fake: FakeGithub, emulator: SlackEmulator, load: Load
) -> Callable[[], None]:
    """One step of the week's load, called every 0.25 s: runs each reading, groups firing and
    resolving on their schedule, Home tabs opened."""
    fire = json.loads((ALERTS / "queue-alert-firing.json").read_text())
    resolve = json.loads((ALERTS / "queue-alert-resolved.json").read_text())
    started = time.monotonic()
    due = {"reading": started, "open": started, "home": started}
    open_at: list[tuple[float, int]] = []

    def post(path: str, body: str, headers: dict[str, str]) -> None:
        answer = http.post(path, content=body, headers=headers)
        if answer.status_code not in (200, 202) and len(load.refused) < 5:
            load.refused.append(f"{path} {answer.status_code} {answer.text[:80]}")

    def step() -> None:
        now = time.monotonic()
        if now >= due["reading"]:
            new_runs(fake, 1_000 + load.runs, plan.runs_per_reading, time.time())
            load.runs += plan.runs_per_reading
            due["reading"] += 1.0
        if now >= due["open"]:
            group = load.groups
            post("/alerts/grafana", json.dumps(firing(fire, group, 1)), JSON)
            open_at.append((now, group))
            load.groups += 1
            due["open"] += plan.open_every_s
        while open_at and now - open_at[0][0] >= plan.hold_s:
            _, group = open_at.pop(0)
            post("/alerts/grafana", json.dumps(resolved(resolve, group)), JSON)
            load.resolved += 1
        while now >= due["home"]:
            person = Person(f"U0SOAK{load.homes % plan.viewers:04d}", "viewer")
            view = emulator.home(person.id)
            body = json.dumps(event_callback(app_home_opened(person, tab="home", view=view)))
            post("/slack/events", body, signed(body))
            load.homes += 1
            due["home"] += 1 / plan.homes_per_s

    return step


Kinds = dict[str, tuple[int, int, int, int]]


def key_kinds(r: redis.Redis) -> Kinds:
    """Each key kind (its name with IDs masked): how many keys, how many without a TTL, the
    longest TTL left (s), and their memory (bytes)."""
    kinds: dict[str, list[int]] = {}
    for key in r.scan_iter(count=1000):
        name = key.decode() if isinstance(key, bytes) else key
        kind = re.sub(r"(?<=:)[^:]*\d[^:]*", "*", name)
        ttl, size = int(r.ttl(name)), r.memory_usage(name, samples=0)
        if ttl == -2 or size is None:  # expired since the scan saw it
            continue
        found = kinds.setdefault(kind, [0, 0, 0, 0])
        found[0] += 1
        found[1] += ttl < 0
        found[2] = max(found[2], ttl)
        found[3] += int(size)
    return {kind: (n, bare, most, size) for kind, (n, bare, most, size) in sorted(kinds.items())}


def run(plan: Plan) -> tuple[list[Sample], Load, Kinds, Kinds]:
    emulator = SlackEmulator(token="xoxb-soak", channels=("C0SOAK",), enforce_rate_limits=False)
    quota = GithubQuota(limit=10**9)  # one token's, shared by both stand-ins
    fake = FakeGithub(token=GITHUB_TOKEN, page_size=100, quota=quota)
    issues = GithubIssues(limits=quota, content_per_minute=10**9, content_per_hour=10**9)
    port, load, samples = free_port(), Load(), []
    warm: Kinds = {}
    with (
        RedisServer() as redis_server,
        serve_in_thread(emulator.app) as slack,
        serve_in_thread(one_github(fake, issues)) as github,
        tempfile.TemporaryDirectory(prefix="qp-soak-") as workdir,
        open(Path(workdir) / "serve.log", "wb") as log,
    ):
        issues.base_url = fake.base_url = github.url
        issues.repo(ISSUES_REPO)
        fake.runner(1, *RUNNER_TYPES[:1])
        tasks_file = Path(workdir) / "tasks"
        base = serve_env(slack.url, redis_server.url, port, "native")
        base.update(SLACK_BOT_TOKEN="xoxb-soak", SLACK_CHANNEL="C0SOAK")
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.soak", "--serve", str(tasks_file)],
            cwd=workdir,
            env=soak_env(base, github.url, plan),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        r = redis.Redis.from_url(redis_server.url)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(lambda: _ready(f"{url}/readyz"), 60, "queuepilot serve ready")
            headers = {"Authorization": "Bearer footprint-token"}
            with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
                step = drive(plan, http, fake, emulator, load)
                started = next_sample = time.monotonic()
                while (now := time.monotonic()) - started < plan.week_s:
                    step()
                    if now >= next_sample:
                        seen = sample(process.pid, tasks_file, r, redis_server.port, started)
                        samples.append(seen)
                        if not warm and seen.at_s >= plan.warm_up_days * plan.day_s:
                            warm = key_kinds(r)
                        next_sample += plan.sample_s
                    if process.poll() is not None:
                        raise RuntimeError(f"queuepilot serve exited: {log.name}")
                    time.sleep(0.05)
            return samples, load, warm, key_kinds(r)
        finally:
            process.terminate()
            process.wait(timeout=30)
            r.close()


def _ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def growth(samples: list[Sample], plan: Plan, figure: str) -> tuple[float, float]:
    """The figure's median over the first three samples after the warm-up, and over the last."""
    warm = [s for s in samples if s.at_s >= plan.warm_up_days * plan.day_s]
    first = statistics.median(getattr(s, figure) for s in warm[:3])
    last = statistics.median(getattr(s, figure) for s in warm[-3:])
    return first, last


def verdicts(samples: list[Sample], plan: Plan) -> list[tuple[str, float, float, bool]]:
    found = []
    for figure in ASSERTED:
        first, last = growth(samples, plan, figure)
        slack = SLACK_FREE if figure in ("tasks", "fds_less_redis", "keys_kept") else 0
        found.append((figure, first, last, last <= first * (1 + GROWTH) + slack))
    return found


NAMES = {
    "rss": "bot RSS (MiB)",
    "redis_kept": "Redis keys' memory (`MEMORY USAGE`), less the fixed-span keys (MiB)",
    "keys_kept": "Redis keys, less the fixed-span keys",
    "tasks": "asyncio tasks",
    "fds_less_redis": "open file descriptors, less the Redis pools' connections",
    "redis_used": "Redis `used_memory`, all keys (MiB; not asserted)",
    "fixed_keys": "fixed-span keys (not asserted)",
    "redis_conns": "connections to Redis (pools up to their bound; not asserted)",
}
ASSERTED = ("rss", "redis_kept", "keys_kept", "tasks", "fds_less_redis")
NOTED = ("redis_used", "fixed_keys", "redis_conns")


def shown(figure: str, value: float) -> str:
    return f"{value / MIB:.2f}" if figure in ("rss", "redis_used", "redis_kept") else f"{value:.0f}"


def report(
    samples: list[Sample], load: Load, warm: Kinds, kinds: Kinds, plan: Plan, write: bool
) -> bool:
    print(
        f"soak: a week in {plan.week_s:.0f} s (a day = {plan.day_s:.0f} s); {load.groups} groups "
        f"fired, {load.resolved} resolved, {load.runs} workflow runs, {load.homes} Home tabs "
        f"opened; metrics backend github, GITHUB_ISSUES_OPEN on"
    )
    for refusal in load.refused:
        print(f"  refused: {refusal}")
    print(
        f"{'day':>5} {'RSS MiB':>8} {'Redis MiB':>9} {'keys':>6} {'fixed-span':>10} "
        f"{'kept MiB':>8} {'keys':>6} {'tasks':>6} {'fds':>4} {'to Redis':>8}"
    )
    for s in samples[:: max(1, len(samples) // 24)] + samples[-1:]:
        print(
            f"{s.at_s / plan.day_s:5.1f} {s.rss / MIB:8.1f} {s.redis_used / MIB:9.2f} "
            f"{s.redis_keys:6d} {s.fixed_keys:10d} {s.redis_kept / MIB:8.2f} {s.keys_kept:6d} "
            f"{s.tasks:6d} {s.fds:4d} {s.redis_conns:8d}"
        )
    results = verdicts(samples, plan)
    lines = [
        f"| {NAMES[f]} | {shown(f, a)} | {shown(f, b)} | {(b - a) / a * 100 if a else 0:+.1f}% | "
        f"{'yes' if ok else '**no**'} |"
        for f, a, b, ok in results
    ]
    for figure in NOTED:
        a, b = growth(samples, plan, figure)
        lines.append(
            f"| {NAMES[figure]} | {shown(figure, a)} | {shown(figure, b)} | "
            f"{(b - a) / a * 100 if a else 0:+.1f}% | |"
        )
    table = ["| figure | after warm-up | at the week's end | growth | flat (≤ 5%) |"]
    table += ["|---|---|---|---|---|", *lines]
    print("\n".join(table))
    print(
        "key kinds (IDs as *): keys after the warm-up and at the week's end, without a TTL at "
        "the end, longest TTL left (s), memory after the warm-up and at the end (KiB)"
    )
    for kind, (n, bare, most, size) in kinds.items():
        n0, _, _, size0 = warm.get(kind, (0, 0, 0, 0))
        print(
            f"  {kind:40} {n0:6d} {n:6d} {bare:4d} {most:8d} {size0 / 1024:8.1f} {size / 1024:8.1f}"
        )
    if write:
        header = (
            f"Measured {datetime.now(UTC):%Y-%m-%d} on {cpu_name()}, {os.cpu_count()} cores: a "
            f"week in {plan.week_s:.0f} s (a day = {plan.day_s:.0f} s, warm-up "
            f"{plan.warm_up_days:.0f} days); {load.groups} groups fired and resolved, "
            f"{load.runs} workflow runs, {load.homes} Home tabs opened; `METRICS_BACKEND=github`, "
            f"`GITHUB_ISSUES_OPEN=true`."
        )
        write_table("soak", header, table)
    return all(ok for *_, ok in results)


def main() -> None:
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument(
        "--case",
        choices=["week", "pages"],
        default="week",
        help="pages: GitHub `/jobs` pages of 50 kB, ten new runs a second (its own options: "
        "`--case pages --help`)",
    )
    case, rest = chooser.parse_known_args()
    if case.case == "pages":
        soak_pages.main(rest)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], parents=[chooser])
    parser.add_argument("--serve", metavar="TASKS_FILE", help=argparse.SUPPRESS)
    parser.add_argument("--day", type=float, default=Plan.day_s, help="seconds a day takes")
    parser.add_argument("--warm-up", type=float, default=Plan.warm_up_days, help="days")
    parser.add_argument("--open-every", type=float, default=Plan.open_every_s)
    parser.add_argument("--hold", type=float, default=Plan.hold_s)
    parser.add_argument("--viewers", type=int, default=Plan.viewers)
    parser.add_argument("--write", action="store_true", help="put the table in benchmarks.md")
    args = parser.parse_args()
    if args.serve:
        serve_counting(args.serve)
        return
    plan = Plan(args.day, args.warm_up, args.open_every, args.hold, args.viewers)
    samples, load, warm, kinds = run(plan)
    if not report(samples, load, warm, kinds, plan, args.write):
        sys.exit("soak: a figure grew more than 5% after the warm-up")


if __name__ == "__main__":
    main()
