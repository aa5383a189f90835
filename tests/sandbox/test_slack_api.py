"""What the Slack emulator lets through that no test of the bot reaches: Slack's own table of its
methods as shipped, each served method taken as slack_sdk sends it, and the few behaviours the
bot never asks for (a lost `thread_ts`, a reply's ts as a thread, exclusive history windows,
broadcast replies, pushed views and views found by `external_id`, form bodies, the larger
Tier 3 pages, charts at each limit, the control endpoints). What it refuses is
test_slack_refusals.py; the rest is tested through the bot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bot.checks import slack as slack_check
from sandbox.slack_api import SlackEmulator
from sandbox.slack_limits import validate_blocks
from sandbox.slack_methods import ALL_SCOPES, METHODS, WEB_API
from tests.support.charts import line
from tests.support.slack import BOT_TOKEN, CHANNEL, Slack
from tests.support.slack_calls import HOME, MODAL, arguments_for, send

REPO = Path(__file__).parents[2]
SHIPPED = REPO / "sandbox" / "web_api_methods.json"
FIXTURE = REPO / ".." / "shared" / "fixtures" / "slack" / "web-api-methods.json"
SERVED = sorted(METHODS)


def test_slacks_method_table_ships_with_the_emulator() -> None:
    if not FIXTURE.exists():
        pytest.skip("no ../shared beside this clone (a user's checkout)")
    assert json.loads(SHIPPED.read_text()) == json.loads(FIXTURE.read_text())


def test_the_served_methods_are_these_and_in_slacks_table() -> None:
    assert SERVED == [
        "auth.test", "chat.getPermalink", "chat.postEphemeral", "chat.postMessage", "chat.update",
        "conversations.history", "conversations.info", "conversations.replies",
        "files.completeUploadExternal", "files.getUploadURLExternal", "files.info",
        "usergroups.users.list", "users.info", "views.open", "views.publish", "views.push",
        "views.update",
    ]  # fmt: skip
    assert {*SERVED, "apps.connections.open"} <= WEB_API.keys()


@pytest.mark.parametrize("method", SERVED)
async def test_each_method_sent_as_slack_sdk_sends_it_succeeds(
    client: AsyncWebClient, method: str
) -> None:
    args = await arguments_for(method, client)
    assert set(WEB_API[method]["required"]) <= args.keys()
    named = getattr(client, method.replace(".", "_"))  # slack_sdk's own encoding
    assert (await named(**args))["ok"]
    args = await arguments_for(method, client)
    answer = await send(client, method, args, WEB_API[method]["slack_sdk_sends"])
    assert answer.body["ok"], answer


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


async def test_a_messages_metadata_is_read_back_only_when_asked_for(client: AsyncWebClient) -> None:
    """Slack's `include_all_metadata` (conversations.history, conversations.replies): "Return all
    metadata associated with this message", default false."""
    metadata = {"event_type": "queuepilot_message", "event_payload": {"incident": "7"}}
    root = (await client.chat_postMessage(channel=CHANNEL, text="root", metadata=metadata))["ts"]
    await client.chat_postMessage(channel=CHANNEL, text="a", thread_ts=root, metadata=metadata)
    plain = await client.conversations_history(channel=CHANNEL)
    assert "metadata" not in plain["messages"][0]
    asked = await client.conversations_history(channel=CHANNEL, include_all_metadata=True)
    assert asked["messages"][0]["metadata"] == metadata
    thread = await client.conversations_replies(channel=CHANNEL, ts=root)
    assert all("metadata" not in m for m in thread["messages"])
    thread = await client.conversations_replies(channel=CHANNEL, ts=root, include_all_metadata=True)
    assert [m["metadata"] for m in thread["messages"]] == [metadata, metadata]


async def test_a_replys_ts_joins_its_thread_and_a_broadcast_shows_in_the_channel(
    slack: Slack, client: AsyncWebClient
) -> None:
    root = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
    reply = (await client.chat_postMessage(channel=CHANNEL, text="a", thread_ts=root))["ts"]
    posted = await client.chat_postMessage(channel=CHANNEL, text="b", thread_ts=reply)
    await client.chat_postMessage(channel=CHANNEL, text="c", thread_ts=root, reply_broadcast=True)

    assert posted["message"]["thread_ts"] == root
    assert [m.text for m in slack.emulator.thread(CHANNEL, root)] == ["root", "a", "b", "c"]
    history = (await client.conversations_history(channel=CHANNEL))["messages"]
    assert [(m["text"], m.get("subtype")) for m in history] == [
        ("c", "thread_broadcast"),
        ("root", None),
    ]
    assert history[1]["reply_count"] == 3, "the local page's thread link counts them"


async def test_replies_keep_the_parent_and_only_replies_inside_the_window(
    client: AsyncWebClient,
) -> None:
    """conversations.replies gives the parent whatever the window (a lookup must not take it for
    a match); `inclusive` keeps a reply at exactly `oldest` or `latest`."""
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
    assert await replies(oldest=after) == [root]


async def test_a_view_is_updated_by_its_external_id_and_pushed_on_its_root(
    slack: Slack, client: AsyncWebClient
) -> None:
    opened = await client.views_open(trigger_id="1.2.abc", view={**MODAL, "external_id": "e1"})
    titled = {**MODAL, "title": {"type": "plain_text", "text": "By external id"}}
    await client.views_update(external_id="e1", view=titled)
    pushed = (await client.views_push(trigger_id="1.2.def", view=MODAL))["view"]

    assert pushed["root_view_id"] == opened["view"]["id"]
    latest = {v["id"]: v["title"]["text"] for v in slack.emulator.views()}
    assert latest == {opened["view"]["id"]: "By external id", pushed["id"]: "Scale"}


