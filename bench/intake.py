"""Intake benchmark: how fast alerts are accepted, and how fast they become Slack threads.

Runs a real redis-server, the Slack emulator (enforcing Slack's rate limits) and one bot with
production pacing, all on loopback, then measures:
- webhook latency: sequential POSTs of the queue alert, time to the 202 (p50, p95, p99);
- webhook throughput: concurrent POSTs, accepted per second;
- alert to thread: N new alert groups at once, time until every root message is in Slack,
  and how many 429s Slack answered (pacing should keep that at zero).

`make bench` runs it; numbers depend on the machine, so compare runs on the same one.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import time
from pathlib import Path
from typing import Any

import httpx

from bench import incident_roots
from bot.app import build_app, build_bot
from bot.config import load_settings
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

ALERT = Path(__file__).resolve().parents[1] / "sandbox" / "alerts" / "queue-alert-firing.json"
TOKEN = "bench-token"
CHANNEL = "C0BENCH"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def alert_for_group(base: dict[str, Any], group: int) -> dict[str, Any]:
    payload = copy.deepcopy(base)
    payload["groupKey"] = f"{base['groupKey']}/bench-{group}"
    return payload


async def webhook_latency(http: httpx.AsyncClient, body: bytes, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        response = await http.post("/alerts/grafana", content=body)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 202, response.text
    return samples


async def webhook_throughput(
    http: httpx.AsyncClient, body: bytes, count: int, workers: int
) -> float:
    remaining = iter(range(count))

    async def worker() -> None:
        for _ in remaining:
            response = await http.post("/alerts/grafana", content=body)
            assert response.status_code == 202, response.text

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return count / (time.perf_counter() - started)


async def alert_to_threads(
    http: httpx.AsyncClient, emulator: SlackEmulator, base: dict[str, Any], groups: int
) -> float:
    before = len(incident_roots(emulator, CHANNEL))
    started = time.perf_counter()
    for group in range(groups):
        response = await http.post(
            "/alerts/grafana", content=json.dumps(alert_for_group(base, group))
        )
        assert response.status_code == 202, response.text
    deadline = started + 120
    while len(incident_roots(emulator, CHANNEL)) < before + groups:
        if time.perf_counter() > deadline:
            raise TimeoutError("threads did not all open within 120 s")
        await asyncio.sleep(0.01)
    return time.perf_counter() - started


async def run(requests: int, groups: int) -> None:
    base = json.loads(ALERT.read_text())
    body = json.dumps(base).encode()
    emulator = SlackEmulator(token="xoxb-bench", channels=(CHANNEL,), enforce_rate_limits=True)
    with RedisServer() as redis, serve_in_thread(emulator.app) as slack:
        settings = load_settings(
            _env_file=None,
            slack_app_token=None,
            slack_bot_token="xoxb-bench",
            slack_signing_secret="bench",
            slack_api_url=f"{slack.url}/api/",
            slack_channel=CHANNEL,
            redis_url=redis.url,
            alert_webhook_token=TOKEN,
            log_level="WARNING",
        )
        with serve_in_thread(build_app(build_bot(settings)), port=free_port()) as bot:
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            async with httpx.AsyncClient(base_url=bot.url, headers=headers, timeout=30) as http:
                await report(http, emulator, base, body, requests, groups)


async def report(
    http: httpx.AsyncClient,
    emulator: SlackEmulator,
    base: dict[str, Any],
    body: bytes,
    requests: int,
    groups: int,
) -> None:
    latency = await webhook_latency(http, body, requests)
    p50, p95, p99 = (percentile(latency, q) * 1000 for q in (0.5, 0.95, 0.99))
    print(f"webhook latency ({requests} sequential POSTs, 202 each):")
    print(f"  p50 {p50:.2f} ms · p95 {p95:.2f} ms · p99 {p99:.2f} ms")
    rate = await webhook_throughput(http, body, requests, workers=20)
    print(f"webhook throughput (20 concurrent clients): {rate:.0f} notifications/s accepted")
    took = await alert_to_threads(http, emulator, base, groups)
    limited = sum(1 for call in emulator.calls("chat.postMessage") if call.status == 429)
    print(
        f"alert to thread: {groups} new alert groups at once -> {groups} threads in {took:.2f} s"
        f" (Slack pacing 1 post/s per channel), {limited} answers of 429 from Slack"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--groups", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(run(args.requests, args.groups))


if __name__ == "__main__":
    main()
