"""Actions benchmark: how fast a responder's click is answered, and how fast it shows.

Runs a real redis-server, the Slack emulator (enforcing Slack's rate limits), a Grafana-shaped
silence API and one bot on loopback, then measures, for N incidents:
- click to Slack's 200 (signed `block_actions`, the silence select), with a backend answering at
  once and with one that hangs: Slack needs the 200 within 3 s whatever the backend does;
- click to the silence shown on the root message (the backend call, the commit, the edit).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import hashlib
import hmac
import json
import time
import urllib.parse
from pathlib import Path

import httpx

from bench import incident_roots
from bot.app import build_app, build_bot
from bot.config import load_settings
from bot.sandbox.redis_server import RedisServer, free_port
from bot.sandbox.serve import serve_in_thread
from bot.sandbox.silence_api import FakeSilenceApi
from bot.sandbox.slack_api import SlackEmulator

ALERT = Path(__file__).resolve().parents[1] / "bot/sandbox/alerts/queue-alert-firing.json"
TOKEN, SECRET, CHANNEL = "bench-token", "bench-signing", "C0BENCH"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def signed_click(message_ts: str, n: int) -> tuple[str, dict[str, str]]:
    payload = {
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


async def run(count: int) -> None:
    emulator = SlackEmulator(token="xoxb-bench", channels=(CHANNEL,), enforce_rate_limits=True)
    grafana = FakeSilenceApi()
    with (
        RedisServer() as redis,
        serve_in_thread(emulator.app) as slack,
        serve_in_thread(grafana.app) as api,
    ):
        settings = load_settings(
            _env_file=None,
            slack_app_token=None,
            slack_bot_token="xoxb-bench",
            slack_signing_secret=SECRET,
            slack_api_url=f"{slack.url}/api/",
            slack_channel=CHANNEL,
            redis_url=redis.url,
            alert_webhook_token=TOKEN,
            silence_backend="grafana",
            grafana_url=api.url,
            grafana_token=grafana.token,
            log_level="WARNING",
        )
        with serve_in_thread(build_app(build_bot(settings)), port=free_port()) as bot:
            async with httpx.AsyncClient(base_url=bot.url, timeout=30) as http:
                await report(http, emulator, grafana, count)


async def report(
    http: httpx.AsyncClient, emulator: SlackEmulator, grafana: FakeSilenceApi, count: int
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incidents", type=int, default=30)
    asyncio.run(run(parser.parse_args().incidents))


if __name__ == "__main__":
    main()
