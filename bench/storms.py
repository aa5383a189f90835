"""Alert storms as a user sees them: one channel's, and the whole organisation's at once.

Each run starts a real redis-server, the Slack emulator enforcing Slack's limits (posts about one
a second per channel with a short burst) and three replicas of queuepilot's production process
(`python -m bot serve`) on that one Redis, with `SLACK_ROUTES` sending each team to its own
channel. Then every group of the storm is POSTed at once (Alertmanager's webhook, spread over
the replicas as a load balancer would) and the channels are read until every group is visible in
its own channel, by the same definition as `bench.side_by_side`'s storm: its name shown by a
top-level message of that channel (its own root, or a line of the channel's storm digest).
- single-channel storm: 120 new groups in one channel;
- org-wide storm: 30 new groups in each of 20 team channels (600), every channel at once, as
  soon as the replicas answer `/readyz`: right after a fresh start, while the leader reads every
  channel's history for roots of a lost state (Redis holds no state marker);
- the same once settled: sent after that read, when the marker is set.
Reported per storm, over `--runs` fresh stacks: seconds until the first group and until every
group was visible (the goal: the first within 5 s, also right after a fresh start), duplicates (a
group with two roots, or listed twice by the digest messages), groups shown in a channel not
theirs, the most 429s any channel got, and the edits answered 429 (the emulator counts
`chat.update` for the whole app, Tier 3: about 50 a minute, as Slack does).
Writes its table into `docs/benchmarks.md` with `--write`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from redis import Redis

from bench import ROOT, cpu_name, wait_until_up, write_table
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

TOKEN, SECRET, BOT_TOKEN = "bench-webhook-token", "bench-signing-secret", "xoxb-bench"
DEFAULT_CHANNEL = "C0DEFAULT"
STORM_MARK = "Alert storm"  # what every digest message's fallback text starts with
REPLICAS = 3
STATE_MARKER = "qp:v2:state"  # set once the leader has read the channels' history
FIRST_POST_GOAL_S = 5.0  # right after a fresh start, as once settled


@dataclass(frozen=True)
class Scenario:
    name: str
    channels: int
    per_channel: int
    settled: bool = False  # sent once the leader has read the channels' history

    @property
    def groups(self) -> int:
        return self.channels * self.per_channel


SCENARIOS = (
    Scenario("single-channel storm", 1, 120),
    Scenario("org-wide storm right after a fresh start", 20, 30),
    Scenario("org-wide storm, settled", 20, 30, settled=True),
)


@dataclass(frozen=True)
class Outcome:
    first: float | None  # seconds until the first group was visible
    seconds: float | None  # None: not every group was visible within the timeout
    accepted: float  # seconds until the replicas had answered 202 to every group
    visible: int
    duplicates: int
    misrouted: int
    max_429: int
    edits_limited: int
    digest_messages: int


def channel_of(team: int) -> str:
    return f"C0TEAM{team:02d}"


def group_name(scenario: Scenario, team: int, n: int) -> str:
    # Fixed width, so no name is a prefix of another ("storm-1" of "storm-10").
    return f"storm-t{team:02d}-g{n:03d}" if scenario.channels > 1 else f"storm-{n:03d}"


def payload(name: str, team: int) -> dict[str, Any]:
    """One new Alertmanager group of its own, for team `team`."""
    labels = {"alertname": name, "priority": "P2", "team": f"t{team:02d}", "type": "alerting-infra"}
    annotations = {"summary": "Jobs are queueing in the autoscaled machines", "Priority": "P2"}
    return {
        "receiver": "queuepilot",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": annotations,
                "startsAt": datetime.now(UTC).isoformat(),
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": name,
            }
        ],
        "groupLabels": {"alertname": name},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": "http://alertmanager.example.org:9093",
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{name}"}}',
        "truncatedAlerts": 0,
    }


@contextmanager
def stack(scenario: Scenario) -> Iterator[tuple[SlackEmulator, list[str]]]:
    """Redis, the emulator with Slack's limits, and three replicas; yields their webhook URLs once
    they answer `/readyz` (and, `settled`, once the leader has read the channels' history)."""
    channels = [channel_of(t) for t in range(scenario.channels)]
    emulator = SlackEmulator(
        token=BOT_TOKEN, channels=(DEFAULT_CHANNEL, *channels), enforce_rate_limits=True
    )
    routes = [
        {"match": [f"team=t{t:02d}"], "channel": channel_of(t)} for t in range(scenario.channels)
    ]
    processes: list[subprocess.Popen[bytes]] = []
    with RedisServer() as redis, serve_in_thread(emulator.app) as slack:
        ports = [free_port() for _ in range(REPLICAS)]
        try:
            for port in ports:
                env = {
                    **os.environ,
                    "SLACK_BOT_TOKEN": BOT_TOKEN,
                    "SLACK_SIGNING_SECRET": SECRET,
                    "SLACK_API_URL": f"{slack.url}/api/",
                    "SLACK_CHANNEL": DEFAULT_CHANNEL,
                    "SLACK_ROUTES": json.dumps(routes),
                    "REDIS_URL": redis.url,
                    "PORT": str(port),
                    "HOST": "127.0.0.1",
                    "ALERT_WEBHOOK_TOKEN": TOKEN,
                    "LOG_LEVEL": "WARNING",
                }
                env.pop("SLACK_APP_TOKEN", None)
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "bot", "serve"],
                        env=env,
                        cwd=ROOT,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            urls = [f"http://127.0.0.1:{port}" for port in ports]
            for url in urls:
                wait_until_up(
                    lambda url=url: httpx.get(f"{url}/readyz").status_code == 200, "a replica"
                )
            if scenario.settled:
                with Redis.from_url(redis.url) as client:
                    wait_until_up(lambda: client.hexists(STATE_MARKER, "since"), "the state")
            yield emulator, urls
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()