def test_a_form_body_with_json_blocks_and_its_token_is_taken(slack: Slack) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "f"}}]
    form = {"token": BOT_TOKEN, "channel": CHANNEL, "text": "hi", "blocks": json.dumps(blocks)}
    body = httpx.post(f"{slack.api_url}chat.postMessage", data=form).json()
    assert body["ok"] and body["channel"] == CHANNEL
    assert slack.emulator.channel_messages(CHANNEL)[0].blocks == blocks
    [call] = slack.emulator.calls("chat.postMessage")
    assert call.params["token"] == "[redacted]"


async def test_tier_3_pages_are_100_by_default_999_at_most_and_replies_1000(
    slack: Slack, client: AsyncWebClient
) -> None:
    with slack.emulator.workspace() as ws:  # put straight in: posting them is not what is tested
        posted = [ws.post(CHANNEL, text=str(i), blocks=[]).ts for i in range(1001)]
        for i in range(1000):
            ws.post(CHANNEL, text=str(i), blocks=[], thread_ts=posted[0])

    assert len((await client.conversations_history(channel=CHANNEL))["messages"]) == 100
    most = await client.conversations_history(channel=CHANNEL, limit=5000)
    assert len(most["messages"]) == 999 and most["has_more"] is True
    thread = await client.conversations_replies(channel=CHANNEL, ts=posted[0])
    assert len(thread["messages"]) == 1000 and thread["has_more"] is True


TWENTY = [f"{i:0>20}" for i in range(20)]  # 20 categories of 20 characters
WIDEST = line(*((f"runner type {i:>8}", [float(i)] * 20) for i in range(6)), categories=TWENTY)
WIDEST.update(title="t" * 50, block_id="b" * 255)
WIDEST["chart"]["axis_config"].update(x_label="x" * 50, y_label="y" * 50)
SIX_SLICES = {
    "type": "data_visualization",
    "title": "Queued by runner type",
    "chart": {"type": "pie", "segments": [{"label": f"{i:0>20}", "value": 0.01} for i in range(6)]},
}


@pytest.mark.parametrize(
    "block",
    [WIDEST, {**WIDEST, "chart": {**WIDEST["chart"], "type": "bar"}}, SIX_SLICES],
    ids=["line", "bar", "pie"],
)
async def test_a_chart_at_each_limit_slack_states_is_posted_as_sent(
    client: AsyncWebClient, block: dict[str, Any]
) -> None:
    posted = await client.chat_postMessage(channel=CHANNEL, text="trend", blocks=[block])
    assert posted["message"]["blocks"] == [block]


@st.composite
def series_charts(draw: st.DrawFn) -> dict[str, Any]:
    label = st.text(min_size=1, max_size=20)
    categories = draw(st.lists(label, min_size=1, max_size=20, unique=True))
    names = draw(st.lists(label, min_size=1, max_size=6, unique=True))
    number = st.integers(-(10**9), 10**9) | st.floats(allow_nan=False, allow_infinity=False)
    series = []
    for name in names:
        points = [{"label": c, "value": draw(number)} for c in categories]
        series.append({"name": name, "data": draw(st.permutations(points))})
    kind = draw(st.sampled_from(["bar", "area", "line"]))
    chart = {"type": kind, "series": series, "axis_config": {"categories": categories}}
    title = draw(st.text(min_size=1, max_size=50))
    return {"type": "data_visualization", "title": title, "chart": chart}


@settings(max_examples=200, deadline=None)
@given(block=series_charts())
def test_every_chart_within_the_rules_is_taken(block: dict[str, Any]) -> None:
    assert validate_blocks([block]) == []


async def test_publishing_a_home_needs_no_scope(slack: Slack, client: AsyncWebClient) -> None:
    slack.emulator.scopes = frozenset(slack_check.DEFAULT)
    assert (await client.views_publish(user_id="U0ALICE", view=HOME))["ok"]


def test_reset_takes_the_workspace_back_to_how_it_was_made(slack: Slack) -> None:
    slack.emulator.chart_blocks, slack.emulator.scopes = False, frozenset({"commands"})
    slack.emulator.reset()
    assert slack.emulator.chart_blocks and slack.emulator.scopes == ALL_SCOPES
    refusing = SlackEmulator(token=BOT_TOKEN, chart_blocks=False, scopes={"commands"})
    refusing.reset()
    assert not refusing.chart_blocks and refusing.scopes == {"commands"}
    with pytest.raises(ValueError, match="history_tier"):
        SlackEmulator(history_tier=2)  # Slack serves history at Tier 1 or 3
    with pytest.raises(KeyError):
        slack.emulator.channel_messages("C0TYPO")


def test_the_control_endpoints_show_the_workspace_and_reset_it(slack: Slack) -> None:
    """`make demo` prints /_emulator/state's address: the workspace, as JSON."""
    with httpx.Client(base_url=slack.server.url) as http:
        assert http.get("/_emulator/healthz").json() == {"ok": True}
        headers = {"Authorization": f"Bearer {BOT_TOKEN}"}
        ts = http.post(
            "/api/chat.postMessage", json={"channel": CHANNEL, "text": "r"}, headers=headers
        ).json()["ts"]
        reply = {"channel": CHANNEL, "text": "child", "thread_ts": ts}
        http.post("/api/chat.postMessage", json=reply, headers=headers)

        [message] = http.get("/_emulator/state").json()["channels"][CHANNEL]["messages"]
        assert message["ts"] == ts and [r["text"] for r in message["replies"]] == ["child"]

        assert http.post("/_emulator/reset").json() == {"ok": True}
        assert http.get("/_emulator/state").json()["channels"][CHANNEL]["messages"] == []
    assert slack.emulator.calls() == []
