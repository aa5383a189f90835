"""Slack's side of a test: the workspace's names and secrets, the emulator the bot talks to, and
requests (clicks, commands) signed and shaped as Slack delivers them to `/slack/events`."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import re
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from slack_sdk.errors import SlackApiError

from sandbox.serve import RunningServer
from sandbox.slack_api import SlackEmulator
from sandbox.slack_model import Message

if TYPE_CHECKING:
    from tests.support.running import RunningBot

BOT_TOKEN = "xoxb-queuepilot-test"
SIGNING_SECRET = "test-signing-secret"
CHANNEL = "C0QUEUE"
USER = "U0ALICE"
_TRIGGERS = itertools.count()


@dataclass
class Slack:
    """The emulator and where it listens."""

    emulator: SlackEmulator
    server: RunningServer

    @property
    def api_url(self) -> str:
        return f"{self.server.url}/api/"

    async def first_thread(self) -> Callable[[], list[Any]]:
        """The first incident's thread, once its root is in CHANNEL: read afresh at each call."""
        from tests.support.running import eventually

        roots = await eventually(lambda: self.emulator.channel_messages(CHANNEL), what="a root")
        return lambda: self.emulator.thread(CHANNEL, roots[0].ts)


async def refusal(call: Awaitable[Any]) -> dict[str, Any]:
    """Slack's answer to a call it refuses (slack_sdk raises it as SlackApiError)."""
    with pytest.raises(SlackApiError) as raised:
        await call
    return dict(raised.value.response.data)


def chatter(emulator: SlackEmulator, channel: str, count: int) -> None:
    """`count` messages of people after what `channel` shows, put straight into the emulator's
    state (a test's setup): a busy channel, where the bot's roots are far back."""
    with emulator.workspace() as ws:
        shown = ws.channel(channel)
        for n in range(count):
            message = Message(
                ts=ws.clock.next(),
                channel=channel,
                text=f"people talking {n}",
                blocks=[],
                thread_ts=None,
                user="U0CHATTY",
            )
            shown.by_ts[message.ts] = message
            shown.timeline.append(message)


def signed(body: str, *, secret: str = SIGNING_SECRET, at: float | None = None) -> dict[str, str]:
    timestamp = str(int(at if at is not None else time.time()))
    base = f"v0:{timestamp}:{body}".encode()
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }


def block_action(action: dict[str, Any], *, message_ts: str, ephemeral: bool = False) -> str:
    """A click in a message; in an `ephemeral` one (an answer), Slack says so and sends no
    `message` (nor does it here for others)."""
    payload = {
        "type": "block_actions",
        "user": {"id": USER, "username": "alice", "name": "alice", "team_id": "T0QUEUE"},
        "api_app_id": "A0QUEUE",
        "token": "legacy",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": CHANNEL,
            "is_ephemeral": ephemeral,
        },
        "trigger_id": "1.2.3",
        "team": {"id": "T0QUEUE", "domain": "example"},
        "channel": {"id": CHANNEL, "name": "ci-incidents"},
        "response_url": "https://hooks.slack.invalid/actions/1",
        "actions": [{**action, "block_id": "incident_actions", "action_ts": f"{time.time():.6f}"}],
    }
    return urllib.parse.urlencode({"payload": json.dumps(payload)})


def slash(text: str, *, channel: str = CHANNEL) -> str:
    return urllib.parse.urlencode(
        {
            "token": "legacy",
            "team_id": "T0QUEUE",
            "channel_id": channel,
            "user_id": USER,
            "user_name": "alice",
            "command": "/queue",
            "text": text,
            "response_url": "https://hooks.slack.invalid/commands/1",
            # Slack gives every invocation its own trigger_id: it is the command's identity.
            "trigger_id": f"{time.time_ns()}.{next(_TRIGGERS)}",
        }
    )


def button_value(root: Any, action_id: str) -> str:
    for block in root.blocks:
        for element in block.get("elements", []):
            if element.get("action_id") == action_id:
                return str(element["value"])
    raise AssertionError(f"no {action_id} on the root message")


async def post_event(http: httpx.AsyncClient, body: str, **kwargs: Any) -> httpx.Response:
    return await http.post("/slack/events", content=body, headers=signed(body, **kwargs))


async def click(running: RunningBot, root: Any, action_id: str) -> httpx.Response:
    """Press one of the root message's buttons, as Slack delivers the click."""
    action = {"type": "button", "action_id": action_id, "value": button_value(root, action_id)}
    return await post_event(running.http, block_action(action, message_ts=root.ts))


_UTC_TIME = re.compile(r"\b(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)? UTC\b")


def plain_times(message: Any) -> list[str]:
    """The UTC times `message`'s text and blocks say outside a `<!date^…>` token: every time a
    reader sees in Slack is one, shown in their own zone."""
    said = message.text + json.dumps(message.blocks or [], ensure_ascii=False)
    return _UTC_TIME.findall(re.sub(r"<[^<>]*>", "", said))


def shown(message: Any) -> str:
    """A message's text and blocks as one readable string, bold marks dropped."""
    return (message.text + json.dumps(message.blocks, ensure_ascii=False)).replace("*", "")


async def diagnosed(running: RunningBot, slack: Slack, root_ts: str) -> str:
    """Press the root's Run diagnostics and wait for the report in its thread."""
    from tests.support.running import eventually

    thread = slack.emulator.thread(CHANNEL, root_ts)
    assert (await click(running, thread[0], "incident_diagnose")).status_code == 200
    return await eventually(
        lambda: next(
            (shown(m) for m in slack.emulator.thread(CHANNEL, root_ts)[1:]
             if "Diagnostics" in m.text),
            None,
        ),
        what="the diagnostics",
        timeout=30,
    )  # fmt: skip


def thread_texts(slack: Slack, ts: str) -> list[str]:
    """The thread's replies (not the root) as their blocks' JSON, readable (no \\u escapes)."""
    replies = slack.emulator.thread(CHANNEL, ts)[1:]
    return [json.dumps(m.blocks, ensure_ascii=False) for m in replies]


def ephemeral_texts(slack: Slack) -> list[str]:
    return [m.text for m in slack.emulator.ephemerals(CHANNEL)]


# -- raw requests, for the parsers' property tests and the fuzzing of a running bot ---------------

BLOCK_ACTION: dict[str, Any] = {
    "type": "block_actions",
    "user": {"id": "U0ALICE", "username": "alice"},
    "team": {"id": "T0QUEUE"},
    "channel": {"id": "C0QUEUE"},
    "container": {"type": "message", "message_ts": "1.2", "channel_id": "C0QUEUE"},
    "message": {"ts": "1.2", "blocks": [{"type": "context", "block_id": "incident:1:u"}]},
    "trigger_id": "1.2.3",
    "response_url": "https://hooks.slack.invalid/1",
    "actions": [{"type": "button", "action_id": "incident_ack", "value": "1:u"}],
}
COMMAND = b"command=%2Fqueue&text=ack&user_id=U0ALICE&channel_id=C0QUEUE&team_id=T0QUEUE"
