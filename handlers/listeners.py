"""Every Slack listener, registered by kind (as Bolt's starter template does), and the one table
of the lazy work the leader performs from the requests stream."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.outbound.home import Home
from handlers import actions, commands, home, views
from handlers.lazy import Lazy

# By name, as Bolt names a lazy function (and the requests stream stores it); a lazy function
# not here runs on the replica Slack reached.
WORK: dict[str, Lazy] = {
    work.__name__: work
    for work in (
        actions.act_on_incident,
        actions.dismiss_warning,
        commands.run_queue_command,
        views.scale_as_confirmed,
        views.keep_scale_refusal,
    )
}


def register(app: AsyncApp, *, command: str, home_tab: Home) -> None:
    actions.register(app)
    commands.register(app, command=command)
    views.register(app)
    home.register(app, home_tab)
