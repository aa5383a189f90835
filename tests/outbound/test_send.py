"""The send path at its edges: one channel's sender (`ChannelSender.post_next`) against the Slack
emulator and a real redis-server, step by step. What Slack is asked, and what the channel's queue
keeps, for each way a post can end: posted, found after a lost answer (the leader killed between
send and record), a 429, a permanent refusal, a bug. What a channel sees with the
whole bot running is in test_sender.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import pytest

from bot.app import Bot, build_bot
from bot.domain.incident.incidents import GroupState, Incident
from bot.domain.message import Rendered
from bot.outbound import send
from bot.outbound.desk import Upload
from bot.outbound.gateway import SlackError
from bot.outbound.send import (
    LOOKUP_MARGIN_S,
    Answer,
    ChannelSender,
    Struck,
    classify,
)
from bot.render.chart import BLOCK_TYPE
from bot.storage.incident_store import BAND_EVENT, Commit, Reply
from bot.storage.send_queue import InFlight
from tests.support.incidents import make_incident
from tests.support.running import eventually
from tests.support.slack import CHANNEL, Slack


class Clock:
    """The sender's clock, moved by the test; it starts at Slack's (the emulator's) time, as the
    lookup's window is read around it."""

    def __init__(self) -> None:
        self.at = time.time()

    def __call__(self) -> float:
        return self.at


@dataclass
class Rig:
    bot: Bot
    slack: Slack
    clock: Clock

    def sender(self) -> ChannelSender:
        """A channel's sender, as a new leader (or the same one, again) starts it."""
        return ChannelSender(self.bot.outbound, CHANNEL, now=self.clock)

    async def marks(self) -> dict[str, InFlight | None]:
        raw = await self.bot.redis.hgetall(self.bot.queue.keys.in_flight(CHANNEL))
        return {member: InFlight.decode(mark) for member, mark in raw.items()}

    async def waiting(self) -> list[str]:
        return await self.bot.redis.zrange(self.bot.queue.keys.posts(CHANNEL), 0, -1)

    def posts(self) -> list[Any]:
        return [c for c in self.slack.emulator.calls("chat.postMessage") if c.ok]

    def lookups(self, outcome: str) -> float:
        registry = self.bot.telemetry.registry
        sample = registry.get_sample_value("queuepilot_slack_lookups_total", {"outcome": outcome})
        return sample or 0.0


@pytest.fixture
async def rig(settings_for: Callable[..., Any], slack: Slack) -> AsyncIterator[Rig]:
    # No pace to wait for between steps, no storm: each test takes the steps it names.
    settings = settings_for(
        slack_post_interval_ms=0, storm_digest_threshold=0, slack_timeout_seconds=0.5
    )
    bot = build_bot(settings)
    assert await bot.leadership.take(), "commits are the leader's"
    try:
        yield Rig(bot, slack, Clock())
    finally:
        slack.emulator.stall("chat.postMessage", 0)
        for client in (bot.redis, bot.lease_redis, bot.bell_redis):
            if client is not None:
                await client.aclose()


async def opened(rig: Rig) -> Incident:
    incident = make_incident(id="1", uid="u1", group_hash="g1", channel=CHANNEL)
    group = GroupState(incident_id="1", last_entry="1-0")
    assert await rig.bot.store.commit(Commit(incident, group=group, group_hash="g1"))
    return incident


async def with_thread(rig: Rig, *texts: str, kind: str = "event", **extra: Any) -> str:
    """Incident 1 with its root posted, then `texts` as replies waiting; the root's ts."""
    await opened(rig)
    assert await rig.sender().post_next()
    loaded = await rig.bot.store.load("1")
    assert loaded.incident is not None and loaded.thread is not None
    replies = tuple(
        Reply(kind, BAND_EVENT, Rendered(text, []), extra=extra or None) for text in texts
    )
    change = Commit(loaded.incident, version=loaded.version, replies=replies, root=False)
    assert await rig.bot.store.commit(change)
    return loaded.thread.ts


# -- Slack's answer, classified in one place ---------------------------------------------------

SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "Status update"}}
WITH_CHART = Rendered("Status update", [SECTION, {"type": BLOCK_TYPE}])


