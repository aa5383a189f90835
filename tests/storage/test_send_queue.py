"""A channel's send queue against a real redis-server, as commits fill it and its sender reads it:
roots before replies, the most urgent thread first, a newer status in place of a waiting one, an
edit instead of a second root."""

from __future__ import annotations

from datetime import timedelta

from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.message import Rendered
from bot.intake.consumer import Intake
from bot.storage.incident_store import (
    BAND_ACTION,
    BAND_EVENT,
    BAND_STATUS,
    Commit,
    IncidentStore,
    summary_replies,
)
from bot.storage.send_queue import SendQueue
from bot.storage.streams import NotificationStream
from bot.telemetry import Telemetry
from tests.support.store import CHANNEL, DAY, KEYS, PREFIX, T0, delivery, opened, reply


async def test_replies_wait_in_order_and_threads_queue_by_their_most_urgent_reply(
    redis: Redis,
) -> None:
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    one, two = await opened(store, "1"), await opened(store, "2")
    # Thread 1: two events; thread 2: a responder's action.
    await store.commit(Commit(one, version=1, replies=(reply("e1"), reply("e2"))))
    await store.commit(Commit(two, version=1, replies=(reply("a2", "action", BAND_ACTION),)))

    posts = await redis.zrange(KEYS.posts(CHANNEL), 0, -1)
    assert posts == ["root:1", "root:2", "replies:2", "replies:1"], "roots, then urgency"
    head = await queue.head_reply("1")
    assert head is not None and head.rendered.text == "e1", "a thread keeps its own order"


async def test_a_status_goes_out_below_the_replies_queued_after_it(redis: Redis) -> None:
    """It is rendered as it goes, from the incident then: above a scale-up's reply it would show
    that scale-up's runners; a quiet one (an edit of a reply higher up) is dropped instead."""
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    new = await opened(store)
    status, quiet = reply("status", "status", BAND_STATUS), reply("quiet", "restatus", BAND_STATUS)
    await store.commit(Commit(new, version=1, replies=(status,)))
    await store.commit(Commit(new, version=2, replies=(reply("scaled", "action", BAND_ACTION),)))
    assert await sent_texts(queue) == ["scaled", "status"]

    await store.commit(Commit(new, version=3, replies=(quiet,)))
    await store.commit(Commit(new, version=4, replies=(reply("acknowledged"),)))
    assert await sent_texts(queue) == ["acknowledged"]
    assert await redis.ttl(KEYS.outbox("1")) == -2, "nothing left behind"


async def test_a_status_in_flight_keeps_its_place(redis: Redis) -> None:
    """It may be in the thread already: moved, it would be posted twice."""
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    new = await opened(store)
    await store.commit(Commit(new, version=1, replies=(reply("status", "status", BAND_STATUS),)))
    await store.commit(Commit(new, version=2, replies=(reply("scaled", "action", BAND_ACTION),)))
    item = await queue.head_item("1")
    head = await queue.head_reply("1", in_flight=item)
    assert head is not None and head.rendered.text == "status"


async def test_a_quiet_status_gives_way_to_a_new_status_still_waiting(redis: Redis) -> None:
    """In its place it would edit the status before that one, and the new one is never said."""
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    new = await opened(store)
    await store.commit(Commit(new, version=1, replies=(reply("new", "status", BAND_STATUS),)))
    await store.commit(Commit(new, version=2, replies=(reply("quiet", "restatus", BAND_STATUS),)))
    assert await sent_texts(queue) == ["new"]


async def test_a_reply_below_the_status_is_kept_with_the_incident(redis: Redis) -> None:
    """What the next status is decided on: nothing may edit a status reply with one below it."""
    store = IncidentStore(redis, PREFIX)
    new = await opened(store)
    await store.commit(Commit(new, version=1, replies=(reply("status", "status", BAND_STATUS),)))
    assert (await store.get("1")).shown.replied_since is False  # type: ignore[union-attr]
    await store.commit(Commit(new, version=2, replies=(reply("acknowledged"),)))
    assert (await store.get("1")).shown.replied_since is True  # type: ignore[union-attr]


