"""A Redis that lost queuepilot's state, as a channel and an operator see it.

Redis emptied under a running bot (FLUSHALL, a restart without persistence) or while the bot was
down too: an alert that fires again goes on in its thread (one thread, its root edited in place,
a reply saying what was forgotten); a new alert takes a number never used; the error log, the
metric and the App Home line appear.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from redis import Redis

from bot.config import Settings
from sandbox.slack_interactions import Person, app_home_opened, event_callback
from sandbox.slack_model import Message
from tests.support.payloads import as_group
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.servers import RedisServer
from tests.support.slack import CHANNEL, Slack, chatter, signed

ALICE = Person("U0ALICE", "alice")
LOST = "Redis lost queuepilot's state"
FIRING = as_group("lost-firing")
LEASE_MS = 1500  # a lease lost with the state is taken again within it
TEAM = "C0TEAMQ"  # a channel SLACK_ROUTES sends alerts to


def roots(slack: Slack) -> list[Message]:
    """The bot's roots in the channel, among whatever people say there."""
    return [m for m in slack.emulator.channel_messages(CHANNEL) if m.metadata]


def number(root: Message) -> int:
    assert root.metadata is not None
    return int(root.metadata["event_payload"]["incident"])


async def fire(running: RunningBot, payload: dict[str, Any]) -> None:
    response = await running.send("grafana", payload)
    assert response.status_code == 202, response.text


async def metric(running: RunningBot, name: str) -> float:
    text = (await running.http.get("/metrics")).text
    lines = [line for line in text.splitlines() if line.startswith(f"{name} ")]
    return float(lines[0].split()[1]) if lines else 0.0


async def open_home(running: RunningBot, slack: Slack) -> None:
    event = app_home_opened(ALICE, tab="home", view=slack.emulator.home(ALICE.id))
    body = json.dumps(event_callback(event))
    headers = {**signed(body), "Content-Type": "application/json"}
    assert (await running.http.post("/slack/events", content=body, headers=headers)).is_success


def home_text(slack: Slack) -> str:
    return json.dumps(slack.emulator.home(ALICE.id) or {}, ensure_ascii=False)


@pytest.mark.parametrize(
    "how",
    ["flushall", "restart", "bot restarted too", "bot restarted, its roots 500 messages back"],
)
async def test_after_redis_lost_the_state_an_alert_goes_on_in_its_thread_and_numbers_never_repeat(
    how: str,
    own_redis: RedisServer,
    settings_for: Callable[..., Settings],
    slack: Slack,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="bot.outbound.lost_state")
    settings = settings_for(redis_url=own_redis.url, leader_lease_ms=LEASE_MS)
    if how.startswith("bot restarted"):
        async with run_bot(settings) as running:
            await two_threads(running, slack)
        if "500 messages" in how:  # a busy shared channel; an internal app reads 999 a call
            chatter(slack.emulator, CHANNEL, 500)
        Redis.from_url(own_redis.url).flushall()
        async with run_bot(settings) as running:
            await goes_on(running, slack, caplog)
        return
    async with run_bot(settings) as running:
        await two_threads(running, slack)
        if how == "flushall":
            Redis.from_url(own_redis.url).flushall()
        else:
            own_redis.stop()
            own_redis.start()  # same port, empty: no persistence
        await goes_on(running, slack, caplog)


async def two_threads(running: RunningBot, slack: Slack) -> None:
    await fire(running, FIRING)
    await eventually(lambda: len(roots(slack)) == 1, what="the alert's thread")
    await fire(running, as_group("lost-other"))
    await eventually(lambda: len(roots(slack)) == 2, what="the other alert's thread")


