"""The emulator's tests call it with slack_sdk's own client, as the bot does."""

from __future__ import annotations

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.support.slack import BOT_TOKEN, Slack


@pytest.fixture
def client(slack: Slack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)
