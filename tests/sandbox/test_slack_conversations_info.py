"""The emulator's `conversations.info`, through slack_sdk's real client: what the bot's
start-up check reads (is the app in the channel?), and Slack's refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator

TOKEN = "xoxb-queuepilot-test"


@pytest.fixture
async def client() -> AsyncIterator[tuple[SlackEmulator, AsyncWebClient]]:
    emulator = SlackEmulator(token=TOKEN, channels=("C0IN",))
    emulator.add_channel("C0OUT", member=False)
    emulator.add_channel("C0OLD")
    emulator.archive("C0OLD")
    with serve_in_thread(emulator.app) as running:
        yield emulator, AsyncWebClient(token=TOKEN, base_url=f"{running.url}/api/")


async def test_membership_and_archival_as_a_bot_sees_them(
    client: tuple[SlackEmulator, AsyncWebClient],
) -> None:
    emulator, slack = client
    seen = {}
    for channel in ("C0IN", "C0OUT", "C0OLD"):
        info = (await slack.conversations_info(channel=channel))["channel"]
        seen[channel] = (info["id"], info["is_member"], info["is_archived"])
    assert seen == {
        "C0IN": ("C0IN", True, False),
        "C0OUT": ("C0OUT", False, False),
        "C0OLD": ("C0OLD", True, True),
    }
    # slack_sdk sends it as a query string, as Slack's method table says it takes it.
    assert [c.method for c in emulator.calls("conversations.info")] == ["conversations.info"] * 3


@pytest.mark.parametrize(
    ("arguments", "error"),
    [({"channel": "C0NOWHERE"}, "channel_not_found"), ({}, "invalid_arguments")],
)
async def test_what_slack_refuses(
    client: tuple[SlackEmulator, AsyncWebClient], arguments: dict[str, str], error: str
) -> None:
    _, slack = client
    with pytest.raises(SlackApiError) as refused:
        await slack.api_call("conversations.info", http_verb="GET", params=arguments)
    assert refused.value.response["error"] == error