def refused(error: str, *details: str) -> SlackError:
    return SlackError("chat.postMessage", error, retryable=False, details=details)


@pytest.mark.parametrize(
    ("failure", "drawn", "answer"),
    [
        (
            SlackError("chat.postMessage", "ratelimited", retryable=True, retry_after=3.0),
            WITH_CHART,
            Answer.NOT_SENT,
        ),
        (
            SlackError("chat.postMessage", "ClientConnectorError", retryable=True),
            WITH_CHART,
            Answer.NOT_SENT,
        ),
        (
            SlackError("chat.postMessage", "TimeoutError", retryable=True, uncertain=True),
            WITH_CHART,
            Answer.UNCERTAIN,
        ),
        (refused("msg_too_long"), WITH_CHART, Answer.REFUSED),
        (
            refused("invalid_blocks", "[ERROR] unsupported type [json-pointer:/blocks/1/type]"),
            WITH_CHART,
            Answer.CHARTS_REFUSED,
        ),
        (
            refused("invalid_blocks", "[ERROR] too long [json-pointer:/blocks/0/text]"),
            WITH_CHART,
            Answer.REFUSED,
        ),
        (refused("invalid_blocks", "[ERROR] no"), Upload(b"png", "Queue trend"), Answer.REFUSED),
    ],
)
def test_slacks_answer_to_a_post_is_classified_once(
    failure: SlackError, drawn: Rendered | Upload, answer: Answer
) -> None:
    assert classify(failure, drawn) is answer


# -- one post, step by step ---------------------------------------------------------------------


async def test_with_nothing_waiting_nothing_is_asked_of_slack(rig: Rig) -> None:
    assert await rig.sender().post_next() is False
    assert rig.slack.emulator.calls() == []


async def test_a_root_is_posted_with_its_metadata_and_recorded(rig: Rig) -> None:
    await opened(rig)
    assert await rig.sender().post_next() is True
    [post] = rig.posts()
    carried = post.params["metadata"]["event_payload"]
    assert carried == {"incident": "1", "uid": "u1", "item": "root", "group": "g1"}, (
        "found by it if need be, by its group after Redis lost the state"
    )
    [root] = rig.slack.emulator.channel_messages(CHANNEL)
    loaded = await rig.bot.store.load("1")
    assert loaded.thread is not None and loaded.thread.ts == root.ts
    assert await rig.waiting() == [] and await rig.marks() == {}


async def test_killed_between_send_and_record_the_next_sender_finds_it_and_posts_nothing_twice(
    rig: Rig,
) -> None:
    ts = await with_thread(rig, "Scaled up")
    rig.slack.emulator.stall("chat.postMessage", 1.5)  # Slack posts; the answer comes too late
    with pytest.raises(SlackError) as lost:
        await rig.sender().post_next()
    assert lost.value.uncertain
    rig.slack.emulator.stall("chat.postMessage", 0)
    marks = await rig.marks()
    assert list(marks) == ["replies:1"], "the mark stays: the post may have landed"
    attempt = marks["replies:1"]
    assert attempt is not None and attempt.since == rig.clock.at

    rig.clock.at += 20  # the next sender's own time: the lookup reads the first attempt's
    assert await rig.sender().post_next()
    [lookup] = rig.slack.emulator.calls("conversations.replies")
    assert float(lookup.params["oldest"]) == pytest.approx(attempt.since - LOOKUP_MARGIN_S)
    assert rig.lookups("found") == 1
    assert [m.text for m in rig.slack.emulator.thread(CHANNEL, ts)[1:]] == ["Scaled up"]
    assert await rig.waiting() == [] and await rig.marks() == {}


async def test_a_429_clears_the_mark_and_the_next_attempt_posts_without_a_lookup(
    rig: Rig,
) -> None:
    await with_thread(rig, "Acknowledged")
    rig.slack.emulator.fail_next("chat.postMessage", status=429, retry_after=3)
    with pytest.raises(SlackError) as held:
        await rig.sender().post_next()
    assert held.value.retry_after == 3
    assert await rig.marks() == {}, "Slack did nothing: nothing to look up"
    assert await rig.sender().post_next()
    assert rig.slack.emulator.calls("conversations.replies") == []
    assert len(rig.posts()) == 2


