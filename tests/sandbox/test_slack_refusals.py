"""What Slack refuses beyond missing arguments, and what it lets through, as the emulator answers.

Each case names Slack's answer; the sources are beside the rules (slack_limits, slack_state,
slack_methods).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.slack_limits import MAX_TEXT_CHARS
from tests.support.slack import CHANNEL, Slack, refusal

Call = Callable[[AsyncWebClient], Awaitable[Any]]


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


@pytest.mark.parametrize(
    ("view", "message"),
    [
        (modal("A title far longer than 24"), "title must be between 1 and 24 characters"),
        (
            {
                **modal(),
                "blocks": [
                    {
                        "type": "input",
                        "label": {"type": "plain_text", "text": "N"},
                        "element": {"type": "plain_text_input", "action_id": "n"},
                    }
                ],
            },
            "missing required field: submit",
        ),
        (modal(private_metadata="m" * 3001), "private_metadata cannot exceed 3000 characters"),
    ],
    ids=["long title", "input without submit", "long private_metadata"],
)
async def test_views_slack_would_not_show_are_invalid_arguments(
    client: AsyncWebClient, view: dict[str, Any], message: str
) -> None:
    answer = await refusal(client.views_open(trigger_id="1.2.abc", view=view))
    assert answer["error"] == "invalid_arguments"
    assert any(message in m for m in answer["response_metadata"]["messages"]), answer
