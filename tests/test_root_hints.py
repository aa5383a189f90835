"""A new incident's root handed from the intake to the sender in the same replica
(`bot.root_hints`): the hand-over itself, the script that lets a hint through only when it is
exactly what the sender would post next, and what a channel sees when a hint went stale."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.incidents import Incident, open_incident
from bot.leases import Leases
from bot.root_hints import (
    LEASE_MARGIN_MS,
    MARK_FRESH_S,
    SETTLE_S,
    RootHint,
    RootHints,
    Sending,
)
from bot.send_queue import InFlight, SendQueue
from bot.store import Commit, IncidentStore, RootMark, ThreadRef
from tests.conftest import CHANNEL, Slack, eventually, run_bot
from tests.test_sender import group, queue_of, text_of
from tests.test_store import PREFIX, T0, delivery

DAY = 86_400
THRESHOLD = 5


def new_incident(incident_id: str) -> Incident:
    return open_incident(
        delivery(groupKey=f"group-{incident_id}"),
        incident_id=incident_id,
        uid=f"uid{incident_id}",
        channel=CHANNEL,
        now=T0,
    )


# -- the hand-over, alone ------------------------------------------------------------------------


async def test_no_hint_is_kept_for_a_channel_whose_sender_runs_elsewhere() -> None:
    hints = RootHints()
    assert hints.expect(CHANNEL) is None
    assert await hints.take(CHANNEL) is None


async def test_the_sender_waits_for_an_announced_commit_and_takes_its_hint_once() -> None:
    hints = RootHints()
    hints.attach(CHANNEL)
    expected = hints.expect(CHANNEL)
    assert expected is not None
    hint = RootHint(new_incident("1"), 1)

    async def commit_lands() -> None:
        await asyncio.sleep(0)  # the bell's ring can be read before the commit's answer
        expected.set_result(hint)

    landing = asyncio.create_task(commit_lands())
    assert await hints.take(CHANNEL) == hint
    assert await hints.take(CHANNEL) is None, "a hint is taken once"
    await landing


async def test_a_commit_that_did_not_apply_leaves_no_hint() -> None:
    hints = RootHints()
    hints.attach(CHANNEL)
    expected = hints.expect(CHANNEL)
    assert expected is not None
    expected.set_result(None)
    assert await hints.take(CHANNEL) is None


async def test_a_commit_that_is_slow_to_answer_holds_the_sender_only_briefly() -> None:
    hints = RootHints()
    hints.attach(CHANNEL)
    expected = hints.expect(CHANNEL)
    assert expected is not None
    started = time.monotonic()
    assert await hints.take(CHANNEL) is None
    assert time.monotonic() - started < SETTLE_S + 1.0
    expected.set_result(RootHint(new_incident("1"), 1))
    assert await hints.take(CHANNEL) is not None, "a late hint serves the next post"


async def test_a_sender_that_stops_drops_its_channels_hints() -> None:
    hints = RootHints()
    hints.attach(CHANNEL)
    expected = hints.expect(CHANNEL)
    assert expected is not None
    hints.detach(CHANNEL)
    assert expected.cancelled()
    assert hints.expect(CHANNEL) is None


# -- the script that lets a hint through ----------------------------------------------------------


class Channel:
    """A channel's queue in Redis with one new incident's root waiting, and its sender's lease."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.store = IncidentStore(redis, PREFIX)
        self.queue = SendQueue(redis, PREFIX, retention_s=DAY)
        self.keys = self.queue.keys

    async def open(self, incident_id: str) -> tuple[Incident, int]:
        incident = new_incident(incident_id)
        version = await self.store.commit_versioned(Commit(incident, version=0))
        assert version
        return incident, version

    async def begin(self, incident: Incident, version: int, *, token: str) -> bool:
        marker = InFlight(f"root:{incident.id}", "root", time.time())
        return await self.queue.begin_root(
            CHANNEL,
            token,
            marker,
            incident_id=incident.id,
            version=version,
            storm_threshold=THRESHOLD,
        )

    async def marks(self) -> dict[str, str]:
        return await self.redis.hgetall(self.keys.in_flight(CHANNEL))  # type: ignore[no-any-return]


@pytest.fixture
async def channel(redis_url: str) -> AsyncIterator[Channel]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield Channel(client)
    await client.aclose()


async def lease_of(channel: Channel) -> str:
    lease = await Leases(channel.redis).try_acquire(channel.keys.sender_lease(CHANNEL), 60_000)
    assert lease is not None
    return lease.token


async def test_a_hint_that_is_what_the_sender_would_post_next_is_marked_in_flight(
    channel: Channel,
) -> None:
    token = await lease_of(channel)
    incident, version = await channel.open("1")
    assert await channel.begin(incident, version, token=token)
    assert list(await channel.marks()) == ["root:1"]


async def _another_root_is_ahead(channel: Channel, incident: Incident) -> None:
    await channel.redis.zadd(channel.keys.posts(CHANNEL), {"root:0": 0})


