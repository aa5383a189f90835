"""The `/queue` slash command: the help and a command that does not parse are answered by the
replica Slack reached; every other command is handed off to the requests stream."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.commands import read_command, run_command
from bot.actions.core import ActionCore, Outcome
from bot.outbound.gateway import SlackGateway
from handlers.context import (
    Work,
    actor_of,
    after_ack,
    hand_off,
    interaction_of,
    slack_of,
    tell,
    text_at,
)

log = logging.getLogger(__name__)
FAILED = Outcome(False, "queuepilot could not carry out this command; its log says why.")
COMMAND = "queue_command"  # its work's name in the requests stream


async def on_queue(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    typed = read_command(text_at(body, "text"))
    if isinstance(typed, Outcome):
        after_ack(tell(slack_of(context), body, typed))
    else:
        hand_off(context, COMMAND, body)


async def run(core: ActionCore, slack: SlackGateway, body: dict[str, Any]) -> None:
    try:
        outcome = await run_command(
            core,
            actor_of(body),
            text_at(body, "text"),
            channel=text_at(body, "channel_id"),
            interaction=interaction_of(body),
        )
    except Exception:
        # Slack has its 200 already: without this the person would see nothing at all.
        log.exception("slack: /queue failed after acknowledging")
        outcome = FAILED
    await tell(slack, body, outcome)


WORKS: dict[str, Work] = {COMMAND: run}


def register(app: AsyncApp, *, command: str) -> None:
    app.command(command)(on_queue)
