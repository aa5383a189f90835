"""Calls to the Slack emulator's Web API the way a client makes them: any served method with
arguments that make it succeed on a fresh workspace, sent as a query string, a form body or a JSON
body (Slack reads each method's arguments from some of these only: `sandbox/web_api_methods.json`,
Slack's own table)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.support.refusals import Answer
from tests.support.slack import CHANNEL

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


async def send(client: AsyncWebClient, method: str, args: dict[str, Any], encoding: str) -> Answer:
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
        response = exc.response
    headers = {name.lower(): value for name, value in response.headers.items()}
    return Answer(response.status_code, dict(response.data), headers)