async def _an_earlier_attempt_left_a_mark(channel: Channel, incident: Incident) -> None:
    await channel.redis.hset(channel.keys.in_flight(CHANNEL), "root:1", "{}")  # type: ignore[misc]


async def _the_incident_moved_on(channel: Channel, incident: Incident) -> None:
    loaded = await channel.store.load(incident.id)
    moved = incident.model_copy(update={"title": "renamed"})
    assert await channel.store.commit(Commit(moved, version=loaded.version))


async def _the_root_is_posted_already(channel: Channel, incident: Incident) -> None:
    thread = ThreadRef(CHANNEL, "1700000000.000100")
    ref = json.dumps(asdict(thread))
    await channel.redis.hset(channel.keys.incident(incident.id), "thread", ref)  # type: ignore[misc]


async def _a_storm_is_open(channel: Channel, incident: Incident) -> None:
    await channel.redis.hset(channel.keys.storm(CHANNEL), "id", "9")  # type: ignore[misc]


async def _a_storm_would_open_now(channel: Channel, incident: Incident) -> None:
    for n in range(2, THRESHOLD + 1):
        await channel.open(str(n))


@pytest.mark.parametrize(
    "spoil",
    [
        _another_root_is_ahead,
        _an_earlier_attempt_left_a_mark,
        _the_incident_moved_on,
        _the_root_is_posted_already,
        _a_storm_is_open,
        _a_storm_would_open_now,
    ],
    ids=lambda spoil: spoil.__name__.strip("_"),
)
async def test_a_hint_that_is_not_what_the_sender_would_post_next_writes_nothing(
    channel: Channel, spoil: Callable[[Channel, Incident], object]
) -> None:
    token = await lease_of(channel)
    incident, version = await channel.open("1")
    await spoil(channel, incident)  # type: ignore[misc]
    before = await channel.marks()
    assert not await channel.begin(incident, version, token=token)
    assert await channel.marks() == before


async def test_a_sender_that_lost_its_lease_cannot_post_a_hint(channel: Channel) -> None:
    await lease_of(channel)
    incident, version = await channel.open("1")
    assert not await channel.begin(incident, version, token="someone-else")
    assert await channel.marks() == {}


# -- what a channel sees --------------------------------------------------------------------------


