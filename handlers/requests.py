"""The work a Slack request hands off, by the name its listener gave it in the requests stream
(`handlers.context.hand_off`): one fixed table, which the stream's consumer performs from
(`bot.intake.requests`). A name not in it is dead-lettered there, never guessed at.

Listeners whose answer needs nothing changed keep their work on the replica Slack reached: the
scale modal's opening (its `trigger_id` lasts 3 seconds) and its review (answered in Slack's
own response), `/queue help`, and the App Home's view.
"""

from __future__ import annotations

from functools import partial

import handlers.actions
import handlers.commands
import handlers.views
from bot.actions.core import ActionCore
from bot.intake.requests import Perform
from bot.outbound.gateway import SlackGateway
from handlers.context import Work

WORKS: dict[str, Work] = {
    **handlers.actions.WORKS,
    **handlers.views.WORKS,
    **handlers.commands.WORKS,
}


def works(core: ActionCore, slack: SlackGateway) -> dict[str, Perform]:
    """Each work, ready for the consumer to call with a request's body."""
    return {name: partial(work, core, slack) for name, work in WORKS.items()}
