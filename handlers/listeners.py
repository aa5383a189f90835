"""Every Slack listener, registered by kind (as Bolt's starter template does), and the one table
of the lazy work the leader performs from the requests stream."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from bot.outbound.home import Home
from handlers import actions, commands, views
from handlers.context import ack_only, object_at, text_at
from handlers.lazy import Work

# The keys are what the requests stream stores, so a request waiting in it across an upgrade is
# still performed: a key never changes, whatever its function is called. A lazy function not
# here runs on the replica Slack reached. The leader hands these functions a context holding only
# `parts` (no `client`, no `respond`): they use nothing else of it, nor of the request but `body`.
WORK: dict[str, Work] = {
    "incident-button": Work(actions.act_on_incident),
    "warning-dismiss": Work(actions.dismiss_warning),
    "pilot-button": Work(actions.act_for_pilot),
    "queue-command": Work(commands.run_queue_command, commands.is_command),
    "scale-confirmed": Work(views.scale_as_confirmed),
    "scale-refused": Work(views.keep_scale_refusal, views.refused_scaling),
}


def register(app: AsyncApp, *, command: str, home_tab: Home) -> None:
    actions.register(app)
    commands.register(app, command=command)
    views.register(app)

    # Opening the Home tab publishes the person's view after the ack (the Messages tab has none).
    async def publish_home(body: dict[str, Any], context: AsyncBoltContext) -> None:
        event = object_at(body, "event")
        if text_at(event, "tab") == "home":
            await home_tab.opened(text_at(event, "user"), text_at(event, "view", "hash"))

    app.event("app_home_opened")(ack=ack_only, lazy=[publish_home])
