"""What one notification costs the bot: Redis round trips and commands, and CPU time.

Runs a real redis-server, the Slack emulator and one bot in this process, sends notifications
through the real webhook, waits until Slack shows every one of them, and reports per
notification:
- Redis round trips (requests written to a Redis socket: a pipeline or a script is one),
- Redis commands executed (from INFO commandstats, so a pipeline counts every command),
- CPU time of the whole process (bot, emulator and client together, so an upper bound).

Two shapes: re-notifications of one alert group (the common case: the root is edited) and new
alert groups (each opens a thread). Round trips are counted by wrapping the connection's send
method in this measurement script only; nothing in the bot is changed for it.
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
import redis as sync_redis
from redis.asyncio.connection import Connection

from bench import incident_roots
from bot.app import build_app, build_bot
from bot.config import load_settings
from sandbox.redis_server import RedisServer, free_port
from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

ALERT = Path(__file__).resolve().parents[1] / "sandbox/alerts/queue-alert-firing.json"
TOKEN = "bench-token"
CHANNEL = "C0BENCH"
_SENT = {"count": 0}


def _count_round_trips() -> None:
    original = Connection.send_packed_command

    async def counted(self: Connection, command: Any, check_health: bool = True) -> None:
        _SENT["count"] += 1
        await original(self, command, check_health)

    Connection.send_packed_command = counted  # type: ignore[method-assign]


async def _until(done: Any) -> None:
    """Poll the in-process emulator (it has no event to wait on) until `done()`; slowly,
    because each look copies the channel and would otherwise dominate the CPU measured."""
    while not done():  # noqa: ASYNC110
        await asyncio.sleep(0.1)


def _commands(client: sync_redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for v in stats.values())


async def _measure(
    http: httpx.AsyncClient,
    emulator: SlackEmulator,
    client: sync_redis.Redis,
    bodies: list[bytes],
    done: Any,
) -> tuple[float, float, float]:
    await asyncio.sleep(1.0)  # let the consumer and scheduler settle into their idle loops
    idle_trips, idle_cmds = _SENT["count"], _commands(client)
    await asyncio.sleep(2.0)
    idle_rate = (_SENT["count"] - idle_trips) / 2.0
    idle_cmd_rate = (_commands(client) - idle_cmds) / 2.0
    trips, cmds = _SENT["count"], _commands(client)
    cpu, wall = time.process_time(), time.monotonic()
    for body in bodies:
        response = await http.post("/alerts/grafana", content=body)
        assert response.status_code == 202, response.text
    await _until(done)
    elapsed = time.monotonic() - wall
    n = len(bodies)
    return (
        (_SENT["count"] - trips - idle_rate * elapsed) / n,
        (_commands(client) - cmds - idle_cmd_rate * elapsed) / n,
        (time.process_time() - cpu) / n * 1000,
    )


async def run(count: int) -> None:
    _count_round_trips()
    base = json.loads(ALERT.read_text())
    emulator = SlackEmulator(token="xoxb-bench", channels=(CHANNEL,))
    with RedisServer() as server, serve_in_thread(emulator.app) as slack:
        settings = load_settings(
            _env_file=None,
            slack_app_token=None,
            slack_bot_token="xoxb-bench",
            slack_signing_secret="bench",
            slack_api_url=f"{slack.url}/api/",
            slack_channel=CHANNEL,
            redis_url=server.url,
            alert_webhook_token=TOKEN,
            log_level="WARNING",
            slack_post_interval_ms=0,
            slack_update_interval_ms=0,
            root_edit_interval_ms=0,
        )
        client = sync_redis.Redis.from_url(server.url)
        bot = build_bot(settings)
        with serve_in_thread(build_app(bot), port=free_port()) as served:
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
            async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=30) as http:
                await http.post("/alerts/grafana", content=json.dumps(base))
                await _until(lambda: bool(incident_roots(emulator, CHANNEL)))
                renotify = []
                for i in range(count):
                    payload = copy.deepcopy(base)
                    payload["alerts"][0]["values"]["max_queue_size"] = 100 + i
                    renotify.append(json.dumps(payload).encode())
                last = str(100 + count - 1)

                def edited() -> bool:
                    root = incident_roots(emulator, CHANNEL)[0]
                    return last in json.dumps(root.blocks)

                re_trips, re_cmds, re_cpu = await _measure(http, emulator, client, renotify, edited)
                groups = []
                for i in range(count):
                    payload = copy.deepcopy(base)
                    payload["groupKey"] = f"{base['groupKey']}/cost-{i}"
                    groups.append(json.dumps(payload).encode())

                def opened() -> bool:
                    return len(incident_roots(emulator, CHANNEL)) >= count + 1

                new_trips, new_cmds, new_cpu = await _measure(
                    http, emulator, client, groups, opened
                )
        client.close()
    print(f"per notification ({count} of each shape; Slack pacing off to isolate the bot's cost):")
    print(
        f"  re-notification of an open group: {re_trips:.1f} Redis round trips, "
        f"{re_cmds:.1f} commands, {re_cpu:.2f} ms CPU"
    )
    print(
        f"  new alert group (opens a thread): {new_trips:.1f} Redis round trips, "
        f"{new_cmds:.1f} commands, {new_cpu:.2f} ms CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(run(args.count))


if __name__ == "__main__":
    main()
