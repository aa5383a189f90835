"""The Slack gateway over real HTTP against the Web API emulator: retries, error classes, pacing."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.slack import SlackConfig, SlackError, SlackGateway, build_client
from bot.telemetry import Telemetry
from tests.conftest import BOT_TOKEN, CHANNEL, Slack
from tests.servers import free_port

BLOCKS: list[dict[str, Any]] = [
    {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "*Jobs queueing* in autoscaled machines"},
    }
]
# Call.at is taken when the emulator receives a request; HTTP jitter between the gateway taking
# a pacing slot and the request arriving is allowed this much.
JITTER_S = 0.01


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


def make_gateway(
    slack: Slack,
    redis: Redis,
    telemetry: Telemetry | None = None,
    *,
    token: str = BOT_TOKEN,
    base_url: str | None = None,
    **config: Any,
) -> SlackGateway:
    settings = SlackConfig(
        token=token,
        base_url=base_url or slack.api_url,
        **({"post_interval_ms": 0, "update_interval_ms": 0} | config),
    )
    telemetry = telemetry or Telemetry()
    return SlackGateway(
        build_client(settings), redis, config=settings, telemetry=telemetry, prefix="qp"
    )


def counted(telemetry: Telemetry, metric: str, **labels: str) -> float:
    return telemetry.registry.get_sample_value(metric, labels) or 0.0


# -- the happy path -------------------------------------------------------------------------------


async def test_post_reply_and_update_land_in_slack(slack: Slack, redis: Redis) -> None:
    telemetry = Telemetry()
    gateway = make_gateway(slack, redis, telemetry)

    ts = await gateway.post(CHANNEL, "Jobs queueing", BLOCKS)
    reply_ts = await gateway.post(CHANNEL, "status update", [], thread_ts=ts)
    await gateway.update(CHANNEL, ts, "Jobs queueing (resolved)", BLOCKS)

    [root] = slack.emulator.channel_messages(CHANNEL)
    assert root.ts == ts
    assert (root.text, root.blocks, root.edits) == ("Jobs queueing (resolved)", BLOCKS, 1)
    thread = slack.emulator.thread(CHANNEL, ts)
    assert [(m.ts, m.text) for m in thread[1:]] == [(reply_ts, "status update")]
    ok = "queuepilot_slack_calls_total"
    assert counted(telemetry, ok, method="chat.postMessage", outcome="ok") == 2
    assert counted(telemetry, ok, method="chat.update", outcome="ok") == 1


# -- errors: permanent ones are reported at once, transient ones retried --------------------------


async def _post_to_unknown_channel(slack: Slack, gateway: SlackGateway) -> None:
    await gateway.post("C0NOSUCH", "hello", BLOCKS)


async def _post_outside_the_channel(slack: Slack, gateway: SlackGateway) -> None:
    slack.emulator.add_channel("C0OUTSIDE", member=False)
    await gateway.post("C0OUTSIDE", "hello", BLOCKS)


async def _post_to_archived_channel(slack: Slack, gateway: SlackGateway) -> None:
    slack.emulator.add_channel("C0ARCHIVED")
    slack.emulator.archive("C0ARCHIVED")
    await gateway.post("C0ARCHIVED", "hello", BLOCKS)


async def _update_a_deleted_message(slack: Slack, gateway: SlackGateway) -> None:
    await gateway.update(CHANNEL, "1700000000.000100", "hello", BLOCKS)


PERMANENT = {
    "channel_not_found": ("chat.postMessage", _post_to_unknown_channel),
    "not_in_channel": ("chat.postMessage", _post_outside_the_channel),
    "is_archived": ("chat.postMessage", _post_to_archived_channel),
    "message_not_found": ("chat.update", _update_a_deleted_message),
}


@pytest.mark.parametrize("error", PERMANENT)
async def test_permanent_errors_are_not_retried(slack: Slack, redis: Redis, error: str) -> None:
    method, act = PERMANENT[error]
    telemetry = Telemetry()
    gateway = make_gateway(slack, redis, telemetry)

    with pytest.raises(SlackError) as caught:
        await act(slack, gateway)

    assert (caught.value.method, caught.value.error) == (method, error)
    assert not caught.value.retryable
    assert not caught.value.uncertain
    assert len(slack.emulator.calls(method)) == 1
    assert counted(telemetry, "queuepilot_slack_calls_total", method=method, outcome=error) == 1


async def test_a_wrong_token_is_invalid_auth_and_not_retried(slack: Slack, redis: Redis) -> None:
    gateway = make_gateway(slack, redis, token="xoxb-wrong")

    with pytest.raises(SlackError) as caught:
        await gateway.post(CHANNEL, "hello", BLOCKS)

    assert caught.value.error == "invalid_auth"
    assert not caught.value.retryable
    assert len(slack.emulator.calls("chat.postMessage")) == 1
    assert slack.emulator.channel_messages(CHANNEL) == []


async def test_one_503_is_retried_and_the_message_lands_once(slack: Slack, redis: Redis) -> None:
    slack.emulator.fail_next("chat.postMessage", status=503)
    gateway = make_gateway(slack, redis)

    ts = await gateway.post(CHANNEL, "hello", BLOCKS)

    assert [c.status for c in slack.emulator.calls("chat.postMessage")] == [503, 200]
    assert [m.ts for m in slack.emulator.channel_messages(CHANNEL)] == [ts]


async def test_a_lasting_503_gives_up_as_retryable(slack: Slack, redis: Redis) -> None:
    slack.emulator.fail_next("chat.postMessage", status=503, count=10)
    gateway = make_gateway(slack, redis, max_retries=1)

    with pytest.raises(SlackError) as caught:
        await gateway.post(CHANNEL, "hello", BLOCKS)

    assert caught.value.retryable
    assert caught.value.error == "service_unavailable"
    assert [c.status for c in slack.emulator.calls("chat.postMessage")] == [503, 503]


@pytest.mark.parametrize("error", ["internal_error", "ratelimited", "fatal_error"])
async def test_transient_errors_in_a_200_answer_are_retryable(
    slack: Slack, redis: Redis, error: str
) -> None:
    slack.emulator.fail_next("chat.postMessage", status=200, error=error)
    gateway = make_gateway(slack, redis)

    with pytest.raises(SlackError) as caught:
        await gateway.post(CHANNEL, "hello", BLOCKS)

    assert (caught.value.error, caught.value.retryable) == (error, True)


async def test_429_waits_out_retry_after_then_succeeds(slack: Slack, redis: Redis) -> None:
    slack.emulator.fail_next("chat.postMessage", status=429, retry_after=1)
    telemetry = Telemetry()
    gateway = make_gateway(slack, redis, telemetry)

    await gateway.post(CHANNEL, "hello", BLOCKS)

    limited, retried = slack.emulator.calls("chat.postMessage")
    assert (limited.status, retried.status) == (429, 200)
    assert retried.at - limited.at >= 1.0 - JITTER_S
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1
    rate_limited = "queuepilot_slack_rate_limited_total"
    assert counted(telemetry, rate_limited, method="chat.postMessage") == 1


async def test_a_429_holds_the_method_for_every_replica(slack: Slack, redis: Redis) -> None:
    # Two gateways on one Redis are two replicas: when Slack tells one to wait, both wait.
    first, second = make_gateway(slack, redis), make_gateway(slack, redis)
    slack.emulator.fail_next("chat.postMessage", status=429, retry_after=1)
    limited = asyncio.create_task(first.post(CHANNEL, "from replica one", BLOCKS))
    while not await redis.exists("qp:pace:hold:chat.postMessage"):
        assert not limited.done(), "the 429 should have set a hold"
        await asyncio.sleep(0.01)

    await second.post(CHANNEL, "from replica two", BLOCKS)
    await limited

    calls = slack.emulator.calls("chat.postMessage")
    limited_at = next(c.at for c in calls if c.status == 429)
    later = [c.at - limited_at for c in calls if c.status == 200]
    assert len(later) == 2 and min(later) >= 1 - JITTER_S, later
    assert len(slack.emulator.channel_messages(CHANNEL)) == 2


async def test_connection_refused_is_retryable_and_certain(redis: Redis, slack: Slack) -> None:
    closed = f"http://127.0.0.1:{free_port()}/api/"
    gateway = make_gateway(slack, redis, base_url=closed, max_retries=1, timeout_s=2)

    with pytest.raises(SlackError) as caught:
        await gateway.post(CHANNEL, "hello", BLOCKS)

    assert caught.value.retryable
    assert not caught.value.uncertain, "a refused connection never reached Slack"


# -- pacing ---------------------------------------------------------------------------------------


async def test_pacing_spans_replicas(slack: Slack, redis_url: str) -> None:
    clients = [Redis.from_url(redis_url, decode_responses=True) for _ in range(2)]
    try:
        gateways = [make_gateway(slack, c, post_interval_ms=200) for c in clients]

        await asyncio.gather(
            *(
                gw.post(CHANNEL, f"replica {r} message {i}", [])
                for r, gw in enumerate(gateways)
                for i in range(5)
            )
        )
    finally:
        for client in clients:
            await client.aclose()

    calls = slack.emulator.calls("chat.postMessage")
    assert len(calls) == 10 and all(c.ok for c in calls)
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(calls)]
    assert min(gaps) >= 0.2 - JITTER_S, gaps
    assert len(slack.emulator.channel_messages(CHANNEL)) == 10


async def test_paced_bursts_never_meet_slacks_rate_limit(slack: Slack, redis: Redis) -> None:
    gateway = make_gateway(slack, redis, post_interval_ms=1000)
    slack.emulator.enforce_rate_limits = True
    try:
        await asyncio.gather(*(gateway.post(CHANNEL, f"alert {i}", []) for i in range(5)))
    finally:
        slack.emulator.enforce_rate_limits = False

    statuses = [c.status for c in slack.emulator.calls("chat.postMessage")]
    assert statuses == [200] * 5
    assert len(slack.emulator.channel_messages(CHANNEL)) == 5


async def test_a_post_that_timed_out_is_not_sent_again(slack: Slack, redis: Redis) -> None:
    # Slack acted but its answer never came: sending again would post a second root or reply.
    # threads.py already handles `uncertain` (it keeps the thread claim); the gateway must not
    # undo that by re-sending on its own.
    slack.emulator.stall("chat.postMessage", 3)
    gateway = make_gateway(slack, redis, timeout_s=1, max_retries=1)
    try:
        with pytest.raises(SlackError) as caught:
            await gateway.post(CHANNEL, "hello", BLOCKS)
    finally:
        slack.emulator.stall("chat.postMessage", 0)

    assert caught.value.uncertain
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1
