"""Sixty team channels, one replica: every channel's sender waits on its doorbells over the
doorbell client's connections, so the main pool (100 connections) stays free for commands, as
`CLIENT LIST` on the real redis-server shows; an alert still opens its thread at once."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

from tests.support.payloads import fixture_json
from tests.support.running import eventually, run_bot
from tests.support.slack import CHANNEL, Slack

TEAMS = 60  # 61 channels: two idle waits each (posts, root edits), more than the main pool's 100


async def test_sixty_team_channels_leave_the_main_pool_to_commands(
    settings_for: Any, slack: Slack, redis_url: str
) -> None:
    routes = [{"match": [f"team=t{n}"], "channel": f"C0TEAM{n}"} for n in range(TEAMS)]
    for route in routes:
        slack.emulator.add_channel(route["channel"])
    server = Redis.from_url(redis_url, decode_responses=True)

    async def waiting() -> dict[str, int]:
        by_name: dict[str, int] = {}
        for client in await server.client_list():
            if client.get("cmd") == "blpop":
                by_name[client.get("name", "")] = by_name.get(client.get("name", ""), 0) + 1
        return by_name

    async with run_bot(settings_for(slack_routes=json.dumps(routes))) as running:
        blocked = await eventually(
            lambda: _many(waiting()), what="every sender waiting on its doorbells", timeout=30
        )
        assert set(blocked) == {"queuepilot-bells"}, blocked
        answer = await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
        assert answer.status_code == 202
        await eventually(
            lambda: slack.emulator.channel_messages(CHANNEL), what="the thread", timeout=15
        )
    await server.aclose()


async def _many(counts: Any) -> dict[str, int] | None:
    found = await counts
    return found if sum(found.values()) > 100 else None
