"""Every Slack listener, registered by kind (as Bolt's starter template does), and the one table
of the lazy work the leader performs from the requests stream."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.outbound.home import Home
from handlers import actions, commands, home, views
from handlers.lazy import Work

# The keys are what the requests stream stores, so a request waiting in it across an upgrade is
# still performed: a key never changes, whatever its function is called. A lazy function not
# here runs on the replica Slack reached. The leader hands these functions a context holding only
# `parts` (no `client`, no `respond`): they use nothing else of it, nor of the request but `body`.
WORK: dict[str, Work] = {
    "incident-button": Work(actions.act_on_incident),
    "warning-dismiss": Work(actions.dismiss_warning),
    "queue-command": Work(commands.run_queue_command, commands.is_command),
    "scale-confirmed": Work(views.scale_as_confirmed),
    "scale-refused": Work(views.keep_scale_refusal, views.refused_scaling),
}


def register(app: AsyncApp, *, command: str, home_tab: Home) -> None:
    actions.register(app)
    commands.register(app, command=command)
    views.register(app)
    home.register(app, home_tab)
