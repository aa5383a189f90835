"""The emulator's tests call it with slack_sdk's own client, as the bot does; the local page's are
driven over HTTP as the browser drives it, with an app stand-in behind it; Socket Mode's with a
websocket client, as an app connects."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.support.slack import BOT_TOKEN, Slack
from tests.support.slack_page import Page, served_page
from tests.support.slack_socket import SocketSlack, socket_slack


@pytest.fixture
def client(slack: Slack) -> AsyncWebClient:
    return AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)


@pytest.fixture(scope="module")
def _served_page() -> Iterator[Page]:
    with served_page() as page:
        yield page


@pytest.fixture
def page(_served_page: Page) -> Page:
    """The module's page and app (starting them for each test costs most of its time), taken
    back to a fresh workspace before each test."""
    return _served_page.afresh()


@pytest.fixture
async def socket() -> AsyncIterator[SocketSlack]:
    async with socket_slack() as slack:
        yield slack


@pytest.fixture
async def ws() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
