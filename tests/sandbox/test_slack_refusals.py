"""What Slack refuses, and what it lets through, as the emulator answers.

Each case names Slack's answer; the sources are beside the rules (slack_limits, slack_state,
slack_methods). The table at the end holds each kind of refusal against the whole answer Slack
gives (`ok`, `error`, `response_metadata.messages` with their json-pointers, `needed`...), the
source of each shape beside it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.slack_api import SlackEmulator
from sandbox.slack_limits import MAX_TEXT_CHARS
from sandbox.slack_methods import ALL_SCOPES
from tests.support.slack import CHANNEL, Slack, refusal

Call = Callable[[AsyncWebClient], Awaitable[Any]]
Setup = Callable[[SlackEmulator], None]


def modal(title: str = "Scale", **extra: Any) -> dict[str, Any]:
    section = {"type": "section", "text": {"type": "mrkdwn", "text": title}}
    title_text = {"type": "plain_text", "text": title}
    return {"type": "modal", "title": title_text, "blocks": [section], **extra}


# -- message text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "send",
    [
        lambda c, text, ts: c.chat_postMessage(channel=CHANNEL, text=text),
        lambda c, text, ts: c.chat_postEphemeral(channel=CHANNEL, user="U0BOB", text=text),
        lambda c, text, ts: c.chat_update(channel=CHANNEL, ts=ts, text=text),
    ],
    ids=["postMessage", "postEphemeral", "update"],
)
async def test_text_over_slacks_limit_is_msg_too_long(client: AsyncWebClient, send: Any) -> None:
    ts = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
    assert (await send(client, "x" * MAX_TEXT_CHARS, ts))["ok"]
    answer = await refusal(send(client, "x" * (MAX_TEXT_CHARS + 1), ts))
    assert answer == {"ok": False, "error": "msg_too_long"}


# -- metadata ----------------------------------------------------------------------------------


async def test_metadata_is_kept_as_sent(slack: Slack, client: AsyncWebClient) -> None:
    metadata = {"event_type": "incident", "event_payload": {"id": 7, "open": True}}
    posted = await client.chat_postMessage(channel=CHANNEL, text="x", metadata=metadata)
    assert posted["message"]["metadata"] == metadata
    assert slack.emulator.channel_messages(CHANNEL)[0].metadata == metadata


@pytest.mark.parametrize(
    "metadata",
    [
        {"event_payload": {"id": 7}},
        {"event_type": "incident"},
        {"event_type": "", "event_payload": {}},
        {"event_type": 7, "event_payload": {}},
        {"event_type": "incident", "event_payload": "id=7"},
        ["incident"],
        "{not json",
    ],
)
@pytest.mark.parametrize("method", ["chat.postMessage", "chat.update"])
async def test_malformed_metadata_is_invalid_metadata_format(
    client: AsyncWebClient, metadata: Any, method: str
) -> None:
    ts = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
    args: dict[str, Any] = {"channel": CHANNEL, "text": "x", "metadata": metadata}
    if method == "chat.update":
        args["ts"] = ts
    answer = await refusal(client.api_call(method, json=args))
    assert answer == {"ok": False, "error": "invalid_metadata_format"}


# -- threads -----------------------------------------------------------------------------------


async def test_a_thread_ts_naming_no_message_is_answered_ok_and_shown_nowhere(
    slack: Slack, client: AsyncWebClient
) -> None:
    """As people who sent one report (see Workspace.post): no error, and no one sees it."""
    root = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
    posted = await client.chat_postMessage(channel=CHANNEL, text="lost", thread_ts="1.000001")
    assert posted["ok"] and posted["ts"]
    history = await client.conversations_history(channel=CHANNEL)
    assert [m["text"] for m in history["messages"]] == ["root"]
    thread = await client.conversations_replies(channel=CHANNEL, ts=root)
    assert [m["text"] for m in thread["messages"]] == ["root"]
    assert [m.text for m in slack.emulator.unseen()] == ["lost"]


async def test_a_replys_ts_joins_its_thread(slack: Slack, client: AsyncWebClient) -> None:
    root = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
    reply = (await client.chat_postMessage(channel=CHANNEL, text="a", thread_ts=root))["ts"]
    posted = await client.chat_postMessage(channel=CHANNEL, text="b", thread_ts=reply)
    assert posted["message"]["thread_ts"] == root
    assert [m.text for m in slack.emulator.thread(CHANNEL, root)] == ["root", "a", "b"]


# -- who may be written to -----------------------------------------------------------------


async def test_an_ephemeral_goes_only_to_a_member_of_the_channel(
    slack: Slack, client: AsyncWebClient
) -> None:
    with slack.emulator.workspace() as ws:
        ws.set_members(CHANNEL, ["U0ALICE"])
    try:
        assert (await client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text="a"))["ok"]
        for user in ("U0BOB", "U0NOBODY"):  # not in the channel; not in the workspace at all
            answer = await refusal(client.chat_postEphemeral(channel=CHANNEL, user=user, text="b"))
            assert answer == {"ok": False, "error": "user_not_in_channel"}
    finally:
        with slack.emulator.workspace() as ws:
            ws.set_members(CHANNEL, None)  # reset() keeps channels: leave the default behind
    assert [e.user for e in slack.emulator.ephemerals(CHANNEL)] == ["U0ALICE"]


async def test_an_app_edits_only_its_own_messages(slack: Slack, client: AsyncWebClient) -> None:
    ts = (await client.chat_postMessage(channel=CHANNEL, text="mine"))["ts"]
    with slack.emulator.workspace() as ws:
        ws.find(CHANNEL, ts).user = "U0ALICE"  # as if Alice had written it
    answer = await refusal(client.chat_update(channel=CHANNEL, ts=ts, text="edited"))
    assert answer == {"ok": False, "error": "cant_update_message"}


# -- reads -------------------------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["oldest", "latest"])
async def test_a_bad_history_bound_is_invalid_ts(client: AsyncWebClient, bound: str) -> None:
    answer = await refusal(client.conversations_history(channel=CHANNEL, **{bound: "soon"}))
    assert answer == {"ok": False, "error": f"invalid_ts_{bound}"}


# -- views -------------------------------------------------------------------------------------


async def test_a_stale_hash_is_hash_conflict(client: AsyncWebClient) -> None:
    opened = (await client.views_open(trigger_id="1.2.abc", view=modal()))["view"]
    await client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Again"))
    stale = client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Late"))
    assert (await refusal(stale))["error"] == "hash_conflict"


async def test_a_modal_stack_holds_three_views(slack: Slack, client: AsyncWebClient) -> None:
    def trigger() -> str:
        with slack.emulator.workspace() as ws:
            return ws.ui.issue_trigger("U0ALICE")

    await client.views_open(trigger_id=trigger(), view=modal())
    for title in ("Second", "Third"):
        await client.views_push(trigger_id=trigger(), view=modal(title))
    answer = await refusal(client.views_push(trigger_id=trigger(), view=modal("Fourth")))
    assert answer == {"ok": False, "error": "push_limit_reached"}


# -- every refusal, in Slack's shape ---------------------------------------------------------

# An entry of `response_metadata.messages` that names where Slack found the fault.
POINTED = re.compile(r"^\[ERROR\] .+ \[json-pointer:/\S*\]$")
SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "*Status*"}}
CHART = {
    "type": "data_visualization",
    "title": "Queue trend",
    "chart": {"type": "pie", "segments": [{"label": "linux.2xlarge", "value": 12}]},
}
INPUT = {
    "type": "input",
    "label": {"type": "plain_text", "text": "N"},
    "element": {"type": "plain_text_input", "action_id": "n"},
}


def blocks_refused(*messages: str) -> dict[str, Any]:
    """invalid_blocks as Slack answers it: each message bare in `errors`, and with "[ERROR] " in
    `response_metadata.messages` (python-slack-sdk#1782 and #1797, bolt-python#1016)."""
    return {
        "ok": False,
        "error": "invalid_blocks",
        "errors": [m.removeprefix("[ERROR] ") for m in messages],
        "response_metadata": {"messages": list(messages)},
    }


def arguments_refused(*messages: str) -> dict[str, Any]:
    return {
        "ok": False,
        "error": "invalid_arguments",
        "response_metadata": {"messages": [*messages]},
    }


def post(*blocks: dict[str, Any]) -> Call:
    return lambda c: c.chat_postMessage(channel=CHANNEL, text="status", blocks=list(blocks))


def nothing(emulator: SlackEmulator) -> None:
    pass


def without_charts(emulator: SlackEmulator) -> None:
    emulator.chart_blocks = False


def without_chat_write(emulator: SlackEmulator) -> None:
    emulator.scopes = ALL_SCOPES - {"chat:write"}


def outside_a_channel(emulator: SlackEmulator) -> None:
    emulator.add_channel("C0NOTMEMBER", member=False)


def wrong_token(c: AsyncWebClient) -> Awaitable[Any]:
    return AsyncWebClient(token="xoxb-revoked", base_url=c.base_url).auth_test()


REFUSALS = [
    # A section's text over 3000 characters: the text object first, then its string (a
    # chat.postMessage answer quoted whole at brainxx.org/blog/fixing-slack-api-error-message).
    pytest.param(
        nothing,
        post(SECTION, {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}),
        blocks_refused(
            "[ERROR] failed to match all allowed schemas [json-pointer:/blocks/1/text]",
            "[ERROR] must be less than 3001 characters [json-pointer:/blocks/1/text/text]",
        ),
        id="section text too long",
    ),
    # More than 50 blocks, at the array (symfony's Notifier SlackTransportTest, the answer of
    # testSendWithErrorsIncluded).
    pytest.param(
        nothing,
        post(*[{"type": "divider"}] * 51),
        blocks_refused("[ERROR] no more than 50 items allowed [json-pointer:/blocks]"),
        id="too many blocks",
    ),
    # A type Slack does not know, at its `type` (node-slack-sdk's WebClient tests).
    pytest.param(
        nothing,
        post(SECTION, {"type": "sections", "text": SECTION["text"]}),
        blocks_refused("[ERROR] unsupported type: sections [json-pointer:/blocks/1/type]"),
        id="unknown block type",
    ),
    # A button without its text, at the button (the wording of a missing field, at the object
    # that lacks it: raycharius/slack-block-builder#120 quotes "missing required field: source
    # [json-pointer:/blocks/0]").
    pytest.param(
        nothing,
        post(SECTION, {"type": "actions", "elements": [{"type": "button", "action_id": "go"}]}),
        blocks_refused("[ERROR] missing required field: text [json-pointer:/blocks/1/elements/0]"),
        id="button without text",
    ),
    # A button's label over 75 characters: its text object, then the string, as the section's.
    pytest.param(
        nothing,
        post(
            SECTION,
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "go",
                        "text": {"type": "plain_text", "text": "Go"},
                    },
                    {
                        "type": "button",
                        "action_id": "stop",
                        "text": {"type": "plain_text", "text": "s" * 76},
                    },
                ],
            },
        ),
        blocks_refused(
            "[ERROR] failed to match all allowed schemas [json-pointer:/blocks/1/elements/1/text]",
            "[ERROR] must be less than 76 characters [json-pointer:/blocks/1/elements/1/text/text]",
        ),
        id="button label too long",
    ),
    # A chart where the workspace does not take the block: refused as any type it does not know.
    pytest.param(
        without_charts,
        post(SECTION, CHART),
        blocks_refused(
            "[ERROR] unsupported type: data_visualization [json-pointer:/blocks/1/type]"
        ),
        id="chart block where charts are off",
    ),
    # A view refused: the view first (it matches none of its schemas), then each fault at its
    # field (a views.open answer quoted by an app's notes: "[ERROR] failed to match all allowed
    # schemas [json-pointer:/view]", "[ERROR] must be less than 3001 characters
    # [json-pointer:/view/private_metadata]"). No `errors` beside them.
    pytest.param(
        nothing,
        lambda c: c.views_open(trigger_id="1.2.abc", view=modal(private_metadata="m" * 3001)),
        arguments_refused(
            "[ERROR] failed to match all allowed schemas [json-pointer:/view]",
            "[ERROR] must be less than 3001 characters [json-pointer:/view/private_metadata]",
        ),
        id="view private_metadata too long",
    ),
    pytest.param(
        nothing,
        lambda c: c.views_open(trigger_id="1.2.abc", view=modal("A title far longer than 24")),
        arguments_refused(
            "[ERROR] failed to match all allowed schemas [json-pointer:/view]",
            "[ERROR] failed to match all allowed schemas [json-pointer:/view/title]",
            "[ERROR] must be less than 25 characters [json-pointer:/view/title/text]",
        ),
        id="view title too long",
    ),
    # An input in a modal without `submit` (node-slack-sdk#875 quotes the message).
    pytest.param(
        nothing,
        lambda c: c.views_open(trigger_id="1.2.abc", view={**modal(), "blocks": [INPUT]}),
        arguments_refused(
            "[ERROR] must define `submit` to use `input` block [json-pointer:/view/blocks/0/input]"
        ),
        id="input without submit",
    ),
    # A required argument left out: named, with no pointer (vluzrmos/laravel-slack-api#38,
    # brekkylab/backlot#84 measured it live).
    pytest.param(
        nothing,
        lambda c: c.api_call("chat.postMessage", json={"text": "x"}),
        arguments_refused("[ERROR] missing required field: channel"),
        id="missing argument",
    ),
    # The plain refusals are `ok` and `error` alone (chat.postMessage's and
    # conversations.history's error tables at docs.slack.dev/reference/methods; the answer
    # quoted in slack-api-client's docs: {"ok": false, "error": "not_in_channel"}).
    pytest.param(
        nothing,
        lambda c: c.chat_postMessage(channel=CHANNEL, text="x" * (MAX_TEXT_CHARS + 1)),
        {"ok": False, "error": "msg_too_long"},
        id="msg_too_long",
    ),
    pytest.param(
        outside_a_channel,
        lambda c: c.conversations_history(channel="C0NOTMEMBER"),
        {"ok": False, "error": "not_in_channel"},
        id="not_in_channel",
    ),
    pytest.param(
        nothing,
        lambda c: c.chat_postMessage(channel="C0NOWHERE", text="x"),
        {"ok": False, "error": "channel_not_found"},
        id="channel_not_found",
    ),
    pytest.param(
        nothing,
        wrong_token,
        {"ok": False, "error": "invalid_auth"},
        id="invalid_auth",
    ),
    # The scope the method needs and the token's (apache/superset#15904 quotes {'ok': False,
    # 'error': 'missing_scope', 'needed': 'chat:write:bot', 'provided': 'incoming-webhook,...'}).
    pytest.param(
        without_chat_write,
        lambda c: c.chat_postMessage(channel=CHANNEL, text="x"),
        {
            "ok": False,
            "error": "missing_scope",
            "needed": "chat:write",
            "provided": ",".join(sorted(ALL_SCOPES - {"chat:write"})),
        },
        id="missing_scope",
    ),
]