async def send_storm(urls: list[str], payloads: list[dict[str, Any]]) -> None:
    """Every group at once, round-robin over the replicas, 30 requests in flight."""
    gate = asyncio.Semaphore(30)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:

        async def one(n: int, body: dict[str, Any]) -> None:
            async with gate:
                answer = await http.post(f"{urls[n % len(urls)]}/alerts/alertmanager", json=body)
                answer.raise_for_status()

        await asyncio.gather(*(one(n, body) for n, body in enumerate(payloads)))


def shown_by(emulator: SlackEmulator, channels: list[str]) -> dict[str, list[tuple[bool, str]]]:
    """Each channel's top-level messages as (is a digest, what it shows)."""
    found = {}
    for channel in channels:
        found[channel] = [
            (
                STORM_MARK in m.text,
                json.dumps(m.blocks) if STORM_MARK in m.text else m.text + json.dumps(m.blocks),
            )
            for m in emulator.channel_messages(channel)
        ]
    return found


def count_visible(shown: dict[str, list[tuple[bool, str]]], wanted: dict[str, str]) -> int:
    texts = {channel: "".join(text for _, text in messages) for channel, messages in shown.items()}
    return sum(name in texts[channel] for name, channel in wanted.items())


def judge(
    emulator: SlackEmulator,
    wanted: dict[str, str],
    first: float | None,
    seconds: float | None,
    accepted: float,
) -> Outcome:
    channels = sorted(set(wanted.values()))
    shown = shown_by(emulator, [*channels, DEFAULT_CHANNEL])
    duplicates = misrouted = 0
    for name, home in wanted.items():
        roots = sum(
            name in text for channel in shown for digest, text in shown[channel] if not digest
        )
        lines = sum(text.count(name) for digest, text in shown[home] if digest)
        duplicates += roots > 1 or lines > 1
        misrouted += any(
            name in text for channel in shown if channel != home for _, text in shown[channel]
        )
    calls = emulator.calls()
    limited = Counter(c.params.get("channel", "") for c in calls if c.status == 429)
    return Outcome(
        first=first,
        seconds=seconds,
        accepted=accepted,
        visible=count_visible(shown, wanted),
        duplicates=duplicates,
        misrouted=misrouted,
        max_429=max(limited.values(), default=0),
        edits_limited=sum(c.method == "chat.update" for c in calls if c.status == 429),
        digest_messages=sum(digest for messages in shown.values() for digest, _ in messages),
    )


