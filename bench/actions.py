"""Actions benchmark: how fast a responder's click is answered, and how fast it shows.

Runs a real redis-server, the Slack emulator (enforcing Slack's rate limits), a Grafana-shaped
silence API and the bot as its production process (`python -m bot serve`), all on loopback, then
measures, for N incidents:
- click to Slack's 200 (signed `block_actions`, the silence select), with a backend answering at
  once and with one that hangs: Slack needs the 200 within 3 s whatever the backend does;
- click to the silence shown on the root message (the backend call, the commit, the edit);
- click to Slack's 200 under load: `--rate` clicks per second (50 by default) for `--seconds`,
  Acknowledge and Silence in turn across the incidents, each sent on schedule whether or not
  the previous one was answered (an open loop, as many responders clicking at once would).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import hmac
import json
import multiprocessing
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from bench import incident_roots
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.silence_api import FakeSilenceApi
from sandbox.slack_api import SlackEmulator

ROOT = Path(__file__).resolve().parents[1]
ALERT = ROOT / "sandbox/alerts/queue-alert-firing.json"
TOKEN, SECRET, CHANNEL = "bench-token", "bench-signing", "C0BENCH"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def signed_click(message_ts: str, n: int) -> tuple[str, dict[str, str]]:
    return signed(silence_click(message_ts, n))


def silence_click(message_ts: str, n: int) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": "U0ALICE", "username": "alice"},
        "team": {"id": "T0BENCH"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
        "channel": {"id": CHANNEL},
        "trigger_id": f"{n}.1",
        "actions": [
            {
                "type": "static_select",
                "action_id": "incident_silence",
                "block_id": "incident_actions",
                "selected_option": {"value": "3600"},
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def ack_click(root: Any, n: int) -> dict[str, Any]:
    """The Acknowledge button as the root message shows it (its value names the incident)."""
    button = next(
        element
        for block in root.blocks
        if block.get("type") == "actions"
        for element in block.get("elements", [])
        if element.get("action_id") == "incident_ack"
    )
    payload = silence_click(root.ts, n)
    payload["actions"] = [
        {
            "type": "button",
            "action_id": "incident_ack",
            "block_id": "incident_actions",
            "value": button["value"],
            "action_ts": f"{time.time():.6f}",
        }
    ]
    return payload


def signed(payload: dict[str, Any]) -> tuple[str, dict[str, str]]:
    body = urllib.parse.urlencode({"payload": json.dumps(payload)})
    stamp = str(int(time.time()))
    signature = hmac.new(SECRET.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256)
    return body, {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": "v0=" + signature.hexdigest(),
    }


async def open_incidents(http: httpx.AsyncClient, emulator: SlackEmulator, count: int) -> list[str]:
    base = json.loads(ALERT.read_text())
    for n in range(count):
        payload = copy.deepcopy(base)
        payload["groupKey"] = f"bench-{n}"
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        response = await http.post("/alerts/grafana", content=json.dumps(payload), headers=headers)
        assert response.status_code == 202, response.text
    deadline = time.perf_counter() + 120
    while len(incident_roots(emulator, CHANNEL)) < count:
        if time.perf_counter() > deadline:
            raise TimeoutError("threads did not all open within 120 s")
        await asyncio.sleep(0.02)
    return [m.ts for m in incident_roots(emulator, CHANNEL)]


async def clicks(
    http: httpx.AsyncClient, emulator: SlackEmulator, roots: list[str]
) -> tuple[list[float], list[float]]:
    acked, shown = [], []
    for n, ts in enumerate(roots):
        body, headers = signed_click(ts, n)
        started = time.perf_counter()
        response = await http.post("/slack/events", content=body, headers=headers)
        acked.append(time.perf_counter() - started)
        assert response.status_code == 200, response.text
        while True:
            root = next(m for m in incident_roots(emulator, CHANNEL) if m.ts == ts)
            if "silenced until" in json.dumps(root.blocks):
                break
            await asyncio.sleep(0.002)
        shown.append(time.perf_counter() - started)
    return acked, shown


def under_load(
    url: str, emulator: SlackEmulator, roots: list[str], rate: float, seconds: float
) -> list[float]:
    """Click to Slack's 200 for `rate` clicks per second, sent on schedule (an open loop), from a
    process of its own: this one hosts the emulator, whose work would otherwise be timed too."""
    shown = {m.ts: m for m in incident_roots(emulator, CHANNEL)}
    payloads = [
        ack_click(shown[ts], n) if n % 2 == 0 else silence_click(ts, n)
        for n in range(int(rate * seconds))
        for ts in [roots[n % len(roots)]]
    ]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(_click_at_rate, url, payloads, rate).result()


def _click_at_rate(url: str, payloads: list[dict[str, Any]], rate: float) -> list[float]:
    async def clicks() -> list[float]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:

            async def click(payload: dict[str, Any]) -> float:
                body, headers = signed(payload)
                started = time.perf_counter()
                response = await http.post("/slack/events", content=body, headers=headers)
                assert response.status_code == 200, response.text
                return time.perf_counter() - started

            await http.get("/readyz")  # the connection is open before the clock starts
            start = time.perf_counter()
            tasks = []
            for n, payload in enumerate(payloads):
                await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
                tasks.append(asyncio.create_task(click(payload)))
            return list(await asyncio.gather(*tasks))

    return asyncio.run(clicks())


@dataclass
class ServedBot:
    http: httpx.AsyncClient
    emulator: SlackEmulator
    grafana: FakeSilenceApi
    pid: int


@asynccontextmanager
async def served_bot(*, logs: IO[bytes] | None = None, **settings: str) -> AsyncIterator[ServedBot]:
    """The bot as its production process, on a real redis-server, the Slack emulator and a
    Grafana-shaped silence API; `logs`: where its log goes (else this process's stderr),
    `settings`: more of its environment."""
    emulator = SlackEmulator(token="xoxb-bench", channels=(CHANNEL,), enforce_rate_limits=True)
    grafana = FakeSilenceApi()
    with (
        RedisServer() as redis,
        serve_in_thread(emulator.app) as slack,
        serve_in_thread(grafana.app) as api,
    ):
        port = free_port()
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": "xoxb-bench",
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": f"{slack.url}/api/",
            "SLACK_CHANNEL": CHANNEL,
            "REDIS_URL": redis.url,
            "ALERT_WEBHOOK_TOKEN": TOKEN,
            "SILENCE_BACKEND": "grafana",
            "GRAFANA_URL": api.url,
            "GRAFANA_TOKEN": grafana.token,
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "LOG_LEVEL": "INFO",  # the default, as users run it
            **settings,
        }
        env.pop("SLACK_APP_TOKEN", None)
        bot = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is timed)
            [sys.executable, "-m", "bot", "serve"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=logs,
        )
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                await _ready(http)
                yield ServedBot(http, emulator, grafana, bot.pid)
        finally:
            bot.terminate()
            bot.wait(10)


async def run(count: int, rate: float, seconds: float) -> None:
    async with served_bot() as served:
        await report(served.http, served.emulator, served.grafana, count, rate, seconds)


async def _ready(http: httpx.AsyncClient) -> None:
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline:
        try:
            if (await http.get("/readyz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.05)
    raise TimeoutError("the bot did not start")


async def report(
    http: httpx.AsyncClient,
    emulator: SlackEmulator,
    grafana: FakeSilenceApi,
    count: int,
    rate: float,
    seconds: float,
) -> None:
    roots = await open_incidents(http, emulator, count + 1)
    acked, shown = await clicks(http, emulator, roots[:count])
    print(f"silence click ({count} incidents, backend answering at once):")
    print(
        f"  to Slack's 200: p50 {percentile(acked, 0.5) * 1000:.1f} ms · "
        f"p99 {percentile(acked, 0.99) * 1000:.1f} ms"
    )
    print(
        f"  to the root showing it: p50 {percentile(shown, 0.5) * 1000:.0f} ms · "
        f"p99 {percentile(shown, 0.99) * 1000:.0f} ms (edits paced for Slack's Tier 3)"
    )
    release = grafana.hang()
    body, headers = signed_click(roots[count], count)
    started = time.perf_counter()
    response = await http.post("/slack/events", content=body, headers=headers)
    hung = time.perf_counter() - started
    assert response.status_code == 200
    print(f"  with the backend hanging: Slack's 200 after {hung * 1000:.1f} ms")
    release.set()
    loaded = await asyncio.to_thread(
        under_load, str(http.base_url), emulator, roots[:count], rate, seconds
    )
    print(
        f"clicks under load ({rate:g}/s for {seconds:g} s, Acknowledge and Silence in turn): "
        f"to Slack's 200 p50 {percentile(loaded, 0.5) * 1000:.1f} ms · "
        f"p99 {percentile(loaded, 0.99) * 1000:.1f} ms · max {max(loaded) * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=30)
    parser.add_argument("--rate", type=float, default=50, help="clicks per second under load")
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    asyncio.run(run(args.incidents, args.rate, args.seconds))


if __name__ == "__main__":
    main()
