"""The App Home: Slack says someone opened the app's Home tab (`app_home_opened`, an Events API
event); Bolt acknowledges it, and the Home core publishes that person's view after the answer.
The Messages tab (`tab: messages`) has nothing to publish."""

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
