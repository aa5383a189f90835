"""GitHub's workflow_job webhooks in a busy organization's push: a burst of signed deliveries at a
steady rate (100 a second for 60 s by default), each answered within GitHub's 10 s, none lost.

Runs a real redis-server, the Slack emulator and one bot, all on loopback; the deliveries are the
fixture's, each a job of its own, with a fresh X-GitHub-Delivery and X-Hub-Signature-256, sent
on schedule whatever the answers (GitHub does not wait for one before the next). Two of every
three deliveries queue a new job, the third starts the first of those two, so half the jobs end
in progress. Then every job must be in the store with its last state.

`--flood`: forged deliveries (a random signature, a fresh ID, an invented event) from a process
of their own, beside Slack clicks (`bench.actions`, `--clicks` a second for `--seconds`, 10 by
default) on the bot as its production process (its limits the defaults, or this environment's
GITHUB_WEBHOOK_RATE and GITHUB_WEBHOOK_CONCURRENCY): the clicks' acknowledgements without a
flood, then beside `--slow` connections holding each body a second, then beside `--senders`
ones each sending its next as soon as the last is answered; and what the forged deliveries
were answered, the bot's CPU and its log lines meanwhile.

`make bench` runs both; numbers depend on the machine, so compare runs on the same one.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import hmac
import itertools
import json
import multiprocessing
import os
import secrets
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from redis.asyncio import Redis

from bench.actions import open_incidents, served_bot, under_load
from bench.footprint import usage
from bench.intake import percentile
from bot.app import build_app, build_bot
from bot.config import Settings, load_settings
from bot.storage.keys import Keys
from bot.storage.workflow_jobs import WorkflowJobs
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

FIXTURE = (
    Path(__file__).resolve().parents[1] / "tests/fixtures/backends/github/workflow_job-queued.json"
)
SECRET = "bench-github-secret"
CHANNEL = "C0BENCH"
GITHUB_WAITS_S = 10.0  # GitHub's deadline for a 2xx


def deliveries(count: int) -> list[tuple[int, str]]:
    """(job ID, action) in the order sent: queued, queued, then the first of the two started."""
    base = 1_000_000
    sent = []
    for k in range(count):
        triplet, place = divmod(k, 3)
        if place < 2:
            sent.append((base + 2 * triplet + place, "queued"))
        else:
            sent.append((base + 2 * triplet, "in_progress"))
    return sent


def body_of(template: dict[str, Any], job_id: int, action: str, at: str) -> bytes:
    payload = copy.deepcopy(template)
    payload["action"] = action
    job = payload["workflow_job"]
    job.update({"id": job_id, "status": action, "created_at": at, "started_at": at})
    if action == "in_progress":
        job.update({"runner_id": job_id, "runner_name": f"i-{job_id:x}"})
    return json.dumps(payload).encode()


def signed(body: bytes) -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": "workflow_job",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={digest}",
    }


async def burst(
    http: httpx.AsyncClient, sent: list[tuple[int, str]], rate: float
) -> tuple[list[float], list[int], float, int]:
    """Each delivery sent at its moment; (latencies, statuses, the sender's worst lag, the most
    awaiting their answer at once: at least as many as the bot had in progress)."""
    template = json.loads(FIXTURE.read_text())
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    bodies = [body_of(template, job_id, action, at) for job_id, action in sent]
    latencies: list[float] = []
    statuses: list[int] = []
    lag = 0.0
    awaiting = most_awaiting = 0

    async def deliver(body: bytes) -> None:
        nonlocal awaiting, most_awaiting
        started = time.perf_counter()
        awaiting += 1
        most_awaiting = max(most_awaiting, awaiting)
        try:
            response = await http.post("/webhooks/github", content=body, headers=signed(body))
            statuses.append(response.status_code)
        except httpx.HTTPError:
            statuses.append(599)
        awaiting -= 1
        latencies.append(time.perf_counter() - started)

    tasks = []
    begun = time.perf_counter()
    for k, body in enumerate(bodies):
        due = begun + k / rate
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        lag = max(lag, time.perf_counter() - due)
        tasks.append(asyncio.create_task(deliver(body)))
    await asyncio.gather(*tasks)
    return latencies, statuses, lag, most_awaiting


def lost(live: list[dict[str, Any]], sent: list[tuple[int, str]]) -> int:
    """Jobs not in the store with the last state delivered for them."""
    last = {job_id: action for job_id, action in sent}
    kept = {job["id"]: job["status"] for job in live}
    return sum(kept.get(job_id) != action for job_id, action in last.items())


async def run(rate: float, seconds: float) -> None:
    count = int(rate * seconds)
    sent = deliveries(count)
    emulator = SlackEmulator(token="xoxb-bench", channels=(CHANNEL,))
    with RedisServer() as redis, serve_in_thread(emulator.app) as slack:
        settings = load_settings(
            _env_file=None,
            slack_app_token=None,
            slack_bot_token="xoxb-bench",
            slack_signing_secret="bench",
            slack_api_url=f"{slack.url}/api/",
            slack_channel=CHANNEL,
            redis_url=redis.url,
            alert_webhook_token="bench-token",
            github_webhook_secret=SECRET,
            log_level="WARNING",
        )
        with serve_in_thread(build_app(build_bot(settings)), port=free_port()) as served:
            limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
            async with httpx.AsyncClient(
                base_url=served.url, timeout=GITHUB_WAITS_S * 3, limits=limits
            ) as http:
                latencies, statuses, lag, awaiting = await burst(http, sent, rate)
            # The bot's own client lives on its server's loop: this one reads the same keys.
            async with Redis.from_url(redis.url, decode_responses=True) as client:
                live = await WorkflowJobs(client, Keys(settings.redis_prefix)).live()
    jobs = len({job_id for job_id, _ in sent})
    answered_2xx = sum(200 <= status < 300 for status in statuses)
    late = sum(latency > GITHUB_WAITS_S for latency in latencies)
    p50, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.99))
    print(
        f"github webhooks ({count} signed workflow_job deliveries at {rate:g}/s for "
        f"{seconds:g} s, {jobs} jobs, half of them then started):"
    )
    print(
        f"  answered 2xx: {answered_2xx} of {count}; over GitHub's 10 s: {late}; "
        f"p50 {p50:.1f} ms · p99 {p99:.1f} ms · max {max(latencies) * 1000:.1f} ms "
        f"(sender at most {lag * 1000:.0f} ms behind its schedule; at most {awaiting} "
        "awaiting their answer at once)"
    )
    print(f"  lost: {lost(live, sent)} of {jobs} jobs not in the store with their last state")


INCIDENTS = 10  # threads the clicks go to
HOLD_S = 1.0  # a slow sender's pause mid-body
FLOOD_MOST = 500_000  # forged deliveries at most, whatever the time left
SLACK_WAITS_S = 3.0
REFUSED = {
    429: "over the rate (429)",
    503: "with the concurrency in progress (503)",
    401: "for their signature (401)",
}


def limit(name: str) -> str:
    """A limit the served bot has: this environment's (it passes on), else the default."""
    default = Settings.model_fields[f"github_webhook_{name}"].default
    return os.environ.get(f"GITHUB_WEBHOOK_{name.upper()}", f"{default:g}")


