"""Tests for the Slack Web API emulator, driven through slack_sdk's real AsyncWebClient.

The server is module-scoped (started once, `reset()` between tests) so the whole file
runs in a few seconds; tests that change channel flags use channel ids of their own
because `reset()` deliberately keeps channels.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.serve import RunningServer, serve_in_thread
from sandbox.slack_api import UPLOAD_METHOD, SlackEmulator
from tests.support.running import eventually

TOKEN = "xoxb-queuepilot-test"
CHANNEL = "C0QUEUE"


@pytest.fixture(scope="module")
def shared_emulator() -> SlackEmulator:
    return SlackEmulator(token=TOKEN, channels=(CHANNEL, "C0OTHER"))


@pytest.fixture(scope="module")
def server(shared_emulator: SlackEmulator) -> Iterator[RunningServer]:
    with serve_in_thread(shared_emulator.app) as running:
        yield running


@pytest.fixture
def emulator(shared_emulator: SlackEmulator, server: RunningServer) -> SlackEmulator:
    shared_emulator.reset()
    return shared_emulator


@pytest.fixture
def client(emulator: SlackEmulator, server: RunningServer) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=f"{server.url}/api/")


def section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


# -- messages and threads ------------------------------------------------------------------


async def test_post_reply_update_keeps_thread_order_and_counts_edits(
    emulator: SlackEmulator, client: AsyncWebClient
) -> None:
    root = await client.chat_postMessage(
        channel=CHANNEL, text="queue backed up", blocks=[section("x")]
    )
    first = await client.chat_postMessage(channel=CHANNEL, text="first", thread_ts=root["ts"])
    second = await client.chat_postMessage(channel=CHANNEL, text="second", thread_ts=root["ts"])
    await client.chat_update(channel=CHANNEL, ts=root["ts"], text="queue recovering")
    updated = await client.chat_update(channel=CHANNEL, ts=root["ts"], text="queue recovered")

    assert updated["text"] == "queue recovered"
    [message] = emulator.channel_messages(CHANNEL)
    assert (message.ts, message.text, message.edits) == (root["ts"], "queue recovered", 2)
    assert message.blocks == [section("x")]
    thread = emulator.thread(CHANNEL, root["ts"])
    assert [m.ts for m in thread] == [root["ts"], first["ts"], second["ts"]]
    assert [m.thread_ts for m in thread[1:]] == [root["ts"], root["ts"]]


async def test_conversations_read_back_like_slack(client: AsyncWebClient) -> None:
    older = await client.chat_postMessage(channel=CHANNEL, text="older")
    newer = await client.chat_postMessage(channel=CHANNEL, text="newer")
    reply = await client.chat_postMessage(channel=CHANNEL, text="reply", thread_ts=older["ts"])

    history = await client.conversations_history(channel=CHANNEL)
    assert [m["ts"] for m in history["messages"]] == [newer["ts"], older["ts"]]
    assert history["messages"][1]["reply_count"] == 1
    assert history["messages"][1]["latest_reply"] == reply["ts"]

    replies = await client.conversations_replies(channel=CHANNEL, ts=older["ts"])
    assert [m["ts"] for m in replies["messages"]] == [older["ts"], reply["ts"]]
    assert replies["messages"][1]["thread_ts"] == older["ts"]


async def test_replies_keep_the_parent_and_only_replies_inside_the_window(
    client: AsyncWebClient,
) -> None:
    """The bot looks a reply up in a bounded window: one outside it must not be found."""
    root = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
    before, inside, after = [
        (await client.chat_postMessage(channel=CHANNEL, text=t, thread_ts=root))["ts"]
        for t in ("before", "inside", "after")
    ]

    async def replies(**window: object) -> list[str]:
        found = await client.conversations_replies(channel=CHANNEL, ts=root, **window)
        return [m["ts"] for m in found["messages"]]

    assert await replies(oldest=before, latest=after) == [root, inside]
    assert await replies(oldest=before, latest=after, inclusive=True) == [
        root,
        before,
        inside,
        after,
    ]
    assert await replies(oldest=after) == [root]  # the parent whatever the window
    assert await replies(latest=inside, inclusive=True) == [root, before, inside]


async def test_history_paginates_with_cursor(client: AsyncWebClient) -> None:
    posted = [(await client.chat_postMessage(channel=CHANNEL, text=str(i)))["ts"] for i in range(3)]
    first = await client.conversations_history(channel=CHANNEL, limit=2)
    assert first["has_more"] is True
    cursor = first["response_metadata"]["next_cursor"]
    rest = await client.conversations_history(channel=CHANNEL, limit=2, cursor=cursor)
    seen = [m["ts"] for m in first["messages"] + rest["messages"]]
    assert seen == list(reversed(posted))


async def test_timestamps_are_unique_and_increasing(client: AsyncWebClient) -> None:
    stamps = [(await client.chat_postMessage(channel=CHANNEL, text="x"))["ts"] for _ in range(5)]
    assert all(len(ts.split(".")[1]) == 6 for ts in stamps)
    assert [Decimal(ts) for ts in stamps] == sorted({Decimal(ts) for ts in stamps})


async def test_ephemeral_and_permalink(emulator: SlackEmulator, client: AsyncWebClient) -> None:
    root = await client.chat_postMessage(channel=CHANNEL, text="root")
    reply = await client.chat_postMessage(channel=CHANNEL, text="reply", thread_ts=root["ts"])
    sent = await client.chat_postEphemeral(channel=CHANNEL, user="U0BOB", text="only you")

    [ephemeral] = emulator.ephemerals(CHANNEL)
    assert (ephemeral.ts, ephemeral.user, ephemeral.text) == (
        sent["message_ts"],
        "U0BOB",
        "only you",
    )
    assert emulator.ephemerals() == [ephemeral]
    assert emulator.channel_messages(CHANNEL)[0].text == "root"  # ephemerals stay out

    link = await client.chat_getPermalink(channel=CHANNEL, message_ts=reply["ts"])
    assert link["permalink"].endswith(
        f"/archives/{CHANNEL}/p{reply['ts'].replace('.', '')}?thread_ts={root['ts']}&cid={CHANNEL}"
    )


async def test_reply_broadcast_shows_in_history(client: AsyncWebClient) -> None:
    root = await client.chat_postMessage(channel=CHANNEL, text="root")
    await client.chat_postMessage(
        channel=CHANNEL, text="also here", thread_ts=root["ts"], reply_broadcast=True
    )
    history = await client.conversations_history(channel=CHANNEL)
    assert history["messages"][0]["subtype"] == "thread_broadcast"


# -- errors -------------------------------------------------------------------------------


def _setup_channels(emulator: SlackEmulator) -> None:
    emulator.add_channel("C0OUTSIDE", member=False)
    emulator.add_channel("C0ARCHIVED")
    emulator.archive("C0ARCHIVED")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.chat_postMessage(channel="C0NOPE", text="x"), "channel_not_found"),
        (lambda c: c.chat_postMessage(channel="C0OUTSIDE", text="x"), "not_in_channel"),
        (lambda c: c.chat_postMessage(channel="C0ARCHIVED", text="x"), "is_archived"),
        (lambda c: c.conversations_replies(channel=CHANNEL, ts="1.000001"), "thread_not_found"),
        (lambda c: c.api_call("chat.postMessage", json={"channel": CHANNEL}), "no_text"),
        (lambda c: c.chat_postMessage(channel=CHANNEL, text="x" * 40_001), "msg_too_long"),
        (lambda c: c.chat_update(channel=CHANNEL, ts="1.000001", text="x"), "message_not_found"),
        (lambda c: c.users_info(user="U0NOBODY"), "user_not_found"),
        (lambda c: c.usergroups_users_list(usergroup="S0NOPE"), "no_such_subteam"),
        (lambda c: c.api_call("chat.nonsense"), "unknown_method"),
        (lambda c: c.api_call("chat.postMessage", json={"text": "x"}), "invalid_arguments"),
    ],
)
async def test_slack_errors_surface_as_slack_api_error(
    emulator: SlackEmulator,
    client: AsyncWebClient,
    call: Callable[[AsyncWebClient], Awaitable[object]],
    error: str,
) -> None:
    _setup_channels(emulator)
    with pytest.raises(SlackApiError) as raised:
        await call(client)
    assert raised.value.response["error"] == error
    assert raised.value.response.status_code == 200
    assert emulator.calls()[-1].error == error


async def test_wrong_token_is_invalid_auth(emulator: SlackEmulator, server: RunningServer) -> None:
    intruder = AsyncWebClient(token="xoxb-wrong", base_url=f"{server.url}/api/")
    with pytest.raises(SlackApiError) as raised:
        await intruder.chat_postMessage(channel=CHANNEL, text="x")
    assert raised.value.response["error"] == "invalid_auth"
    assert emulator.channel_messages(CHANNEL) == []


def test_missing_token_is_not_authed(emulator: SlackEmulator, server: RunningServer) -> None:
    body = httpx.post(f"{server.url}/api/auth.test").json()
    assert body == {"ok": False, "error": "not_authed"}


async def test_too_many_blocks_is_invalid_blocks(client: AsyncWebClient) -> None:
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[{"type": "divider"}] * 51)
    assert raised.value.response["error"] == "invalid_blocks"
    assert raised.value.response["errors"]


async def test_long_header_is_invalid_blocks(client: AsyncWebClient) -> None:
    header = {"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[section("ok"), header])
    assert raised.value.response["error"] == "invalid_blocks"
    assert "/blocks/1" in raised.value.response["errors"][0]


async def test_nested_element_limits_are_checked(client: AsyncWebClient) -> None:
    button = {"type": "button", "text": {"type": "plain_text", "text": "b" * 76}, "action_id": "a"}
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(
            channel=CHANNEL, text="x", blocks=[{"type": "actions", "elements": [button]}]
        )
    assert raised.value.response["error"] == "invalid_blocks"


# -- faults, stalls, rate limits -------------------------------------------------------------


async def test_injected_429_is_retried_by_sdk_handler(
    emulator: SlackEmulator, server: RunningServer
) -> None:
    client = AsyncWebClient(
        token=TOKEN,
        base_url=f"{server.url}/api/",
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )
    # Retry-After 0 keeps the SDK's wait under a second; the header value itself is
    # checked in test_fault_endpoint_sets_retry_after.
    emulator.fail_next("chat.postMessage", status=429, retry_after=0)
    response = await client.chat_postMessage(channel=CHANNEL, text="eventually")

    assert response["ok"]
    calls = emulator.calls("chat.postMessage")
    assert [(c.status, c.error) for c in calls] == [(429, "ratelimited"), (200, None)]
    assert len(emulator.channel_messages(CHANNEL)) == 1


async def test_injected_503_fails_once(emulator: SlackEmulator, client: AsyncWebClient) -> None:
    emulator.fail_next("chat.postMessage", status=503)
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(channel=CHANNEL, text="x")
    assert raised.value.response.status_code == 503
    assert emulator.channel_messages(CHANNEL) == []
    await client.chat_postMessage(channel=CHANNEL, text="x")
    assert [c.status for c in emulator.calls("chat.postMessage")] == [503, 200]


async def test_injected_200_error_and_count(
    emulator: SlackEmulator, client: AsyncWebClient
) -> None:
    emulator.fail_next("users.info", status=200, error="fatal_error", count=2)
    for _ in range(2):
        with pytest.raises(SlackApiError) as raised:
            await client.users_info(user="U0ALICE")
        assert raised.value.response["error"] == "fatal_error"
    assert (await client.users_info(user="U0ALICE"))["user"]["name"] == "alice"


async def test_stall_holds_the_response_after_the_effect(
    emulator: SlackEmulator, client: AsyncWebClient
) -> None:
    emulator.stall("chat.postMessage", 30)
    pending = asyncio.create_task(client.chat_postMessage(channel=CHANNEL, text="lost reply"))
    await eventually(lambda: emulator.calls("chat.postMessage"), what="the post received")
    assert not pending.done()
    pending.cancel()  # the client dies mid-call...
    with pytest.raises(asyncio.CancelledError):
        await pending
    # ...but Slack already posted, which is what crash-recovery code has to cope with.
    assert [m.text for m in emulator.channel_messages(CHANNEL)] == ["lost reply"]
    emulator.stall("chat.postMessage", 0)
    assert (await client.chat_postMessage(channel=CHANNEL, text="fast"))["ok"]


async def test_rate_limits_when_enforced() -> None:
    emulator = SlackEmulator(token=TOKEN, enforce_rate_limits=True)
    with serve_in_thread(emulator.app) as running:
        client = AsyncWebClient(token=TOKEN, base_url=f"{running.url}/api/")
        for i in range(3):
            await client.chat_postMessage(channel=CHANNEL, text=f"burst {i}")
        with pytest.raises(SlackApiError) as raised:
            await client.chat_postMessage(channel=CHANNEL, text="one too many")
        assert raised.value.response.status_code == 429
        assert raised.value.response.headers["Retry-After"] == "1"
        assert raised.value.response["error"] == "ratelimited"
    assert len(emulator.channel_messages(CHANNEL)) == 3
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{running.url}/_emulator/healthz")  # stopped, port released


async def test_posts_are_limited_per_channel_and_edits_for_the_whole_app() -> None:
    # Slack: "1 message per second per channel" for posts; chat.update is Tier 3, counted per
    # method per workspace per app, so edits in one channel use up another channel's.
    emulator = SlackEmulator(token=TOKEN, channels=(CHANNEL, "C0OTHER"), enforce_rate_limits=True)
    with serve_in_thread(emulator.app) as running:
        client = AsyncWebClient(token=TOKEN, base_url=f"{running.url}/api/")
        posted = [await client.chat_postMessage(channel=CHANNEL, text=f"{i}") for i in range(3)]
        other = await client.chat_postMessage(channel="C0OTHER", text="another channel's post")
        assert other["ok"], "posts in another channel have a bucket of their own"
        for n in range(5):
            await client.chat_update(channel=CHANNEL, ts=posted[n % 3]["ts"], text=f"edit {n}")
        with pytest.raises(SlackApiError) as raised:
            await client.chat_update(channel="C0OTHER", ts=other["ts"], text="edit elsewhere")
        assert raised.value.response.status_code == 429
        assert raised.value.response["error"] == "ratelimited"


# -- views, files, users ---------------------------------------------------------------------


def modal(title: str, *, external_id: str | None = None) -> dict:
    view = {
        "type": "modal",
        "title": {"type": "plain_text", "text": title},
        "blocks": [section(title)],
    }
    if external_id:
        view["external_id"] = external_id
    return view


async def test_views_open_update_and_hash_conflict(
    emulator: SlackEmulator, client: AsyncWebClient
) -> None:
    opened = (await client.views_open(trigger_id="1.2.abc", view=modal("Ack", external_id="e1")))[
        "view"
    ]
    assert opened["id"].startswith("V") and opened["hash"]

    updated = (
        await client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Acked"))
    )["view"]
    assert updated["id"] == opened["id"] and updated["hash"] != opened["hash"]

    with pytest.raises(SlackApiError) as raised:
        await client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Stale"))
    assert raised.value.response["error"] == "hash_conflict"

    await client.views_update(external_id="e1", view=modal("By external id"))
    pushed = (await client.views_push(trigger_id="1.2.def", view=modal("Details")))["view"]
    assert pushed["root_view_id"] == opened["id"]

    latest = {v["id"]: v["title"]["text"] for v in emulator.views()}
    assert latest == {opened["id"]: "By external id", pushed["id"]: "Details"}


def amount_modal(initial: str, *, block_id: str = "amount") -> dict:
    element = {"type": "number_input", "action_id": "value", "is_decimal_allowed": False}
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Scale up"},
        "submit": {"type": "plain_text", "text": "Review"},
        "blocks": [
            {
                "type": "input",
                "block_id": block_id,
                "label": {"type": "plain_text", "text": "Runners to add"},
                "element": {**element, "initial_value": initial},
            }
        ],
    }


async def test_an_updated_input_keeps_what_it_showed_unless_its_ids_change(
    emulator: SlackEmulator, client: AsyncWebClient
) -> None:
    """As in Slack (bolt-js#290): views.update with an input of the same block and action IDs
    leaves what the input showed; a new block ID shows the update's initial value."""
    opened = (await client.views_open(trigger_id="1.2.abc", view=amount_modal("1")))["view"]
    updated = (
        await client.views_update(
            view_id=opened["id"], hash=opened["hash"], view=amount_modal("23")
        )
    )["view"]

    def shown() -> str:
        (view,) = emulator.views()
        return view["blocks"][0]["element"]["initial_value"]

    assert updated["blocks"][0]["element"]["initial_value"] == "1" and shown() == "1"
    renamed = amount_modal("23", block_id="amount_2")
    await client.views_update(view_id=opened["id"], hash=updated["hash"], view=renamed)
    assert shown() == "23"


async def test_invalid_view_is_invalid_arguments(client: AsyncWebClient) -> None:
    with pytest.raises(SlackApiError) as raised:
        await client.views_open(trigger_id="1.2.abc", view={"type": "modal", "blocks": []})
    assert raised.value.response["error"] == "invalid_arguments"


async def test_files_upload_v2_lands_in_thread(
    emulator: SlackEmulator, client: AsyncWebClient
) -> None:
    root = await client.chat_postMessage(channel=CHANNEL, text="incident")
    uploaded = await client.files_upload_v2(
        channel=CHANNEL,
        thread_ts=root["ts"],
        content="runner-42 stuck\n",
        filename="queue.log",
        title="Queue log",
        initial_comment="logs attached",
    )

    file_id = uploaded["file"]["id"]
    [_, file_message] = emulator.thread(CHANNEL, root["ts"])
    assert file_message.text == "logs attached"
    assert [(f["id"], f["name"], f["title"], f["size"]) for f in file_message.files] == [
        (file_id, "queue.log", "Queue log", len("runner-42 stuck\n"))
    ]
    steps = [c.method for c in emulator.calls()][1:]
    assert steps == ["files.getUploadURLExternal", UPLOAD_METHOD, "files.completeUploadExternal"]
    info = await client.files_info(file=file_id)
    assert info["file"]["channels"] == [CHANNEL]


async def test_users_and_usergroups(client: AsyncWebClient) -> None:
    user = (await client.users_info(user="U0ALICE"))["user"]
    assert user["id"] == "U0ALICE"
    assert user["profile"]["display_name"] == "alice"
    assert {"name", "real_name", "tz"} <= user.keys()
    members = await client.usergroups_users_list(usergroup="S0ONCALL")
    assert members["users"] == ["U0ALICE"]
    identity = await client.auth_test()
    assert (identity["user_id"], identity["team_id"]) == ("U0QUEUEBOT", "T0QUEUE")


# -- raw HTTP and control endpoints ----------------------------------------------------------


def test_form_post_with_json_string_blocks_and_token_param(
    emulator: SlackEmulator, server: RunningServer
) -> None:
    form = {"token": TOKEN, "channel": CHANNEL, "text": "hi", "blocks": json.dumps([section("f")])}
    body = httpx.post(f"{server.url}/api/chat.postMessage", data=form).json()
    assert body["ok"] and body["channel"] == CHANNEL
    assert emulator.channel_messages(CHANNEL)[0].blocks == [section("f")]
    [call] = emulator.calls("chat.postMessage")
    assert call.params["token"] == "[redacted]"
    assert call.params["blocks"] == [section("f")]


def test_control_endpoints(emulator: SlackEmulator, server: RunningServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/_emulator/healthz").json() == {"ok": True}
        headers = {"Authorization": f"Bearer {TOKEN}"}
        root = http.post(
            "/api/chat.postMessage", json={"channel": CHANNEL, "text": "r"}, headers=headers
        )
        ts = root.json()["ts"]
        reply = {"channel": CHANNEL, "text": "child", "thread_ts": ts}
        http.post("/api/chat.postMessage", json=reply, headers=headers)

        state = http.get("/_emulator/state").json()
        [message] = state["channels"][CHANNEL]["messages"]
        assert message["ts"] == ts
        assert [r["text"] for r in message["replies"]] == ["child"]

        fault = {"method": "auth.test", "status": 200, "error": "account_inactive"}
        assert http.post("/_emulator/faults", json=fault).json() == {"ok": True}
        assert http.post("/api/auth.test", headers=headers).json()["error"] == "account_inactive"

        assert http.post("/_emulator/reset").json() == {"ok": True}
        assert http.get("/_emulator/state").json()["channels"][CHANNEL]["messages"] == []
    assert emulator.calls() == []


def test_fault_endpoint_sets_retry_after(emulator: SlackEmulator, server: RunningServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        fault = {"method": "auth.test", "status": 429, "retry_after": 7}
        http.post("/_emulator/faults", json=fault)
        limited = http.post("/api/auth.test", headers={"Authorization": f"Bearer {TOKEN}"})
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "7"
    assert limited.json() == {"ok": False, "error": "ratelimited"}


def test_fault_endpoint_carries_slacks_messages(
    emulator: SlackEmulator, server: RunningServer
) -> None:
    pointed = "[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]"
    with httpx.Client(base_url=server.url) as http:
        fault = {
            "method": "chat.postMessage",
            "status": 200,
            "error": "invalid_blocks",
            "messages": [pointed],
        }
        assert http.post("/_emulator/faults", json=fault).json() == {"ok": True}
        unexplained = {"method": "chat.postMessage", "status": 200, "error": "invalid_blocks"}
        assert http.post("/_emulator/faults", json=unexplained).status_code == 400
        refused = http.post(
            "/api/chat.postMessage",
            json={"channel": CHANNEL, "text": "x"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert refused.json() == {
        "ok": False,
        "error": "invalid_blocks",
        "errors": [pointed.removeprefix("[ERROR] ")],
        "response_metadata": {"messages": [pointed]},
    }


def test_inspection_rejects_unknown_channel(emulator: SlackEmulator) -> None:
    with pytest.raises(KeyError):
        emulator.channel_messages("C0TYPO")