def run(scenario: Scenario, *, timeout: float, settle: float) -> Outcome:
    # Interleaved by team, so every channel's storm starts at once.
    teams = {
        group_name(scenario, t, n): t
        for n in range(scenario.per_channel)
        for t in range(scenario.channels)
    }
    wanted = {name: channel_of(team) for name, team in teams.items()}
    payloads = [payload(name, team) for name, team in teams.items()]
    channels = sorted(set(wanted.values()))
    with stack(scenario) as (emulator, urls):
        started = time.monotonic()
        # Sent from a thread of its own, so the channels are read while the storm arrives.
        sender = threading.Thread(target=asyncio.run, args=(send_storm(urls, payloads),))
        sender.start()
        first = seconds = None
        accepted = 0.0
        while time.monotonic() - started < timeout:
            if not accepted and not sender.is_alive():
                accepted = time.monotonic() - started
            visible = count_visible(shown_by(emulator, channels), wanted)
            if visible and first is None:
                first = time.monotonic() - started
            if visible == len(wanted):
                seconds = time.monotonic() - started
                break
            time.sleep(0.05)
        sender.join()
        accepted = accepted or time.monotonic() - started
        # A duplicate may come later than the last group's line (a root posted twice, a
        # continuation listing a group again): looked for again after a while.
        time.sleep(settle)
        return judge(emulator, wanted, first, seconds, accepted)


def spread(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def table(results: dict[Scenario, list[Outcome]], runs: int) -> list[str]:
    lines = [
        f"| measure (3 replicas, one Redis; {runs} runs: median (min–max)) |"
        + "".join(
            f" {s.name}: {s.groups} groups in {s.channels} channel{'s' * (s.channels > 1)} |"
            for s in results
        ),
        "|---|" + "---|" * len(results),
    ]

    def row(label: str, cell: Any) -> None:
        lines.append(
            f"| {label} |" + "".join(f" {cell(outcomes)} |" for outcomes in results.values())
        )

    def seconds(outcomes: list[Outcome]) -> str:
        done = [o.seconds for o in outcomes if o.seconds is not None]
        late = len(outcomes) - len(done)
        return spread(done) + (f", {late} run(s) not all visible" if late else "")

    def worst(field: str) -> Any:
        return lambda outcomes: ", ".join(str(getattr(o, field)) for o in outcomes)

    row(
        f"seconds until the first group is visible (goal: {FIRST_POST_GOAL_S:.0f})",
        lambda o: spread([x.first for x in o if x.first is not None]),
    )
    row("seconds until every group is visible in its own channel", seconds)
    row(
        "seconds until the replicas had accepted every group",
        lambda o: spread([x.accepted for x in o]),
    )
    row("groups shown twice (two roots, or two digest lines)", worst("duplicates"))
    row("groups shown in a channel not theirs", worst("misrouted"))
    row("calls answered 429, most in one channel", worst("max_429"))
    row("edits answered 429 (`chat.update`, counted for the whole app)", worst("edits_limited"))
    row("digest messages posted (all channels)", worst("digest_messages"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh stacks per storm")
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument(
        "--settle", type=float, default=10.0, help="seconds before duplicates are counted"
    )
    parser.add_argument("--only", choices=[s.name for s in SCENARIOS], help="one storm only")
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    chosen = [s for s in SCENARIOS if args.only in (None, s.name)]
    results: dict[Scenario, list[Outcome]] = {s: [] for s in chosen}
    for n in range(args.runs):
        for scenario in chosen:
            outcome = run(scenario, timeout=args.timeout, settle=args.settle)
            print(f"run {n + 1}, {scenario.name}: {outcome}", flush=True)
            results[scenario].append(outcome)
    header = (
        f"Measured {datetime.now(UTC):%Y-%m-%d} on {cpu_name()}, {os.cpu_count()} cores, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}; "
        "everything on loopback."
    )
    lines = table(results, args.runs)
    print(header)
    print("\n".join(lines))
    for scenario, outcomes in results.items():
        late = [o.first for o in outcomes if o.first is None or o.first > FIRST_POST_GOAL_S]
        if late:
            print(f"GOAL MISSED: {scenario.name}: a first post later than {FIRST_POST_GOAL_S} s")
    if args.write:
        write_table("storms", header, lines)


if __name__ == "__main__":
    main()
