"""History reads at the tier Slack gives the app (`SlackEmulator(history_tier=...)`).

Since 2025-05-29 a commercially distributed app outside the Marketplace reads
`conversations.history` and `.replies` at Tier 1: one call a minute per method, 15 messages a
call. An internal app keeps Tier 3: about 50 calls a minute, history 100 messages by default
and at most 999, replies up to 1,000.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from sandbox.serve import serve_in_thread
from sandbox.slack_api import SlackEmulator
from tests.support.running import eventually
from tests.support.slack import BOT_TOKEN, CHANNEL

OTHER = "C0OTHER"


@asynccontextmanager
async def slack_at(**options: Any) -> AsyncIterator[tuple[SlackEmulator, AsyncWebClient]]:
    emulator = SlackEmulator(token=BOT_TOKEN, channels=(CHANNEL, OTHER), **options)
    with serve_in_thread(emulator.app) as running:
        yield emulator, AsyncWebClient(token=BOT_TOKEN, base_url=f"{running.url}/api/")


def post_many(emulator: SlackEmulator, count: int, *, thread_ts: str | None = None) -> list[str]:
    """Messages put straight into the workspace (posting them is not what is tested)."""
    with emulator.workspace() as ws:
        return [
            ws.post(CHANNEL, text=str(i), blocks=[], thread_ts=thread_ts).ts for i in range(count)
        ]


async def limited(call: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as raised:
        await call
    return raised.value


async def once_allowed(call: Any) -> dict[str, Any]:
    """The answer to a history call made again until its interval has passed."""

    async def attempt() -> dict[str, Any] | None:
        try:
            return dict((await call()).data)
        except SlackApiError as exc:
            if exc.response.status_code != 429:
                raise
            return None

    return await eventually(attempt, what="the history interval to pass")


# -- Tier 1: a distributed app outside the Marketplace -------------------------------------------


async def test_tier_1_allows_one_call_a_minute_per_method_app_wide() -> None:
    async with slack_at(history_tier=1) as (emulator, client):
        root = post_many(emulator, 1)[0]
        assert (await client.conversations_history(channel=CHANNEL))["ok"]
        for channel in (CHANNEL, OTHER):  # app-wide: another channel waits too
            refused = await limited(client.conversations_history(channel=channel))
            assert refused.response.status_code == 429
            assert refused.response["error"] == "ratelimited"
            wait = int(refused.response.headers["Retry-After"])
            assert 58 <= wait <= 60
        # Each method has its own minute.
        assert (await client.conversations_replies(channel=CHANNEL, ts=root))["ok"]
        refused = await limited(client.conversations_replies(channel=CHANNEL, ts=root))
        assert refused.response.status_code == 429
    assert [c.status for c in emulator.calls("conversations.history")] == [200, 429, 429]


async def test_tier_1_holds_with_the_other_limits_off_and_lifts_after_the_interval() -> None:
    async with slack_at(history_tier=1, history_interval_s=0.3) as (emulator, client):
        assert emulator.enforce_rate_limits is False
        await client.conversations_history(channel=CHANNEL)
        refused = await limited(client.conversations_history(channel=CHANNEL))
        assert refused.response.headers["Retry-After"] == "1"  # whole seconds, at least one
        answer = await once_allowed(lambda: client.conversations_history(channel=CHANNEL))
        assert answer["ok"]


async def test_tier_1_pages_hold_15_messages_and_cursors_still_page() -> None:
    async with slack_at(history_tier=1, history_interval_s=0.2) as (emulator, client):
        posted = post_many(emulator, 20)
        first = await client.conversations_history(channel=CHANNEL, limit=100)
        assert len(first["messages"]) == 15 and first["has_more"] is True
        cursor = first["response_metadata"]["next_cursor"]
        rest = await once_allowed(
            lambda: client.conversations_history(channel=CHANNEL, cursor=cursor)
        )
        seen = [m["ts"] for m in first["messages"] + rest["messages"]]
        assert seen == list(reversed(posted)) and rest["has_more"] is False

        replies = post_many(emulator, 19, thread_ts=posted[0])
        thread = await client.conversations_replies(channel=CHANNEL, ts=posted[0])
        assert [m["ts"] for m in thread["messages"]] == [posted[0], *replies[:14]]


# -- Tier 3: an internal app -------------------------------------------------------------------


async def test_tier_3_allows_about_50_calls_a_minute_when_limits_are_enforced() -> None:
    async with slack_at(enforce_rate_limits=True) as (emulator, client):
        for _ in range(50):
            await client.conversations_history(channel=CHANNEL)
        refused = await limited(client.conversations_history(channel=CHANNEL))
        assert refused.response.status_code == 429
        assert int(refused.response.headers["Retry-After"]) >= 1
        emulator.enforce_rate_limits = False  # off (the default): tier 3 is never held back
        for _ in range(60):
            await client.conversations_history(channel=CHANNEL)


async def test_tier_3_pages_are_100_by_default_999_at_most_and_replies_1000() -> None:
    async with slack_at() as (emulator, client):
        posted = post_many(emulator, 1001)
        assert len((await client.conversations_history(channel=CHANNEL))["messages"]) == 100
        most = await client.conversations_history(channel=CHANNEL, limit=5000)
        assert len(most["messages"]) == 999 and most["has_more"] is True
        post_many(emulator, 1000, thread_ts=posted[0])
        thread = await client.conversations_replies(channel=CHANNEL, ts=posted[0])
        assert len(thread["messages"]) == 1000 and thread["has_more"] is True


async def test_the_tier_can_be_switched_between_calls() -> None:
    async with slack_at() as (emulator, client):
        for _ in range(3):
            await client.conversations_history(channel=CHANNEL)
        emulator.history_tier = 1
        await client.conversations_history(channel=CHANNEL)  # calls at tier 3 do not count
        assert (
            await limited(client.conversations_history(channel=CHANNEL))
        ).response.status_code == 429
        emulator.history_tier = 3
        assert (await client.conversations_history(channel=CHANNEL))["ok"]


def test_only_tiers_1_and_3_exist() -> None:
    with pytest.raises(ValueError, match="history_tier"):
        SlackEmulator(history_tier=2)
