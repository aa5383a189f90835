"""The emulator refuses what Slack refuses, by Slack's own table of its Web API methods.

`sandbox/web_api_methods.json` says, for each method, whether Slack reads a JSON body
(`json`), how slack_sdk sends it (`slack_sdk_sends`) and which arguments Slack will not run
without (`required`). Every method the emulator serves is walked through it over real HTTP:
sent as slack_sdk sends it, it is not refused for missing arguments; as a JSON body when Slack
reads none, and with any required argument left out, it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.slack_methods import METHODS, WEB_API
from tests.support.slack import BOT_TOKEN, CHANNEL, Slack

REPO = Path(__file__).parents[2]
SHIPPED = REPO / "sandbox" / "web_api_methods.json"
FIXTURE = REPO / ".." / "shared" / "fixtures" / "slack" / "web-api-methods.json"
# Served outside METHODS: Socket Mode's connection (see slack_socket).
SOCKET_METHODS = {"apps.connections.open"}
MODAL = {
    "type": "modal",
    "title": {"type": "plain_text", "text": "Scale"},
    "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Scale up?"}}],
}
HOME = {"type": "home", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Hi"}}]}


async def arguments_for(method: str, client: AsyncWebClient) -> dict[str, Any]:
    """Arguments that make `method` succeed on a fresh workspace (posting what it needs)."""
    if method in ("chat.update", "chat.getPermalink", "conversations.replies"):
        ts = (await client.chat_postMessage(channel=CHANNEL, text="root"))["ts"]
        key = "message_ts" if method == "chat.getPermalink" else "ts"
        return {"channel": CHANNEL, key: ts, **({"text": "edited"} if key == "ts" else {})}
    if method == "views.update":
        opened = await client.views_open(trigger_id="1.2.abc", view=MODAL)
        return {"view_id": opened["view"]["id"], "view": MODAL}
    if method in ("files.completeUploadExternal", "files.info"):
        reserved = await client.files_getUploadURLExternal(filename="q.log", length=3)
        async with httpx.AsyncClient() as http:
            (await http.post(reserved["upload_url"], content=b"abc")).raise_for_status()
        if method == "files.info":
            return {"file": reserved["file_id"]}
        return {"files": [{"id": reserved["file_id"], "title": "q"}], "channel_id": CHANNEL}
    return {
        "auth.test": {},
        "chat.postMessage": {"channel": CHANNEL, "text": "hello"},
        "chat.postEphemeral": {"channel": CHANNEL, "user": "U0ALICE", "text": "psst"},
        "conversations.history": {"channel": CHANNEL},
        "conversations.info": {"channel": CHANNEL},
        "views.open": {"trigger_id": "1.2.abc", "view": MODAL},
        "views.push": {"trigger_id": "1.2.def", "view": MODAL},
        "views.publish": {"user_id": "U0ALICE", "view": HOME},
        "users.info": {"user": "U0ALICE"},
        "usergroups.users.list": {"usergroup": "S0ONCALL"},
        "files.getUploadURLExternal": {"filename": "q.log", "length": 3},
    }[method]


async def send(
    client: AsyncWebClient, method: str, args: dict[str, Any], encoding: str
) -> dict[str, Any]:
    """One call with `args` encoded as a query string, a form body or a JSON body."""
    flat = {k: json.dumps(v) if isinstance(v, dict | list) else str(v) for k, v in args.items()}
    try:
        if encoding == "query":
            response = await client.api_call(method, http_verb="GET", params=flat)
        elif encoding == "form":
            response = await client.api_call(method, data=flat)
        else:
            response = await client.api_call(method, json=args)
    except SlackApiError as exc:
        return dict(exc.response.data)
    return dict(response.data)


def missing_fields(answer: dict[str, Any]) -> list[str]:
    """The fields an invalid_arguments answer says are missing."""
    if answer.get("error") != "invalid_arguments":
        return []
    messages = answer.get("response_metadata", {}).get("messages", [])
    prefix = "[ERROR] missing required field: "
    return [m.removeprefix(prefix) for m in messages if m.startswith(prefix)]


SERVED = sorted(METHODS)
NOT_JSON = [m for m in SERVED if not WEB_API[m]["json"] and WEB_API[m]["required"]]
REQUIRED = [(m, name) for m in SERVED for name in WEB_API[m]["required"]]


def test_the_table_ships_with_the_emulator() -> None:
    if not FIXTURE.exists():
        pytest.skip("no ../shared beside this clone (a user's checkout)")
    assert json.loads(SHIPPED.read_text()) == json.loads(FIXTURE.read_text())


def test_the_served_methods_are_these_and_in_slacks_table() -> None:
    assert SERVED == [
        "auth.test",
        "chat.getPermalink",
        "chat.postEphemeral",
        "chat.postMessage",
        "chat.update",
        "conversations.history",
        "conversations.info",
        "conversations.replies",
        "files.completeUploadExternal",
        "files.getUploadURLExternal",
        "files.info",
        "usergroups.users.list",
        "users.info",
        "views.open",
        "views.publish",
        "views.push",
        "views.update",
    ]
    assert set(SERVED) | SOCKET_METHODS <= WEB_API.keys()


@pytest.mark.parametrize("method", SERVED)
async def test_sent_as_slack_sdk_sends_it_the_call_succeeds(
    client: AsyncWebClient, method: str
) -> None:
    args = await arguments_for(method, client)
    assert set(WEB_API[method]["required"]) <= args.keys()
    named = getattr(client, method.replace(".", "_"))  # slack_sdk's own encoding
    assert (await named(**args))["ok"]
    args = await arguments_for(method, client)
    answer = await send(client, method, args, WEB_API[method]["slack_sdk_sends"])
    assert answer["ok"], answer


@pytest.mark.parametrize("method", NOT_JSON)
async def test_a_json_body_reaches_a_non_json_method_as_no_arguments(
    client: AsyncWebClient, method: str
) -> None:
    answer = await send(client, method, await arguments_for(method, client), "json")
    assert set(missing_fields(answer)) == set(WEB_API[method]["required"]), answer


@pytest.mark.parametrize(("method", "field"), REQUIRED)
async def test_each_required_argument_left_out_is_invalid_arguments(
    client: AsyncWebClient, method: str, field: str
) -> None:
    args = await arguments_for(method, client)
    del args[field]
    answer = await send(client, method, args, WEB_API[method]["slack_sdk_sends"])
    assert answer["error"] == "invalid_arguments"
    assert missing_fields(answer) == [field]
    assert answer["response_metadata"] == {"messages": [f"[ERROR] missing required field: {field}"]}


async def test_every_other_method_in_the_table_is_unknown(slack: Slack) -> None:
    unserved = sorted(WEB_API.keys() - METHODS.keys() - SOCKET_METHODS)
    headers = {"Authorization": f"Bearer {BOT_TOKEN}"}
    async with httpx.AsyncClient(base_url=slack.api_url, headers=headers) as http:
        answers = {m: (await http.post(m, data={"channel": CHANNEL})).json() for m in unserved}
    assert {m: a for m, a in answers.items() if a != {"ok": False, "error": "unknown_method"}} == {}
    assert len(answers) == 327  # the table's 345, less the 17 above and Socket Mode's one


# -- where Slack reads arguments and tokens ------------------------------------------------


def test_query_string_and_form_body_both_count(slack: Slack) -> None:
    headers = {"Authorization": f"Bearer {BOT_TOKEN}"}
    answer = httpx.post(
        f"{slack.api_url}conversations.replies?channel={CHANNEL}",
        data={"ts": "1.000001"},
        headers=headers,
    ).json()
    assert answer == {"ok": False, "error": "thread_not_found"}  # both arguments arrived


def test_an_empty_required_argument_is_resolved_not_missing(slack: Slack) -> None:
    # Slack: absent is invalid_arguments, empty is the lookup's own error (backlot#84).
    headers = {"Authorization": f"Bearer {BOT_TOKEN}"}
    answer = httpx.get(f"{slack.api_url}conversations.history?channel=", headers=headers)
    assert answer.json() == {"ok": False, "error": "channel_not_found"}


@pytest.mark.parametrize(
    ("request_args", "error"),
    [
        # A token in the query string is refused (apps created after 2021-02-24)...
        ({"params": {"token": BOT_TOKEN}}, "invalid_auth"),
        # ...a JSON body's is not read: JSON calls carry it in the Authorization header...
        ({"json": {"token": BOT_TOKEN}}, "not_authed"),
        # ...and a form body's is (the emulator's other tests post forms with one).
        ({"data": {"token": BOT_TOKEN}}, None),
    ],
)
def test_where_the_token_may_be(
    slack: Slack, request_args: dict[str, Any], error: str | None
) -> None:
    answer = httpx.post(f"{slack.api_url}auth.test", **request_args).json()
    assert answer.get("error") == error


@pytest.mark.parametrize(
    ("content", "content_type", "error"),
    [
        (b"[1, 2]", "application/json", "json_not_object"),
        (b"{not json", "application/json", "invalid_json"),
        (b"channel=C0QUEUE", None, "missing_post_type"),
        (b"<channel/>", "application/xml", "invalid_post_type"),
    ],
)
def test_bodies_slack_cannot_read(
    slack: Slack, content: bytes, content_type: str | None, error: str
) -> None:
    headers = {"Authorization": f"Bearer {BOT_TOKEN}"}
    if content_type:
        headers["Content-Type"] = content_type
    answer = httpx.post(f"{slack.api_url}chat.postMessage", content=content, headers=headers)
    assert answer.json()["error"] == error