@pytest.mark.parametrize(("setup", "call", "answer"), REFUSALS)
async def test_each_refusal_is_answered_in_slacks_shape(
    slack: Slack, client: AsyncWebClient, setup: Setup, call: Call, answer: dict[str, Any]
) -> None:
    setup(slack.emulator)
    assert await refusal(call(client)) == answer
    for message in answer.get("response_metadata", {}).get("messages", []):
        assert "json-pointer" not in message or POINTED.match(message), message


async def test_a_rate_limit_is_a_429_saying_when_to_come_back(
    slack: Slack, client: AsyncWebClient
) -> None:
    """Slack's rate-limit page (docs.slack.dev/apis/web-api/rate-limits): "HTTP 429 Too Many
    Requests" with a Retry-After header in seconds; the body's error is `ratelimited`
    (python-slack-sdk#805 reads it so)."""
    slack.emulator.fail_next("chat.postMessage", status=429, retry_after=7)
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(channel=CHANNEL, text="x")
    response = raised.value.response
    headers = {name.lower(): value for name, value in response.headers.items()}
    assert (response.status_code, headers["retry-after"]) == (429, "7")
    assert response.data == {"ok": False, "error": "ratelimited"}


async def test_a_queued_refusal_is_in_slacks_shape_too(
    slack: Slack, client: AsyncWebClient
) -> None:
    """What a test queues answers as the emulator's own refusals do: a refused block is named,
    a missing scope says which."""
    pointed = "[ERROR] unsupported type: data_visualization [json-pointer:/blocks/1/type]"
    slack.emulator.fail_next(
        "chat.postMessage", status=200, error="invalid_blocks", messages=[pointed]
    )
    slack.emulator.fail_next("conversations.history", status=200, error="missing_scope")

    assert await refusal(post(SECTION, CHART)(client)) == blocks_refused(pointed)
    assert await refusal(client.conversations_history(channel=CHANNEL)) == {
        "ok": False,
        "error": "missing_scope",
        "needed": "channels:history",
        "provided": ",".join(sorted(ALL_SCOPES - {"channels:history"})),
    }
    [refused] = [c for c in slack.emulator.calls("chat.postMessage") if not c.ok]
    assert refused.refusal == blocks_refused(pointed), "what the caller was told is kept"


@pytest.mark.parametrize("error", ["invalid_blocks", "invalid_arguments"])
def test_a_queued_refusal_slack_always_explains_needs_its_messages(
    slack: Slack, error: str
) -> None:
    with pytest.raises(ValueError, match="messages"):
        slack.emulator.fail_next("chat.postMessage", status=200, error=error)


async def test_a_queued_refusal_goes_to_the_call_it_is_meant_for(
    slack: Slack, client: AsyncWebClient
) -> None:
    """`when` picks the call: here the next message that holds a chart; the others go through."""
    pointed = "[ERROR] unsupported type: data_visualization [json-pointer:/blocks/1/type]"
    slack.emulator.fail_next(
        "chat.postMessage",
        status=200,
        error="invalid_blocks",
        messages=[pointed],
        when=lambda params: CHART in params.get("blocks", []),
    )
    assert (await post(SECTION)(client))["ok"]
    assert await refusal(post(SECTION, CHART)(client)) == blocks_refused(pointed)
    assert (await post(SECTION, CHART)(client))["ok"], "taken once"
