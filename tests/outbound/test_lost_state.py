"""Telling a first start, an upgrade and a Redis that lost the state apart (`StateGuard.check`),
against a real redis-server and the Slack emulator: only a loss is said, and only once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.outbound.lost_state import StateGuard
from bot.outbound.messages import METADATA_EVENT
from bot.storage.keys import Keys
from bot.storage.state_marker import FoundRoot, StateMarker
from bot.telemetry import Telemetry
from tests.outbound.test_gateway import make_gateway, post
from tests.support.slack import CHANNEL, Slack


@pytest.fixture
async def guard(slack: Slack, redis: Redis) -> AsyncIterator[StateGuard]:
    gateway = make_gateway(slack, redis)
    marker = StateMarker(redis, Keys("qp"), retention_s=86_400)
    yield StateGuard(
        marker,
        gateway,
        Telemetry(),
        config=Settings(slack_channel=CHANNEL),
        clock=lambda: datetime.now(UTC),
    )
    await gateway.aclose()


def lost(guard: StateGuard) -> float:
    return guard.telemetry.registry.get_sample_value("queuepilot_state_lost_total") or 0.0


async def root(guard: StateGuard, incident: str, group: str) -> str:
    payload = {"incident": incident, "uid": f"u{incident}", "item": "root", "group": group}
    metadata = {"event_type": METADATA_EVENT, "event_payload": payload}
    return await post(guard.slack, CHANNEL, f"Incident {incident}", [], metadata=metadata)


async def test_a_first_start_sets_the_marker_and_says_nothing(guard: StateGuard) -> None:
    await guard.check()
    assert (await guard.marker.read()) is not None
    assert lost(guard) == 0


async def test_a_release_s_state_without_a_marker_is_kept_without_reading_slack(
    guard: StateGuard, redis: Redis, slack: Slack
) -> None:
    await redis.set(guard.marker.keys.incident_seq, 7)
    await guard.check()
    marker = await guard.marker.read()
    assert marker is not None and marker.lost_at is None
    assert slack.emulator.calls("conversations.history") == []
    assert lost(guard) == 0


async def test_a_fresh_start_beside_the_bot_s_roots_is_a_loss_said_once(
    guard: StateGuard, redis: Redis, slack: Slack
) -> None:
    await root(guard, "4", "g-old")
    await root(guard, "9", "g-new")
    newest = await root(guard, "11", "g-new")  # the group's newest root is the one it goes on in
    await post(guard.slack, CHANNEL, "someone else's message", [])
    await guard.check()
    await guard.check()
    assert lost(guard) == 1, "said once"
    marker = await guard.marker.read()
    assert marker is not None and marker.lost_at is not None
    assert (marker.found, marker.above) == (2, 11)
    assert (await guard.marker.kept())[1] == 11, "numbering goes on above 11"
    found = await redis.hget(guard.marker.keys.found_roots, "g-new")
    assert found is not None and FoundRoot(**json.loads(found)).ts == newest


async def test_a_loss_under_a_running_bot_numbers_above_what_it_saw_even_with_slack_empty(
    guard: StateGuard, redis: Redis
) -> None:
    await guard.check()
    await redis.set(guard.marker.keys.incident_seq, 5)
    await guard.check()
    await redis.flushall()
    await guard.check()
    assert lost(guard) == 1
    assert (await guard.marker.kept())[1] == 5


async def test_a_redis_gone_back_in_time_under_the_bot_never_reuses_a_number_it_used(
    guard: StateGuard, redis: Redis
) -> None:
    """A failover to a replica that lagged, a backup restored under the running bot: the marker
    is there, the sequence behind."""
    await guard.check()
    await redis.set(guard.marker.keys.incident_seq, 8)
    await guard.check()
    await redis.set(guard.marker.keys.incident_seq, 5)
    await guard.check()
    assert (await guard.marker.kept())[1] == 8
    assert lost(guard) == 0, "nothing was lost that Redis had"
