"""Failover benchmark: two replicas, one leading; clicks taken by either; the leader SIGKILLed.

Runs a real redis-server, the Slack emulator (enforcing Slack's rate limits) and two replicas of
the bot as production processes (`python -m bot serve`) on one Redis and one Slack, as two pods
of a Deployment, then measures:
- a click's reply in the thread (an Acknowledge that hands the incident over, so each click
  posts one "Taken over" line), p50/p99, taken by the leader and taken by the follower;
- failover mid-storm and mid-incident: `--groups` new alert groups arrive, the leader is
  SIGKILLed while their roots are being posted, and at once a responder acknowledges the open
  incident through the survivor. Timed: until the survivor leads, and until the click's effect
  shows (the root, edited in place, names who acknowledged it; the goal: within 10 s; its line
  in the thread waits behind the storm's new roots, which Slack's pace posts first). Checked:
  every group shown once, no duplicates, no dead letters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from redis.asyncio import Redis

from bench import incident_roots, write_table
from bench.actions import ALERT, CHANNEL, SECRET, TOKEN, ack_click, percentile, signed
from bot.config import Settings
from bot.storage.keys import Keys
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 10.0
LEASE_S = Settings.model_fields["leader_lease_ms"].default / 1000  # the replicas' own
PAUSE_S = 1.5
USERS = ("U0ALICE", "U0BOB")  # people the emulator's workspace knows


class Replica:
    def __init__(self, slack_url: str, redis_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": "xoxb-bench",
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": f"{slack_url}/api/",
            "SLACK_CHANNEL": CHANNEL,
            "REDIS_URL": redis_url,
            "ALERT_WEBHOOK_TOKEN": TOKEN,
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "LOG_LEVEL": "WARNING",
        }
        env.pop("SLACK_APP_TOKEN", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


async def _until(check: Any, what: str, within_s: float = 60) -> float:
    started = time.perf_counter()
    while True:
        try:
            if await check():
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        if time.perf_counter() - started > within_s:
            raise TimeoutError(f"{what}: not within {within_s:g} s")
        await asyncio.sleep(0.01)


async def _leads(http: httpx.AsyncClient, replica: Replica) -> bool:
    return bool((await http.get(f"{replica.url}/readyz")).json().get("leads"))


async def _alert(http: httpx.AsyncClient, replica: Replica, key: str) -> None:
    payload = json.loads(ALERT.read_text())
    payload["groupKey"] = key
    headers = {"Authorization": f"Bearer {TOKEN}"}
    response = await http.post(f"{replica.url}/alerts/grafana", json=payload, headers=headers)
    assert response.status_code == 202, response.text


async def _click(http: httpx.AsyncClient, replica: Replica, payload: dict[str, Any]) -> None:
    body, headers = signed(payload)
    response = await http.post(f"{replica.url}/slack/events", content=body, headers=headers)
    assert response.status_code == 200, response.text


def _ack_by(root: Any, n: int, user: str) -> dict[str, Any]:
    payload = ack_click(root, n)
    payload["user"] = {"id": user, "username": user.lower()}
    return payload


def _replies(emulator: SlackEmulator, ts: str) -> int:
    return len(emulator.thread(CHANNEL, ts))


def _root_text(emulator: SlackEmulator, ts: str) -> str:
    root = next(m for m in incident_roots(emulator, CHANNEL) if m.ts == ts)
    return root.text + json.dumps(root.blocks)


async def click_replies(
    http: httpx.AsyncClient, emulator: SlackEmulator, taker: Replica, root: Any, clicks: int
) -> list[float]:
    """Click to its reply in the thread, each click handing the incident to another person."""
    took = []
    for n in range(clicks):
        # Apart as responders click, not back to back: the channel's post budget (about one a
        # second) would be measured instead of the path from the click to the thread.
        await asyncio.sleep(PAUSE_S)
        before = _replies(emulator, root.ts)
        started = time.perf_counter()
        await _click(http, taker, _ack_by(root, n, USERS[n % 2]))

        async def replied(before: int = before) -> bool:
            return _replies(emulator, root.ts) > before

        await _until(replied, "a click's reply")
        took.append(time.perf_counter() - started)
    return took


async def run(groups: int, clicks: int, write: bool) -> None:
    emulator = SlackEmulator(token="xoxb-bench", channels=(CHANNEL,), enforce_rate_limits=True)
    with RedisServer() as redis, serve_in_thread(emulator.app) as slack:
        replicas = [Replica(slack.url, redis.url) for _ in range(2)]
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                for replica in replicas:
                    await _until(lambda r=replica: _ready(http, r), "a replica up")
                leader = replicas[0] if await _leads(http, replicas[0]) else replicas[1]
                follower = replicas[1] if leader is replicas[0] else replicas[0]
                assert await _leads(http, leader) and not await _leads(http, follower)

                await _alert(http, follower, "failover-incident")
                await _until(lambda: _shown(emulator, 1), "the incident's root")
                root = incident_roots(emulator, CHANNEL)[0]
                by_leader = await click_replies(http, emulator, leader, root, clicks)
                by_follower = await click_replies(http, emulator, follower, root, clicks)

                for n in range(groups):
                    await _alert(http, follower, f"failover-storm-{n}")
                await _until(lambda: _shown(emulator, 4), "the storm's first roots")
                leader.stop()
                killed = time.perf_counter()
                await _click(http, follower, _ack_by(root, clicks * 2, USERS[clicks % 2]))
                led = await _until(lambda: _leads(http, follower), "the survivor leading")

                taker = USERS[clicks % 2]

                async def acked() -> bool:  # the root names its new owner (`<@U…>`)
                    return f"acknowledged by <@{taker}>" in _root_text(emulator, root.ts)

                await _until(acked, "the click's effect", within_s=60)
                effect = time.perf_counter() - killed
                await _until(lambda: _shown(emulator, groups + 1), "every root", within_s=300)
                uids = [
                    m.metadata["event_payload"]["uid"] for m in incident_roots(emulator, CHANNEL)
                ]
                dead = await _dead_letters(redis.url)
        finally:
            for replica in replicas:
                replica.stop()
    lines = [
        "| what | result |",
        "|---|---|",
        f"| a click's reply in the thread, taken by the leader ({clicks}) | "
        f"p50 {_ms(by_leader, 0.5)} · p99 {_ms(by_leader, 0.99)} |",
        f"| a click's reply in the thread, taken by the follower ({clicks}) | "
        f"p50 {_ms(by_follower, 0.5)} · p99 {_ms(by_follower, 0.99)} |",
        f"| leader SIGKILLed mid-storm ({groups} new groups): the survivor leads after "
        f"(goal ≤ one lease, {LEASE_S:g} s) | {led:.1f} s |",
        f"| a click taken at the kill: its effect on the root after (goal ≤ {GOAL_S:g} s) | "
        f"{effect:.1f} s |",
        f"| roots shown / duplicates / dead letters | {len(uids)} of {groups + 1} / "
        f"{len(uids) - len(set(uids))} / {dead} |",
    ]
    print("\n".join(lines))
    if write:
        write_table(
            "failover", "Failover: two replicas, the leader SIGKILLed (`bench/failover.py`)", lines
        )
    assert len(uids) == len(set(uids)) == groups + 1 and dead == 0
    assert effect <= GOAL_S, f"the click's effect took {effect:.1f} s"
    assert led <= LEASE_S, f"the survivor led after {led:.1f} s, past one lease"


def _ms(samples: list[float], q: float) -> str:
    return f"{percentile(samples, q) * 1000:.0f} ms"


async def _ready(http: httpx.AsyncClient, replica: Replica) -> bool:
    return (await http.get(f"{replica.url}/readyz")).status_code == 200


async def _shown(emulator: SlackEmulator, count: int) -> bool:
    return len(incident_roots(emulator, CHANNEL)) >= count


async def _dead_letters(url: str) -> int:
    client = Redis.from_url(url)
    try:
        return int(await client.xlen(Keys("qp").dead_letters))
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=60)
    parser.add_argument("--clicks", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    asyncio.run(run(args.groups, args.clicks, args.write))


if __name__ == "__main__":
    main()