async def goes_on(running: RunningBot, slack: Slack, caplog: pytest.LogCaptureFixture) -> None:
    first, second = roots(slack)
    used = {number(first), number(second)}
    edits_before = len(slack.emulator.calls("chat.update"))

    await fire(running, FIRING)  # still firing: the group's next notification
    await eventually(
        lambda: any("lost its memory" in m.text for m in slack.emulator.thread(CHANNEL, first.ts)),
        what="the thread told what was forgotten",
        timeout=20,
    )
    assert len(roots(slack)) == 2, "no second thread for the alert"
    going_on = await running.bot.store.load(str(number(first)))
    assert going_on.thread is not None and going_on.thread.ts == first.ts, "by its own number"
    await eventually(
        lambda: any(
            c.ok and c.params.get("ts") == first.ts
            for c in slack.emulator.calls("chat.update")[edits_before:]
        ),
        what="its root edited in place",
    )

    await fire(running, as_group("lost-new"))
    await eventually(lambda: len(roots(slack)) == 3, what="the new alert's thread")
    new = number(roots(slack)[-1])
    assert new not in used and new > max(used), "a number never used"

    logged = [r.getMessage() for r in caplog.records if LOST in r.getMessage()]
    assert len(logged) == 1, logged
    assert "2 thread(s) found in Slack" in logged[0] and "Backup and restore" in logged[0]
    assert await metric(running, "queuepilot_state_lost_total") == 1
    await open_home(running, slack)
    await eventually(lambda: "lost its state" in home_text(slack), what="the App Home says so")


async def test_a_replica_that_never_saw_the_state_finds_its_loss_in_the_team_channels(
    own_redis: RedisServer, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """SLACK_ROUTES sends the alerts to a team channel and SLACK_CHANNEL shows no root: a replica
    that never saw the state (here a bot started afresh; a standby that takes the lead after the
    wipe is the same) still finds the loss there, and the numbers go on."""
    slack.emulator.add_channel(TEAM)
    routes = json.dumps([{"match": ["team=rocm"], "channel": TEAM}])
    settings = settings_for(redis_url=own_redis.url, leader_lease_ms=LEASE_MS, slack_routes=routes)
    firing = as_group("lost-team", team="rocm")
    async with run_bot(settings) as running:
        await fire(running, firing)
        [first] = await eventually(
            lambda: slack.emulator.channel_messages(TEAM), what="the alert's thread"
        )
    Redis.from_url(own_redis.url).flushall()
    async with run_bot(settings) as running:
        await fire(running, firing)
        await eventually(
            lambda: any("lost its memory" in m.text for m in slack.emulator.thread(TEAM, first.ts)),
            what="the thread told what was forgotten",
            timeout=20,
        )
        await fire(running, as_group("lost-team-new", team="rocm"))
        team = await eventually(
            lambda: (t := slack.emulator.channel_messages(TEAM))[1:] and t, what="a new thread"
        )
        assert len(team) == 2 and number(team[-1]) > number(first), "a number never used"
        assert await metric(running, "queuepilot_state_lost_total") == 1


async def test_as_a_distributed_app_a_fresh_start_holds_back_only_what_a_root_may_concern(
    own_redis: RedisServer, settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """Slack gives a distributed app 15 messages a call, one call a minute (a second here): after
    a restart beside an emptied Redis the read of a busy channel takes a while, and `/readyz`
    says how far it has got. The alert that notifies meanwhile waits for it and goes on in its
    thread."""
    settings = settings_for(redis_url=own_redis.url, leader_lease_ms=LEASE_MS)
    async with run_bot(settings) as running:
        await two_threads(running, slack)
    first = roots(slack)[0]
    chatter(slack.emulator, CHANNEL, 40)
    Redis.from_url(own_redis.url).flushall()
    slack.emulator.history_tier, slack.emulator.history_interval_s = 1, 1.0
    try:
        async with run_bot(settings) as running:
            await fire(running, FIRING)
            ready = await eventually(
                lambda: ready_saying(running, "15 messages a call"), what="/readyz says how far"
            )
            await eventually(
                lambda: any(
                    "lost its memory" in m.text for m in slack.emulator.thread(CHANNEL, first.ts)
                ),
                what="the alert going on in its thread",
                timeout=20,
            )
            assert len(roots(slack)) == 2, "no second thread"
            await eventually(lambda: ready_saying(running, None), what="/readyz done checking")
    finally:
        slack.emulator.history_tier, slack.emulator.history_interval_s = 3, 60.0
    assert ready.startswith(
        "checking Slack's history for roots after a possible loss of state: 0 of 1 channels read"
    ), ready


async def ready_saying(running: RunningBot, words: str | None) -> str | None:
    """/readyz's `state` if it says `words`; with None, "done" once it says nothing."""
    answer = await running.http.get("/readyz")
    assert answer.status_code == 200, "ready all along"
    state = answer.json().get("state")
    if words is None:
        return None if state else "done"
    return state if state and words in state else None
