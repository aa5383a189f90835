"""The Slack gateway over real HTTP against the Web API emulator: one call, one classification."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.config import Settings
from bot.outbound.gateway import SlackError, SlackGateway, build_client
from bot.pacing import Pacing
from bot.storage.keys import Keys
from bot.storage.slack_cache import PermalinkCache, UserNames
from bot.telemetry import Telemetry
from sandbox.serve import serve_in_thread
from tests.support.servers import free_port
from tests.support.slack import BOT_TOKEN, CHANNEL, Slack

BLOCKS: list[dict[str, Any]] = [
    {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "*Jobs queueing* in autoscaled machines"},
    }
]
# Call.at is taken when the emulator receives a request; HTTP jitter between the gateway taking
# a pacing slot and the request arriving is allowed this much.
JITTER_S = 0.01


def make_gateway(
    slack: Slack,
    redis: Redis,
    telemetry: Telemetry | None = None,
    *,
    token: str = BOT_TOKEN,
    base_url: str | None = None,
    max_retries: int = 3,
    timeout_s: float = 10,
    link_timeout_s: float = 3.0,
) -> SlackGateway:
    settings = Settings(
        slack_bot_token=token,
        slack_api_url=base_url or slack.api_url,
        slack_timeout_seconds=timeout_s,
    )
    telemetry = telemetry or Telemetry()
    keys = Keys("qp")
    return SlackGateway(
        build_client(settings, max_retries=max_retries),
        telemetry=telemetry,
        pacing=Pacing(),
        user_names=UserNames(redis, keys),
        permalinks=PermalinkCache(redis, keys, keep_s=3600),
        link_timeout_s=link_timeout_s,
    )


async def post(gateway: SlackGateway, channel: str, text: str, blocks: Any, **params: Any) -> str:
    """A message posted as the sender posts one; its ts."""
    answer = await gateway.call(
        "chat.postMessage", channel=channel, text=text, blocks=blocks, **params
    )
    return str(answer["ts"])


def counted(telemetry: Telemetry, metric: str, **labels: str) -> float:
    return telemetry.registry.get_sample_value(metric, labels) or 0.0


# -- the happy path -------------------------------------------------------------------------------


async def test_post_reply_and_update_land_in_slack(slack: Slack, redis: Redis) -> None:
    telemetry = Telemetry()
    gateway = make_gateway(slack, redis, telemetry)

    ts = await post(gateway, CHANNEL, "Jobs queueing", BLOCKS)
    reply_ts = await post(gateway, CHANNEL, "status update", [], thread_ts=ts)
    await gateway.call(
        "chat.update", channel=CHANNEL, ts=ts, text="Jobs queueing (resolved)", blocks=BLOCKS
    )

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
    await post(gateway, "C0NOSUCH", "hello", BLOCKS)


async def _post_outside_the_channel(slack: Slack, gateway: SlackGateway) -> None:
    slack.emulator.add_channel("C0OUTSIDE", member=False)
    await post(gateway, "C0OUTSIDE", "hello", BLOCKS)


async def _post_to_archived_channel(slack: Slack, gateway: SlackGateway) -> None:
    slack.emulator.add_channel("C0ARCHIVED")
    slack.emulator.archive("C0ARCHIVED")
    await post(gateway, "C0ARCHIVED", "hello", BLOCKS)


async def _update_a_deleted_message(slack: Slack, gateway: SlackGateway) -> None:
    await gateway.call(
        "chat.update", channel=CHANNEL, ts="1700000000.000100", text="hello", blocks=BLOCKS
    )


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
        await post(gateway, CHANNEL, "hello", BLOCKS)

    assert caught.value.error == "invalid_auth"
    assert not caught.value.retryable
    assert len(slack.emulator.calls("chat.postMessage")) == 1
    assert slack.emulator.channel_messages(CHANNEL) == []


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_a_5xx_is_retryable_and_uncertain_and_never_resent_by_the_gateway(
    slack: Slack, redis: Redis, status: int
) -> None:
    """A 502 or 504 does not prove Slack did nothing: the gateway sends once and says so, and
    the sender looks the message up before it posts again (tests/outbound/test_sender.py)."""
    slack.emulator.fail_next("chat.postMessage", status=status, count=2)
    gateway = make_gateway(slack, redis)

    with pytest.raises(SlackError) as caught:
        await post(gateway, CHANNEL, "hello", BLOCKS)

    assert caught.value.retryable and caught.value.uncertain
    assert [c.status for c in slack.emulator.calls("chat.postMessage")] == [status]


@pytest.mark.parametrize("error", ["internal_error", "fatal_error", "service_unavailable"])
async def test_transient_errors_in_a_200_answer_are_retryable_and_uncertain(
    slack: Slack, redis: Redis, error: str
) -> None:
    slack.emulator.fail_next("chat.postMessage", status=200, error=error)
    gateway = make_gateway(slack, redis)

    with pytest.raises(SlackError) as caught:
        await post(gateway, CHANNEL, "hello", BLOCKS)

    assert (caught.value.error, caught.value.retryable, caught.value.uncertain) == (
        error,
        True,
        True,
    )


async def test_a_429_is_certain_and_holds_the_method(slack: Slack, redis: Redis) -> None:
    telemetry = Telemetry()
    gateway = make_gateway(slack, redis, telemetry)
    slack.emulator.fail_next("chat.postMessage", status=429, retry_after=2)

    with pytest.raises(SlackError) as caught:
        await post(gateway, CHANNEL, "held", BLOCKS)

    assert caught.value.error == "ratelimited"
    assert caught.value.retry_after == 2
    assert caught.value.retryable and not caught.value.uncertain, "a 429 posted nothing"
    assert 1.5 < gateway.pacing.held_for("chat.postMessage") <= 2.0
    assert gateway.pacing.held_for("chat.update") == 0, "other methods are not held"
    rate_limited = "queuepilot_slack_rate_limited_total"
    assert counted(telemetry, rate_limited, method="chat.postMessage") == 1


async def test_an_ephemeral_answer_waits_out_a_short_hold(slack: Slack, redis: Redis) -> None:
    slack.emulator.fail_next("chat.postEphemeral", status=429, retry_after=1)
    gateway = make_gateway(slack, redis)

    await gateway.post_ephemeral(CHANNEL, "U0ALICE", "You acknowledged incident 3.")

    limited, answered = slack.emulator.calls("chat.postEphemeral")
    assert (limited.status, answered.status) == (429, 200)
    assert answered.at - limited.at >= 1.0 - JITTER_S
    assert [m.text for m in slack.emulator.ephemerals(CHANNEL)] == ["You acknowledged incident 3."]


async def test_display_names_come_from_users_info_once(slack: Slack, redis: Redis) -> None:
    gateway = make_gateway(slack, redis)

    assert await gateway.display_name("U0ALICE") == "alice"
    assert await gateway.display_name("U0ALICE") == "alice"
    assert await gateway.display_name("U0NOBODY") is None

    assert len(slack.emulator.calls("users.info")) == 2, "the known name is cached"


def text_is(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("text") == text


async def test_find_reads_the_window_page_by_page_until_the_message_is_there(
    slack: Slack, redis: Redis
) -> None:
    gateway = make_gateway(slack, redis)
    meta = {"event_type": "queuepilot_message", "event_payload": {"item": "root"}}
    root = await post(gateway, CHANNEL, "root", BLOCKS, metadata=meta)
    for i in range(40):
        await post(gateway, CHANNEL, f"reply {i}", [], thread_ts=root)
    now = time.time()
    window = {"oldest": now - 60, "latest": now + 60}

    first = await gateway.find(
        "conversations.replies", CHANNEL, text_is("reply 0"), ts=root, **window
    )
    pages_for_first = len(slack.emulator.calls("conversations.replies"))
    last = await gateway.find(
        "conversations.replies", CHANNEL, text_is("reply 39"), ts=root, **window
    )
    with_metadata = await gateway.find(
        "conversations.history", CHANNEL, lambda m: m.get("metadata") == meta, **window
    )
    before = await gateway.find(
        "conversations.history", CHANNEL, text_is("root"), oldest=now - 7200, latest=now - 3600
    )

    assert first and first["text"] == "reply 0" and pages_for_first == 1, "no page past it"
    assert last and last["text"] == "reply 39", "found on the third page"
    assert with_metadata and with_metadata["ts"] == root
    assert before is None, "nothing outside the window"
    pages = slack.emulator.calls("conversations.replies")
    assert len(pages) == 4 and all(int(c.params["limit"]) <= 15 for c in pages), (
        "pages of 15, the most a distributed app may ask for"
    )


async def test_a_lookup_under_distributed_app_limits_waits_out_each_429_and_ends(
    slack: Slack, redis: Redis
) -> None:
    """Since 2025 Slack lets a commercially distributed non-Marketplace app read history about
    once a minute, 15 messages a call: a lookup of three pages waits out every Retry-After and
    asks for the same page again (the interval is shortened here)."""
    gateway = make_gateway(slack, redis)
    root = await post(gateway, CHANNEL, "root", BLOCKS)
    for i in range(40):
        await post(gateway, CHANNEL, f"reply {i}", [], thread_ts=root)
    now = time.time()
    slack.emulator.history_tier, slack.emulator.history_interval_s = 1, 1.0
    try:
        last = await gateway.find(
            "conversations.replies",
            CHANNEL,
            text_is("reply 39"),
            ts=root,
            oldest=now - 60,
            latest=now + 60,
        )
    finally:
        slack.emulator.history_tier, slack.emulator.history_interval_s = 3, 60.0

    assert last and last["text"] == "reply 39"
    calls = slack.emulator.calls("conversations.replies")
    answered = [c for c in calls if c.ok]
    assert len(answered) == 3, "each page asked until answered, none skipped"
    assert len({c.params.get("cursor") for c in answered}) == 3, "the cursor kept across 429s"
    for limited in (c for c in calls if c.status == 429):
        after = next(c for c in calls if c.at > limited.at)
        assert after.at - limited.at >= 1.0 - JITTER_S, "Retry-After waited out, not hammered"


async def test_two_lookups_waiting_on_one_hold_do_not_both_call_when_it_ends(
    slack: Slack, redis: Redis
) -> None:
    """Every channel whose lookup waits for the same Retry-After would call at
    the instant it ends, and all but one be refused: the history reads take turns app-wide."""
    first = make_gateway(slack, redis)
    root = await post(first, CHANNEL, "root", BLOCKS)
    now = time.time()
    slack.emulator.history_tier, slack.emulator.history_interval_s = 1, 1.0
    try:
        found = await asyncio.gather(
            *(
                gateway.find(
                    "conversations.history",
                    CHANNEL,
                    text_is("root"),
                    oldest=now - 60,
                    latest=now + 60,
                )
                for gateway in (first, first, first)
            )
        )
    finally:
        slack.emulator.history_tier, slack.emulator.history_interval_s = 3, 60.0

    assert [m and m["ts"] for m in found] == [root, root, root]
    statuses = [c.status for c in slack.emulator.calls("conversations.history")]
    assert statuses.count(200) == 3 and statuses.count(429) <= 1, statuses


async def test_connection_refused_is_retryable_and_certain(redis: Redis, slack: Slack) -> None:
    closed = f"http://127.0.0.1:{free_port()}/api/"
    gateway = make_gateway(slack, redis, base_url=closed, max_retries=1, timeout_s=2)

    with pytest.raises(SlackError) as caught:
        await post(gateway, CHANNEL, "hello", BLOCKS)

    assert caught.value.retryable
    assert not caught.value.uncertain, "a refused connection never reached Slack"


async def test_a_post_that_timed_out_is_not_sent_again(slack: Slack, redis: Redis) -> None:
    # Slack acted but its answer never came: sending again would post a second root or reply.
    # The sender looks it up by its metadata; the gateway must not re-send on its own.
    slack.emulator.stall("chat.postMessage", 3)
    gateway = make_gateway(slack, redis, timeout_s=1, max_retries=1)
    try:
        with pytest.raises(SlackError) as caught:
            await post(gateway, CHANNEL, "hello", BLOCKS)
    finally:
        slack.emulator.stall("chat.postMessage", 0)

    assert caught.value.uncertain
    assert len(slack.emulator.channel_messages(CHANNEL)) == 1


@pytest.mark.parametrize(
    ("status", "body", "media_type", "error"),
    [
        (502, "<html><body>502 Bad Gateway</body></html>", "text/html", "http_502"),
        (200, "OK", "text/plain", "unreadable_answer"),
        (200, "<html>maintenance</html>", "text/html", "http_200"),
    ],
)
async def test_an_answer_that_is_not_slacks_is_retryable_and_uncertain(
    slack: Slack, redis: Redis, status: int, body: str, media_type: str, error: str
) -> None:
    """Something between the bot and Slack answered (a proxy's error page, a captive portal):
    the call may have reached Slack, so it is uncertain, and never a crash in the sender."""

    async def proxy(request: Request) -> Response:
        return Response(body, status_code=status, media_type=media_type)

    server = serve_in_thread(Starlette(routes=[Route("/api/{method}", proxy, methods=["POST"])]))
    try:
        gateway = make_gateway(slack, redis, base_url=f"{server.url}/api/")
        with pytest.raises(SlackError) as caught:
            await post(gateway, CHANNEL, "hello", BLOCKS)
    finally:
        server.stop()

    assert (caught.value.error, caught.value.retryable, caught.value.uncertain) == (
        error,
        True,
        True,
    )


async def test_every_call_the_bot_makes_is_taken_by_a_slack_that_follows_the_method_table(
    slack: Slack, redis: Redis
) -> None:
    """The emulator refuses what Slack refuses: a JSON body to a method that reads only the query
    string or a form (`conversations.history`, `users.info`, `usergroups.users.list`,
    `chat.getPermalink`, the upload steps) arrives as no arguments. 0.13 sent them all as JSON."""
    gateway = make_gateway(slack, redis)
    now = time.time()
    root = await post(
        gateway,
        CHANNEL,
        "root",
        BLOCKS,
        metadata={"event_type": "queuepilot_message", "event_payload": {"item": "root"}},
    )
    await gateway.call("chat.update", channel=CHANNEL, ts=root, text="root, edited", blocks=BLOCKS)
    await gateway.post_ephemeral(CHANNEL, "U0ALICE", "only for alice", thread_ts=root)
    window = {"oldest": now - 60, "latest": now + 60}
    in_channel = await gateway.find(
        "conversations.history", CHANNEL, text_is("root, edited"), **window
    )
    in_thread = await gateway.find(
        "conversations.replies", CHANNEL, text_is("root, edited"), ts=root, **window
    )
    name = await gateway.display_name("U0ALICE")
    members = await gateway.usergroup_members("S0ONCALL")
    link = await gateway.link(CHANNEL, root)
    file_id = await gateway.upload_file(
        CHANNEL, root, data=b"\x89PNG\r\n\x1a\n", filename="t.png", title="trend", alt="a chart"
    )

    assert in_channel and in_thread and in_channel["ts"] == in_thread["ts"] == root
    assert (name, members) == ("alice", ["U0ALICE"])
    assert link and root.replace(".", "") in link
    assert file_id and slack.emulator.file_bytes(file_id) == b"\x89PNG\r\n\x1a\n"
    refused = [(c.method, c.error) for c in slack.emulator.calls() if not c.ok]
    assert refused == []
