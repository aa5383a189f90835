"""The `/queue` slash command: the help and a command that does not parse are answered by the
replica Slack reached; every other command is performed by the leader."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.commands import read_command, run_command
from bot.actions.core import Outcome
from handlers.context import ack_only, actor_of, core_of, interaction_of, slack_of, tell, text_at

log = logging.getLogger(__name__)
FAILED = Outcome(False, "queuepilot could not carry out this command; its log says why.")


async def answer_typed(body: dict[str, Any], context: AsyncBoltContext) -> None:
    if isinstance(typed := read_command(text_at(body, "text")), Outcome):
        await tell(slack_of(context), body, typed)


async def is_command(body: dict[str, Any], context: AsyncBoltContext) -> bool:
    """Whether the leader has work to do: not for the help, nor a command that does not parse
    (`answer_typed` answers those)."""
    return not isinstance(read_command(text_at(body, "text")), Outcome)


async def run_queue_command(body: dict[str, Any], context: AsyncBoltContext) -> None:
    core, text, channel = core_of(context), text_at(body, "text"), text_at(body, "channel_id")
    try:
        outcome = await run_command(
            core, actor_of(body), text, channel=channel, interaction=interaction_of(body)
        )
    except Exception:
        # Slack has its 200 already: without this the person would see nothing at all.
        log.exception("slack: /queue failed after acknowledging")
        outcome = FAILED
    await tell(slack_of(context), body, outcome)


def register(app: AsyncApp, *, command: str) -> None:
    app.command(command)(ack=ack_only, lazy=[answer_typed, run_queue_command])
