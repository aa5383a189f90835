"""GitHub's workflow_job webhooks in a busy organization's push: a burst of signed deliveries at a
steady rate (100 a second for 60 s by default), each answered within GitHub's 10 s, none lost.

Runs a real redis-server, the Slack emulator and one bot, all on loopback; the deliveries are the
fixture's, each a job of its own, with a fresh X-GitHub-Delivery and X-Hub-Signature-256, sent
on schedule whatever the answers (GitHub does not wait for one before the next). Two of every
three deliveries queue a new job, the third starts the first of those two, so half the jobs end
in progress. Then every job must be in the store with its last state.

`make bench` runs it; numbers depend on the machine, so compare runs on the same one.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import hmac
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from redis.asyncio import Redis

from bench.intake import percentile
from bot.app import build_app, build_bot
from bot.config import load_settings
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
) -> tuple[list[float], list[int], float]:
    """Each delivery sent at its moment; (latencies, statuses, the sender's worst lag)."""
    template = json.loads(FIXTURE.read_text())
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    bodies = [body_of(template, job_id, action, at) for job_id, action in sent]
    latencies: list[float] = []
    statuses: list[int] = []
    lag = 0.0

    async def deliver(body: bytes) -> None:
        started = time.perf_counter()
        try:
            response = await http.post("/webhooks/github", content=body, headers=signed(body))
            statuses.append(response.status_code)
        except httpx.HTTPError:
            statuses.append(599)
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
    return latencies, statuses, lag


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
                latencies, statuses, lag = await burst(http, sent, rate)
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
        f"(sender at most {lag * 1000:.0f} ms behind its schedule)"
    )
    print(f"  lost: {lost(live, sent)} of {jobs} jobs not in the store with their last state")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="deliveries a second")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    asyncio.run(run(args.rate, args.seconds))


if __name__ == "__main__":
    main()
