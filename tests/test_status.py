"""The status tick keeps going whatever one incident does."""

from __future__ import annotations

import json
import time
from typing import Any

from redis.asyncio import Redis

from tests.conftest import CHANNEL, Slack, eventually, fixture_json, run_bot


async def test_an_unreadable_incident_does_not_stop_other_status_posts(
    settings_for: Any, slack: Slack, redis_url: str
) -> None:
    # A corrupt or newer-format record (a rolling deploy) must cost only itself.
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.hset(
        "qp:v2:incident:999",
        mapping={"v": 1, "state": json.dumps({"id": "999", "unexpected": True})},
    )
    started = time.time()
    await redis.zadd("qp:v2:status-due", {"999": started - 1})
    try:
        async with run_bot(settings_for(status_interval_seconds=1)) as running:
            await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
            roots = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")

            def statuses() -> int:
                replies = slack.emulator.thread(CHANNEL, roots[0].ts)[1:]
                # Quiet statuses edit the previous one: each edit is a status shown.
                return sum(1 + m.edits for m in replies if "status" in m.text.lower())

            await eventually(lambda: statuses() >= 2, what="status posts go on", timeout=8)
            postponed = await redis.zscore("qp:v2:status-due", "999")
            assert postponed is not None and postponed > started, "the bad one is pushed back"
    finally:
        await redis.aclose()
