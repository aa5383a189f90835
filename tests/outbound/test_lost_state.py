"""Telling a first start, an upgrade and a Redis that lost the state apart (`StateGuard.check`),
against a real redis-server and the Slack emulator: only a loss is said, and only once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.outbound.history_scan import Found
from bot.outbound.lost_state import StateGuard
from bot.outbound.messages import METADATA_EVENT
from bot.storage.keys import Keys
from bot.storage.state_marker import FoundRoot, StateMarker
from bot.telemetry import Telemetry
from sandbox.slack_model import Message
from tests.outbound.test_gateway import make_gateway, post
from tests.support.running import eventually
from tests.support.slack import CHANNEL, Slack, chatter

TEAM = "C0TEAMQ"  # a routed channel


@pytest.fixture
async def replica(slack: Slack, redis: Redis) -> AsyncIterator[Callable[..., StateGuard]]:
    """Another replica's guard each call, on the same Redis and Slack; `routed`: alerts routed
    to TEAM too."""
    slack.emulator.add_channel(TEAM)
    gateway = make_gateway(slack, redis)
    routes = json.dumps([{"match": ["team=rocm"], "channel": TEAM}])

    def make(*, routed: bool = False) -> StateGuard:
        config = Settings(slack_channel=CHANNEL, slack_routes=routes if routed else "[]")
        marker = StateMarker(redis, Keys("qp"), retention_s=86_400)
        return StateGuard(
            marker, gateway, Telemetry(), config=config, clock=lambda: datetime.now(UTC)
        )

    yield make
    await gateway.aclose()


@pytest.fixture
def guard(replica: Callable[..., StateGuard]) -> StateGuard:
    return replica()


def lost(guard: StateGuard) -> float:
    return guard.telemetry.registry.get_sample_value("queuepilot_state_lost_total") or 0.0


def root_metadata(incident: str, group: str) -> dict[str, Any]:
    payload = {"incident": incident, "uid": f"u{incident}", "item": "root", "group": group}
    return {"event_type": METADATA_EVENT, "event_payload": payload}


async def root(guard: StateGuard, incident: str, group: str, channel: str = CHANNEL) -> str:
    metadata = root_metadata(incident, group)
    return await post(guard.slack, channel, f"Incident {incident}", [], metadata=metadata)


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


@pytest.mark.parametrize("who", ["the same replica", "another replica taking the lead"])
async def test_a_loss_is_said_when_slack_held_up_the_check_while_the_intake_opened_incidents(
    who: str, guard: StateGuard, replica: Callable[..., StateGuard], redis: Redis, slack: Slack
) -> None:
    """Slack answers the history read with 5xx past the hold, so the intake goes on and opens
    incident 1: that is the intake's own state, not an older release's, and the read that
    gets through (retried, or a new leader's) still says the loss."""
    await root(guard, "11", "g-old")
    slack.emulator.fail_next("conversations.history", status=500, count=2)
    await guard.at_start_of_term()
    await redis.set(guard.marker.keys.incident_seq, 1)  # the intake opened incident 1
    assert lost(guard) == 0 and (await guard.marker.read()) is None, "not told yet"
    checking = guard
    if who != "the same replica":
        await guard.end_of_term()  # its lead lost while Slack failed
        checking = replica()
    await checking.check()
    assert lost(checking) == 1
    marker = await checking.marker.read()
    assert marker is not None and (marker.found, marker.above) == (1, 11)
    assert (await checking.marker.kept())[1] == 11, "numbering goes on above 11"
    assert checking.telemetry.registry.get_sample_value(
        "queuepilot_state_lost_timestamp_seconds"
    ) == pytest.approx(marker.lost_at)


async def test_a_standby_that_never_saw_the_marker_finds_a_loss_in_the_routed_channels(
    replica: Callable[..., StateGuard], redis: Redis
) -> None:
    """Redis emptied under the leader; the standby takes the lead: SLACK_CHANNEL shows nothing,
    the team channel the alerts are routed to shows the roots."""
    standby = replica(routed=True)
    await root(standby, "3", "g-team", TEAM)  # the leader's, before Redis was emptied
    await standby.check()
    assert lost(standby) == 1
    assert (await standby.marker.kept())[1] == 3
    assert await redis.hget(standby.marker.keys.found_roots, "g-team") is not None


async def test_another_app_s_messages_in_the_channel_are_not_this_deployment_s_roots(
    guard: StateGuard, slack: Slack
) -> None:
    """A second queuepilot (staging) posting into the same channel: a fresh start here is a
    first start, not a loss, and takes none of its roots."""
    with slack.emulator.workspace() as ws:
        message = Message(
            ts=ws.clock.next(),
            channel=CHANNEL,
            text="Incident 40",
            blocks=[],
            thread_ts=None,
            user="U0STAGING",
            metadata=root_metadata("40", "g-staging"),
        )
        ws.channel(CHANNEL).by_ts[message.ts] = message
        ws.channel(CHANNEL).timeline.append(message)
    await guard.check()
    marker = await guard.marker.read()
    assert marker is not None and marker.lost_at is None
    assert lost(guard) == 0 and (await guard.marker.kept())[1] == 0


def test_roots_posted_since_the_check_began_are_the_bot_s_new_ones_not_found_ones() -> None:
    found = Found("B0QUEUEBOT", before=1000.0)
    for ts, incident, group in (("999.000001", "7", "g-old"), ("1000.000002", "1", "g-new")):
        message = {"ts": ts, "bot_id": "B0QUEUEBOT", "metadata": root_metadata(incident, group)}
        found.add(message, CHANNEL)
    assert list(found.roots) == ["g-old"] and found.highest == 7


async def found_group(guard: StateGuard, group: str) -> FoundRoot | None:
    raw = await guard.marker._redis.hget(guard.marker.keys.found_roots, group)
    return FoundRoot(**json.loads(raw)) if raw else None


async def test_a_root_500_messages_back_is_found_with_one_call_as_an_internal_app(
    guard: StateGuard, slack: Slack
) -> None:
    """An internal app reads history at Tier 3, up to 999 messages a call: a root behind 500
    messages of people in a busy channel takes one call."""
    deep = await root(guard, "7", "g-deep")
    chatter(slack.emulator, CHANNEL, 500)
    await guard.check()
    assert lost(guard) == 1
    found = await found_group(guard, "g-deep")
    assert found is not None and found.ts == deep
    assert (await guard.marker.kept())[1] == 7, "numbering goes on above 7"
    [call] = slack.emulator.calls("conversations.history")
    assert int(call.params["limit"]) == 999


async def test_as_a_distributed_app_the_read_goes_as_deep_at_slack_s_pace_and_says_how_far(
    guard: StateGuard, slack: Slack
) -> None:
    """Tier 1: 15 messages a call, one call a minute (a second here). A root behind 80 messages,
    past what five pages show, is found; after Slack's first 429 the calls keep its pace, and
    what `/readyz` shows says how far the read has got."""
    deep = await root(guard, "7", "g-deep")
    chatter(slack.emulator, CHANNEL, 80)
    slack.emulator.history_tier, slack.emulator.history_interval_s = 1, 1.0
    try:
        await guard.at_start_of_term()
        said = await eventually(
            lambda: said_with(guard, "a call every"), what="/readyz's text says Slack's pace"
        )
        await guard.check()
    finally:
        slack.emulator.history_tier, slack.emulator.history_interval_s = 3, 60.0
    assert said.startswith("checking Slack's history for roots after a possible loss of state")
    assert "0 of 1 channels read" in said, said
    assert "Slack gives this app 15 messages a call, a call every 1 s" in said, said
    found = await found_group(guard, "g-deep")
    assert found is not None and found.ts == deep
    statuses = [c.status for c in slack.emulator.calls("conversations.history")]
    assert statuses.count(200) == 6 and statuses.count(429) <= 2, statuses
    assert await guard.marker.checking() is None, "said no more once done"


async def said_with(guard: StateGuard, words: str) -> str | None:
    said = await guard.marker.checking()
    return said if said and words in said else None


async def test_a_notification_waits_for_its_channel_s_read_and_no_longer_than_the_hold(
    replica: Callable[..., StateGuard], redis: Redis, slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    """The team channel's read fails twice (5xx, retried): a group routed there waits until its
    root is where the intake finds it and numbering is above it. Then Slack keeps failing: a
    notification waits no longer than the hold, and the log says what that may cost."""
    guard = replica(routed=True)
    guard.hold_s = 5.0
    await root(guard, "3", "g-team", TEAM)
    in_team = {"when": lambda params: params.get("channel") == TEAM}
    slack.emulator.fail_next("conversations.history", status=500, count=2, **in_team)
    await guard.at_start_of_term()
    await guard.held(TEAM)
    assert await found_group(guard, "g-team") is not None, "its root found before it goes on"
    assert (await guard.marker.kept())[1] == 3
    await guard.check()

    await redis.flushall()
    guard.hold_s = 0.6
    slack.emulator.fail_next("conversations.history", status=500, count=1000, **in_team)
    await guard.tick()
    loop = asyncio.get_running_loop()
    began = loop.time()
    await guard.held(CHANNEL)
    assert 0.4 < loop.time() - began < 3, "held until the hold ended, no longer"
    assert "1 channel(s) not read yet" in caplog.text
    await guard.end_of_term()