async def test_a_new_groups_root_shows_what_changed_while_it_waited_for_its_slot(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """The intake hands the root over as it opened the incident; a notification that changes
    the incident before the channel's next slot makes that hint stale. The root posted must show
    the change, not the state handed over."""
    settings = settings_for(slack_post_interval_ms=5000, slack_post_burst=1)
    async with run_bot(settings) as running:
        assert (await running.send("grafana", group("first"))).status_code == 202
        await eventually(lambda: len(slack.emulator.channel_messages(CHANNEL)) == 1, what="root")

        second = group("second")
        assert (await running.send("grafana", second)).status_code == 202
        assert (await running.send("grafana", queue_of(second, 987))).status_code == 202

        async def changed() -> bool:
            incident_id = await running.bot.store.open_ids()
            loaded = await running.bot.store.load(incident_id[0])
            return loaded.incident is not None and loaded.incident.notifications == 2

        await eventually(changed, what="the change committed", timeout=4)
        await eventually(
            lambda: len(slack.emulator.channel_messages(CHANNEL)) == 2, what="the second root"
        )
    roots = [c for c in slack.emulator.calls("chat.postMessage") if c.ok]
    assert len(roots) == 2
    assert "987" in str(roots[-1].params), "the root as posted, before any edit"
    assert "987" in text_of(slack.emulator.channel_messages(CHANNEL)[-1])


# -- the commit that marks the root itself --------------------------------------------------------


async def open_marked(
    channel: Channel, incident_id: str, *, token: str, margin_ms: int = LEASE_MARGIN_MS
) -> tuple[int | None, bool]:
    """Open an incident in one commit that asks to mark its root in flight for `token`."""
    marker = InFlight(f"root:{incident_id}", "root", time.time()).encode()
    mark = RootMark(token, marker, storm_threshold=THRESHOLD, lease_margin_ms=margin_ms)
    return await channel.store.commit_marked(Commit(new_incident(incident_id), mark=mark))


async def test_a_commit_marks_its_new_root_in_flight_when_it_is_the_senders_next_post(
    channel: Channel,
) -> None:
    token = await lease_of(channel)
    version, marked = await open_marked(channel, "1", token=token)
    assert version and marked
    marks = await channel.marks()
    assert list(marks) == ["root:1"]
    assert InFlight.decode(marks["root:1"]) == InFlight("root:1", "root", ANY_TIME)
    assert await channel.redis.zrange(channel.keys.posts(CHANNEL), 0, -1) == ["root:1"]


class _AnyTime(float):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and abs(other - time.time()) < 60

    def __hash__(self) -> int:
        return 0


ANY_TIME = _AnyTime()


async def _spoil_ahead(channel: Channel) -> str:
    await channel.redis.zadd(channel.keys.posts(CHANNEL), {"root:0": 0})
    return await lease_of(channel)


async def _spoil_earlier_attempt(channel: Channel) -> str:
    await channel.redis.hset(channel.keys.in_flight(CHANNEL), "root:1", "{}")  # type: ignore[misc]
    return await lease_of(channel)


async def _spoil_storm_open(channel: Channel) -> str:
    await channel.redis.hset(channel.keys.storm(CHANNEL), "id", "9")  # type: ignore[misc]
    return await lease_of(channel)


async def _spoil_storm_would_open(channel: Channel) -> str:
    for n in range(2, THRESHOLD + 1):
        await channel.open(str(n))
    return await lease_of(channel)


async def _spoil_lease_about_to_expire(channel: Channel) -> str:
    key = channel.keys.sender_lease(CHANNEL)
    lease = await Leases(channel.redis).try_acquire(key, LEASE_MARGIN_MS // 2)
    assert lease is not None
    return lease.token


async def _spoil_lease_held_by_another(channel: Channel) -> str:
    await lease_of(channel)
    return "someone-else"


@pytest.mark.parametrize(
    "spoil",
    [
        _spoil_ahead,
        _spoil_earlier_attempt,
        _spoil_storm_open,
        _spoil_storm_would_open,
        _spoil_lease_about_to_expire,
        _spoil_lease_held_by_another,
    ],
    ids=lambda spoil: spoil.__name__.removeprefix("_spoil_"),
)
async def test_a_commit_whose_root_is_not_the_senders_next_post_applies_but_marks_nothing(
    channel: Channel, spoil: Callable[[Channel], Any]
) -> None:
    token = await spoil(channel)
    before = await channel.marks()
    version, marked = await open_marked(channel, "1", token=token)
    assert version, "the change itself is committed"
    assert not marked
    assert await channel.marks() == before
    assert await channel.redis.zscore(channel.keys.posts(CHANNEL), "root:1") is not None


async def test_a_marked_hint_is_not_displaced_by_a_later_one() -> None:
    """A marked root heads the channel's queue: it is the sender's next post, and must not wait
    behind a hint that settled after it (that one is posted after it, from the queue)."""
    hints = RootHints()
    hints.attach(CHANNEL, Sending("token", THRESHOLD))
    first, second = hints.expect(CHANNEL), hints.expect(CHANNEL)
    assert first is not None and second is not None
    marked = RootHint(new_incident("1"), 1, marked_at=time.monotonic())
    first.set_result(marked)
    second.set_result(RootHint(new_incident("2"), 1))
    assert await hints.take(CHANNEL) == marked


def test_a_mark_is_asked_for_only_by_a_channel_this_replica_sends_to() -> None:
    hints = RootHints()
    assert hints.mark(CHANNEL, "1") is None
    hints.attach(CHANNEL, Sending("token", THRESHOLD))
    mark = hints.mark(CHANNEL, "1")
    assert mark is not None
    assert (mark.lease_token, mark.storm_threshold) == ("token", THRESHOLD)
    assert InFlight.decode(mark.marker) == InFlight("root:1", "root", ANY_TIME)


def test_a_marked_hint_is_posted_from_only_while_fresh() -> None:
    now = time.monotonic()
    assert RootHint(new_incident("1"), 1, marked_at=now).fresh()
    assert not RootHint(new_incident("1"), 1, marked_at=now - MARK_FRESH_S - 0.01).fresh()
    assert not RootHint(new_incident("1"), 1).fresh(), "not marked"


async def test_a_root_marked_by_its_commit_whose_hint_is_lost_is_posted_once(
    settings_for: Callable[..., Settings], slack: Slack
) -> None:
    """The replica's sender never hears of the mark (the hint went stale, or the commit came
    from a replica that then died): it reads the queue, finds the root marked in flight, looks it
    up in Slack first, and posts it once."""
    async with run_bot(settings_for()) as running:
        bot = running.bot
        lease_key = bot.queue.keys.sender_lease(CHANNEL)
        await eventually(lambda: bot.redis.get(lease_key), what="the channel's sender")
        token = await bot.redis.get(lease_key)
        incident = new_incident("41")
        marker = InFlight("root:41", "root", time.time()).encode()
        mark = RootMark(token, marker, storm_threshold=0, lease_margin_ms=LEASE_MARGIN_MS)
        version, marked = await bot.store.commit_marked(Commit(incident, mark=mark))
        assert version and marked
        await eventually(
            lambda: len(slack.emulator.channel_messages(CHANNEL)) == 1, what="the root"
        )
        await eventually(
            lambda: bot.redis.hget(bot.queue.keys.incident("41"), "thread"), what="recorded"
        )
    assert slack.emulator.calls("conversations.history"), "looked up before posting"
    roots = [c for c in slack.emulator.calls("chat.postMessage") if c.ok]
    assert len(roots) == 1