async def test_a_permanent_refusal_drops_that_one_reply_with_a_record_and_the_thread_goes_on(
    rig: Rig,
) -> None:
    ts = await with_thread(rig, "Too long for Slack", "After it")
    rig.slack.emulator.fail_next("chat.postMessage", status=200, error="msg_too_long")
    sender = rig.sender()
    assert await sender.post_next() and await sender.post_next()
    refused = await rig.bot.redis.xrange(rig.bot.queue.keys.undeliverable)
    assert [(e["incident"], e["error"]) for _, e in refused] == [("1", "msg_too_long")]
    assert [m.text for m in rig.slack.emulator.thread(CHANNEL, ts)[1:]] == ["After it"]


async def test_an_item_that_fails_three_times_is_dropped_alone_and_the_thread_goes_on(
    rig: Rig,
) -> None:
    ts = await with_thread(rig, "Garbled on the way", "Posted after it")
    keys = rig.bot.queue.keys
    first = await rig.bot.redis.lindex(keys.outbox("1"), 0)
    await rig.bot.redis.hset(keys.outbox_items("1"), first, "{not json")
    sender = rig.sender()
    for _ in range(3):
        with pytest.raises(Struck):
            await sender.post_next()
    assert await sender.post_next()
    refused = await rig.bot.redis.xrange(keys.undeliverable)
    assert [(e["item"], e["error"]) for _, e in refused] == [(first, "unreadable")]
    assert [m.text for m in rig.slack.emulator.thread(CHANNEL, ts)[1:]] == ["Posted after it"]


async def test_a_member_of_a_kind_this_release_does_not_send_leaves_the_queue(rig: Rig) -> None:
    await rig.bot.redis.zadd(rig.bot.queue.keys.posts(CHANNEL), {"future-kind:x": 1})
    assert await rig.sender().post_next()
    assert await rig.waiting() == []
    assert rig.slack.emulator.calls() == []


async def test_a_postmortem_is_shared_as_a_file_once_even_when_its_answer_was_lost(
    rig: Rig,
) -> None:
    ts = await with_thread(
        rig, "Postmortem of incident 1", kind="postmortem", markdown="# Incident 1\n"
    )
    method = "files.completeUploadExternal"
    rig.slack.emulator.stall(method, 1.5)
    try:
        with pytest.raises(SlackError) as lost:
            await rig.sender().post_next()
        assert lost.value.uncertain
    finally:
        rig.slack.emulator.stall(method, 0)
    assert await rig.sender().post_next()
    assert rig.lookups("found") == 1
    shared = [c for c in rig.slack.emulator.calls(method) if c.params.get("thread_ts") == ts]
    assert len(shared) == 1, "shared once"
    assert await rig.waiting() == [] and await rig.marks() == {}


async def test_the_senders_stop_even_when_a_redis_call_swallows_their_cancel(rig: Rig) -> None:
    """redis-py can swallow a cancel that lands mid-command: the replica's shutdown must still
    end the channel's loops, not wait on its doorbell forever."""
    await opened(rig)
    queue, stop = rig.bot.outbound.queue, asyncio.Event()
    wait_bell = queue.wait_bell

    async def swallowing(key: str, timeout: float) -> None:  # noqa: ASYNC109
        if rig.posts():  # the root is out: the replica is told to stop mid-wait
            stop.set()
            with suppress(asyncio.CancelledError):  # as redis-py's read can
                await asyncio.sleep(0.5)
        await wait_bell(key, timeout)

    queue.wait_bell = swallowing  # type: ignore[method-assign]
    sending = asyncio.create_task(send.run(rig.bot.outbound, stop))
    await eventually(lambda: stop.is_set(), what="the stop, mid-wait")
    # Not `wait_for`: its own cancel on timeout would be swallowed the same way, and hang.
    done, _ = await asyncio.wait({sending}, timeout=10)
    assert done, "the senders still run after the replica stopped"
