"""A key census: what an incident leaves in Redis, and for how long.

Every key carries a TTL (the two streams aside, notifications and Slack requests: each holds what
is not done yet, and is empty otherwise); an incident's keys go `INCIDENT_RETENTION_DAYS` after its
last change, a Grafana test's after an hour.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.actions.core import Actor
from bot.config import Settings
from bot.storage.keys import Keys
from tests.support.payloads import fixture_json
from tests.support.running import RunningBot, eventually, run_bot
from tests.support.slack import CHANNEL, Slack

KEYS = Keys("qp")  # the bot's default `redis_prefix`
STREAMS = (KEYS.stream, KEYS.requests)
# What a running bot keeps that is not about any incident: the leader's lease with its tokens'
# sequence and the name cache, each with a TTL of its own that none outlives
# a day; the marker that the state exists, kept as long as the incidents and renewed every tick.
BOOKKEEPING = (KEYS.leader, KEYS.leader_tokens, KEYS.user(""))
BOOKKEEPING += (KEYS.state_marker,)
# An incident's own keys (its Slack message's, in the one channel these tests use).
INCIDENT_KEYS = (KEYS.incident(""), KEYS.group(""), KEYS.timeline(""), KEYS.message(CHANNEL, ""))


async def settled(running: RunningBot) -> bool:
    bot = running.bot
    waiting = await bot.queue.waiting(CHANNEL) + await bot.redis.zcard(KEYS.edits(CHANNEL))
    return waiting == 0 and await bot.stream.backlog() == 0


async def census(running: RunningBot) -> dict[str, int]:
    """Every key with its TTL in seconds (-1: none). A key deleted between the listing and its
    TTL (-2: an outbox just emptied, a bell just rung) is gone, not forever, and left out."""
    redis = running.bot.redis
    keys = {key: await redis.ttl(key) for key in await redis.keys(f"{KEYS.prefix}:*")}
    return {key: ttl for key, ttl in keys.items() if ttl != -2}


async def live_an_incident(running: RunningBot, slack: Slack) -> None:
    """Open, acknowledge, a status reply, resolve: every kind of write an incident gets."""
    await running.send("grafana", fixture_json("grafana/queue-alert-firing.json"))
    [root] = await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="root")
    [incident] = await running.bot.core.open_incidents()
    await running.bot.core.acknowledge(Actor("U0ALICE", "alice"), f"{incident.id}:{incident.uid}")
    await eventually(
        lambda: any("Status" in m.text for m in slack.emulator.thread(CHANNEL, root.ts)),
        what="a status reply",
        timeout=8,
    )
    await running.send("grafana", fixture_json("grafana/queue-alert-resolved.json"))
    await eventually(lambda: settled(running), what="everything sent")


async def test_every_key_has_a_retention_after_an_incidents_life(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    async with run_bot(settings_for(status_interval_seconds=1)) as running:
        await live_an_incident(running, slack)
        keys = await census(running)

    limit = 30 * 86_400
    without_ttl = [key for key, ttl in keys.items() if ttl < 0 and key not in STREAMS]
    assert without_ttl == [], f"keys that would stay forever: {without_ttl}"
    assert all(ttl <= limit for ttl in keys.values()), keys
    assert KEYS.incident("1") in keys and keys[KEYS.incident("1")] > limit - 60


async def test_nothing_of_a_resolved_incident_is_left_after_its_retention(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    async with run_bot(settings_for(status_interval_seconds=1)) as running:
        # Two seconds instead of thirty days: the same code path, observed to its end.
        running.bot.store.retention_s = running.bot.queue.retention_s = 2
        await live_an_incident(running, slack)
        await eventually(
            lambda: only_bookkeeping_left(running), what="the incident's keys gone", timeout=6
        )
        left = await census(running)

    assert all(ttl > 0 for key, ttl in left.items() if key not in STREAMS), left


async def only_bookkeeping_left(running: RunningBot) -> bool:
    keys = await census(running)
    return all(key in STREAMS or key.startswith(BOOKKEEPING) for key in keys)


async def test_a_grafana_test_notification_is_gone_within_the_hour(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    async with run_bot(settings_for()) as running:
        await running.send("grafana", fixture_json("grafana/test-notification.json"))
        await eventually(lambda: slack.emulator.channel_messages(CHANNEL), what="the test root")
        await eventually(lambda: settled(running), what="everything sent")
        keys = await census(running)
        assert await running.bot.store.recent_ids() == [], "a test is listed nowhere"

    incident_keys = {
        k: t for k, t in keys.items() if k not in STREAMS and not k.startswith(BOOKKEEPING)
    }
    for key, ttl in incident_keys.items():
        if key.startswith(INCIDENT_KEYS):
            assert 0 < ttl <= 3600, (key, ttl)