async def sent_texts(queue: SendQueue) -> list[str]:
    """What the sender would send of incident 1's thread, in order."""
    texts = []
    while (head := await queue.head_reply("1")) is not None:
        texts.append(head.rendered.text)
        await queue.record_reply(CHANNEL, "1", head.item)
    return texts


async def test_a_newer_status_replaces_the_one_still_waiting(redis: Redis) -> None:
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    new = await opened(store)
    await store.commit(Commit(new, version=1, replies=(reply("status 1", "status", BAND_STATUS),)))
    await store.commit(Commit(new, version=2, replies=(reply("event", "event"),)))
    await store.commit(Commit(new, version=3, replies=(reply("status 2", "status", BAND_STATUS),)))

    texts = []
    while (head := await queue.head_reply("1")) is not None:
        texts.append(head.rendered.text)
        await queue.record_reply(CHANNEL, "1", head.item)
    assert texts == ["event", "status 2"]
    assert await redis.zrange(KEYS.posts(CHANNEL), 0, -1) == ["root:1"]


async def test_a_commit_with_a_posted_root_asks_for_an_edit_not_a_second_root(
    redis: Redis,
) -> None:
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    new = await opened(store)
    await queue.record_root(
        new,
        "1700000000.000100",
        "digest",
        version=1,
        edit_differs=False,
        edit_after_ms=0,
    )
    loaded = await store.load("1")
    await redis.delete(KEYS.edits(CHANNEL))

    assert await store.commit(Commit(new, version=loaded.version, thread=loaded.thread))

    assert await queue.waiting(CHANNEL) == 0, "no second root"
    assert await redis.zrange(KEYS.edits(CHANNEL), 0, -1) == ["1"]
    assert await store.incident_of_message(CHANNEL, "1700000000.000100") == "1"


async def test_a_status_still_waiting_when_the_alert_resolves_gives_way_to_the_summary(
    redis: Redis,
) -> None:
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    intake = Intake(
        NotificationStream(redis, PREFIX),
        store,
        Telemetry(),
        config=Settings(slack_channel=CHANNEL),
        consumer="c1",
        clock=lambda: T0 + timedelta(hours=1),
    )
    await intake.apply("1-0", delivery())
    loaded = await store.load("1")
    assert loaded.incident is not None
    status = reply("status 1", "status", BAND_STATUS)
    assert await store.commit(Commit(loaded.incident, version=loaded.version, replies=(status,)))

    await intake.apply("2-0", delivery("grafana/queue-alert-resolved.json"))

    kinds = []
    while (head := await queue.head_reply("1")) is not None:
        kinds.append(head.kind)
        await queue.record_reply(CHANNEL, "1", head.item)
    # The status was decided before the resolve; the summary has the last numbers (then its
    # chart's picture, which the sender posts only where charts go as pictures).
    assert kinds == ["summary", "chart"]


async def test_a_summary_that_takes_a_waiting_status_place_carries_its_chart(
    redis: Redis,
) -> None:
    """The summary leaves out the chart the last status drew; when that status was still
    waiting for its slot, it never went out, and the summary that replaced it carries the
    chart instead. With nothing waiting, the summary goes as it is."""
    store, queue = IncidentStore(redis, PREFIX), SendQueue(redis, PREFIX, retention_s=DAY)
    plain, charted = Rendered("summary", []), Rendered("summary with its chart", [])
    for waiting, said in ((True, "summary with its chart"), (False, "summary")):
        await redis.flushdb()
        new = await opened(store)
        version = 1
        if waiting:
            status = reply("status", "status", BAND_STATUS)
            await store.commit(Commit(new, version=version, replies=(status,)))
            version += 1
        replies = summary_replies(BAND_EVENT, (plain, charted), new)
        await store.commit(Commit(new, version=version, replies=replies[:1]))
        head = await queue.head_reply("1")
        assert head is not None and head.rendered.text == said, (waiting, head)
