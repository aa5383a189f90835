"""Links to messages against the Web API emulator and a real Redis: asked of Slack once for
every replica, never raising, never waiting past the timeout, and telling "none" (Slack has no
link) from "not known yet" (Slack slow or failing, a 429 held)."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from bot.outbound.gateway import SlackGateway
from bot.storage.keys import Keys
from tests.outbound.test_gateway import BLOCKS, make_gateway, post
from tests.support.running import eventually
from tests.support.servers import RedisServer
from tests.support.slack import CHANNEL, Slack


def permalinks(slack: Slack, redis: Redis, *, timeout_s: float = 3.0) -> SlackGateway:
    """One replica's gateway (each call builds another, sharing Redis)."""
    return make_gateway(slack, redis, link_timeout_s=timeout_s)


def asked(slack: Slack) -> int:
    return sum(c.method == "chat.getPermalink" for c in slack.emulator.calls())


async def posted(slack: Slack, redis: Redis, text: str = "root") -> str:
    return await post(make_gateway(slack, redis), CHANNEL, text, BLOCKS)


async def test_a_link_is_asked_of_slack_once_for_every_replica(slack: Slack, redis: Redis) -> None:
    ts = await posted(slack, redis)
    link = await permalinks(slack, redis).link(CHANNEL, ts)
    assert link and f"/archives/{CHANNEL}/p{ts.replace('.', '')}" in link
    assert await permalinks(slack, redis).link(CHANNEL, ts) == link, "another replica"
    assert asked(slack) == 1, "a kept link costs no Slack call"


async def test_many_links_ask_slack_only_for_those_not_kept_and_at_most_so_many(
    slack: Slack, redis: Redis
) -> None:
    messages = [(CHANNEL, await posted(slack, redis, f"root {n}")) for n in range(4)]
    links = permalinks(slack, redis)
    await links.link(*messages[0])
    first = await links.links(messages, ask_at_most=2)
    assert list(first) == messages[:3] and asked(slack) == 3, "one kept, two asked"
    every = await links.links([*messages, messages[0]])
    assert list(every) == messages and asked(slack) == 4, "the last asked, each once"


async def test_a_slack_that_does_not_answer_costs_the_timeout_and_is_asked_again(
    slack: Slack, redis: Redis
) -> None:
    ts = await posted(slack, redis)
    links = permalinks(slack, redis, timeout_s=0.3)
    slack.emulator.stall("chat.getPermalink", 5)
    started = time.monotonic()
    assert await links.link(CHANNEL, ts) is None, "not known yet"
    assert time.monotonic() - started < 2
    slack.emulator.stall("chat.getPermalink", 0)
    assert await links.link(CHANNEL, ts), "asked again: nothing was kept"


async def test_a_slack_failing_for_now_is_asked_again(slack: Slack, redis: Redis) -> None:
    ts = await posted(slack, redis)
    links = permalinks(slack, redis)
    slack.emulator.fail_next("chat.getPermalink", status=503)
    assert await links.link(CHANNEL, ts) is None
    assert await links.link(CHANNEL, ts)
    assert asked(slack) == 2


async def test_a_message_slack_has_no_link_for_is_kept_as_none(slack: Slack, redis: Redis) -> None:
    links = permalinks(slack, redis)
    assert await links.link(CHANNEL, "1700000000.000100") == "", "no such message"
    assert await links.link(CHANNEL, "1700000000.000100") == ""
    [call] = [c for c in slack.emulator.calls() if c.method == "chat.getPermalink"]
    assert call.error == "message_not_found"
    assert 0 < await redis.ttl(Keys("qp").permalink(CHANNEL, "1700000000.000100")) <= 3600


async def test_a_refusal_that_may_be_mended_is_none_for_now_and_asked_again(
    slack: Slack, redis: Redis
) -> None:
    """The app not in the channel (or a token or scope problem) is a refusal an operator can
    mend: none for now, not kept, so the link shows once it is mended."""
    ts = await posted(slack, redis)
    links = permalinks(slack, redis)
    slack.emulator.fail_next("chat.getPermalink", status=200, error="not_in_channel")
    assert await links.link(CHANNEL, ts) == ""
    assert await redis.exists(Keys("qp").permalink(CHANNEL, ts)) == 0, "not kept"
    assert await links.link(CHANNEL, ts), "asked again"
    assert asked(slack) == 2


async def test_a_429_holds_asking_for_its_retry_after(slack: Slack, redis: Redis) -> None:
    ts = await posted(slack, redis)
    links = permalinks(slack, redis)
    slack.emulator.fail_next("chat.getPermalink", status=429, retry_after=30)
    assert await links.link(CHANNEL, ts) is None
    assert await links.link(CHANNEL, ts) is None, "held: not asked"
    assert asked(slack) == 1


async def test_redis_away_costs_the_cache_only_and_raises_nothing(slack: Slack) -> None:
    server = RedisServer()
    server.start()
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        ts = await posted(slack, redis)
        links = permalinks(slack, redis)
        server.stop()
        link = await links.link(CHANNEL, ts)
        assert link, "Slack still answers; only keeping the link is lost"
        assert await links.links([(CHANNEL, ts)]) == {(CHANNEL, ts): link}
        server.start()
        await eventually(redis.ping, what="Redis back")
        assert await links.link(CHANNEL, ts) == link
        assert asked(slack) == 3, "asked while nothing could be kept, then kept"
    finally:
        await redis.aclose()
        server.stop()