def summaries(lines: list[str]) -> list[str]:
    return [line for line in lines if "GITHUB_WEBHOOK_RATE" in line]


def forged(port: int, n: int, body: bytes) -> bytes:
    """A delivery nobody signed, as raw HTTP's headers: GitHub's `body` under a fresh ID, an
    invented event and a signature of random bytes."""
    head = (
        "POST /webhooks/github HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\n"
        f"X-GitHub-Event: invented_{n}\r\n"
        f"X-GitHub-Delivery: {uuid.uuid4()}\r\n"
        f"X-Hub-Signature-256: sha256={secrets.token_hex(32)}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode()


async def status_of(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(
        (int(line[15:]) for line in lines if line.lower().startswith(b"content-length:")), 0
    )
    await reader.readexactly(length)
    return int(lines[0].split(b" ", 2)[1])


async def forge(
    port: int, until: float, sent: Iterator[int], hold_s: float, statuses: Counter[int]
) -> None:
    """One sender's forged deliveries, each once the last is answered, until `until` or
    FLOOD_MOST in all; with `hold_s`, half of each body comes that long after the rest. Raw
    HTTP: httpx would spend on itself the CPU the flood is for."""
    body = FIXTURE.read_bytes()
    while time.perf_counter() < until:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < until and (n := next(sent)) < FLOOD_MOST:
                head = forged(port, n, body)
                half = len(body) // 2 if hold_s else len(body)
                writer.write(head + body[:half])
                if hold_s:
                    await writer.drain()
                    await asyncio.sleep(hold_s)
                writer.write(body[half:])
                statuses[await status_of(reader)] += 1
            return
        except (ConnectionError, asyncio.IncompleteReadError):
            statuses[0] += 1  # the bot closed the connection: sent again on a new one
        finally:
            writer.close()


def flood(port: int, senders: int, slow: int, seconds: float) -> dict[int, int]:
    """Forged deliveries for `seconds` from `senders` fast connections and `slow` slow ones, in
    the process this runs in: how many got each status (0: the connection closed)."""

    async def sending() -> dict[int, int]:
        statuses: Counter[int] = Counter()
        until, sent = time.perf_counter() + seconds, itertools.count()
        holds = [0.0] * senders + [HOLD_S] * slow
        await asyncio.gather(*(forge(port, until, sent, hold, statuses) for hold in holds))
        return dict(statuses)

    return asyncio.run(sending())


def shown(latencies: list[float]) -> str:
    p50, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.99))
    return f"p50 {p50:.1f} ms · p99 {p99:.1f} ms · max {max(latencies) * 1000:.1f} ms"


