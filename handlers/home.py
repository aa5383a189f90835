"""The App Home: when someone opens its Home tab, their view is published after Bolt's ack (the
Messages tab has nothing to publish)."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from bot.outbound.home import Home
from handlers.context import ack_only, object_at, text_at


def register(app: AsyncApp, home: Home) -> None:
    async def publish_home(body: dict[str, Any], context: AsyncBoltContext) -> None:
        event = object_at(body, "event")
        if text_at(event, "tab") == "home":
            await home.opened(text_at(event, "user"), text_at(event, "view", "hash"))

    app.event("app_home_opened")(ack=ack_only, lazy=[publish_home])
