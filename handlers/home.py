"""The App Home: when someone opens its Home tab, their view is published after Bolt's ack (the
Messages tab has nothing to publish)."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.outbound.home import Home
from handlers.context import after_ack, text_at


def register(app: AsyncApp, home: Home) -> None:
    async def on_home_opened(event: dict[str, Any]) -> None:
        if text_at(event, "tab") == "home":
            after_ack(home.opened(text_at(event, "user"), text_at(event, "view", "hash")))

    app.event("app_home_opened")(on_home_opened)