@dataclass
class Phase:
    name: str
    clicks: list[float]  # to Slack's 200, seconds
    statuses: dict[int, int]  # the forged deliveries' answers
    flood_s: float
    cpu: float  # the bot's, cores
    logged: list[str]  # the bot's log lines meanwhile


async def run_flood(senders: int, slow: int, clicks: float, seconds: float) -> None:
    context = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryFile() as logs,
        ProcessPoolExecutor(max_workers=1, mp_context=context) as pool,
    ):
        async with served_bot(logs=logs, GITHUB_WEBHOOK_SECRET=SECRET) as served:
            roots = await open_incidents(served.http, served.emulator, INCIDENTS)
            url, port = str(served.http.base_url), served.http.base_url.port or 80

            async def phase(name: str, fast: int, holding: int) -> Phase:
                """Clicks for `seconds`, beside a flood from `fast` and `holding` senders."""
                # The clicks' process takes a second or two to start: the flood outlasts them.
                flood_s = seconds + 5 if fast or holding else 0
                cpu_s, began, logged = usage(served.pid).cpu_s, time.perf_counter(), logs.tell()
                flooding = asyncio.wrap_future(pool.submit(flood, port, fast, holding, flood_s))
                clicked = await asyncio.to_thread(
                    under_load, url, served.emulator, roots, clicks, seconds
                )
                statuses = await flooding
                took = time.perf_counter() - began
                logs.seek(logged)
                lines = logs.read().decode(errors="replace").splitlines()
                cpu = (usage(served.pid).cpu_s - cpu_s) / took
                return Phase(name, clicked, statuses, flood_s, cpu, lines)

            await asyncio.wrap_future(pool.submit(flood, port, 0, 0, 0))  # its process is up
            # The slow alone, and first: beside or after the fast ones, they would mostly meet
            # the rate those spent.
            phases = [
                await phase("no flood", 0, 0),
                await phase(f"{slow} slow senders", 0, slow),
                await phase(f"{senders} fast senders", senders, 0),
            ]
    print(
        f"github webhooks under a flood of forged deliveries (fast senders each send as soon as "
        f"answered, slow ones hold each body {HOLD_S:g} s) beside {clicks:g} Slack clicks a "
        f"second for {seconds:g} s, at GITHUB_WEBHOOK_RATE {limit('rate')} and "
        f"GITHUB_WEBHOOK_CONCURRENCY {limit('concurrency')}:"
    )
    for ran in phases:
        print(f"  {ran.name}: clicks to Slack's 200 {shown(ran.clicks)}")
        sent = sum(ran.statuses.values())
        if not sent:
            continue
        said = [f"{ran.statuses.get(code, 0)} {what}" for code, what in REFUSED.items()]
        others = sent - sum(ran.statuses.get(code, 0) for code in REFUSED)
        print(
            f"    forged: {sent} in {ran.flood_s:g} s ({sent / ran.flood_s:.0f} a second): "
            f"{', '.join(said)}, {others} otherwise; the bot's CPU {ran.cpu:.0%} of a core, "
            f"{len(ran.logged)} log lines, of them {len(summaries(ran.logged))} the limits' summary"
        )
    within = all(c <= SLACK_WAITS_S for ran in phases for c in ran.clicks)
    print(f"  every click answered within Slack's 3 s: {'yes' if within else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="deliveries a second")
    parser.add_argument("--seconds", type=float, help="60 (a push), 10 (--flood)")
    parser.add_argument("--flood", action="store_true", help="forged deliveries beside clicks")
    parser.add_argument("--senders", type=int, default=8, help="--flood's fast connections")
    parser.add_argument("--slow", type=int, default=80, help="--flood's slow connections")
    parser.add_argument("--clicks", type=float, default=20, help="--flood's clicks a second")
    args = parser.parse_args()
    if args.flood:
        asyncio.run(run_flood(args.senders, args.slow, args.clicks, args.seconds or 10.0))
    else:
        asyncio.run(run(args.rate, args.seconds or 60.0))


if __name__ == "__main__":
    main()
