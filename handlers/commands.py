"""The `/queue` slash command: acknowledge within Slack's 3 seconds, then run it in the core."""

from __future__ import annotations

import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.commands import run_command
from bot.actions.core import Outcome
from handlers.context import actor_of, after_ack, core_of, interaction_of, tell, text_at

log = logging.getLogger(__name__)
FAILED = Outcome(False, "queuepilot could not carry out this command; its log says why.")


async def on_queue(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    after_ack(_run(body, context))


async def _run(body: dict[str, Any], context: AsyncBoltContext) -> None:
    try:
        outcome = await run_command(
            core_of(context),
            actor_of(body),
            text_at(body, "text"),
            channel=text_at(body, "channel_id"),
            interaction=interaction_of(body),
        )
    except Exception:
        # Slack has its 200 already: without this the person would see nothing at all.
        log.exception("slack: /queue failed after acknowledging")
        outcome = FAILED
    await tell(context, body, outcome)


def register(app: AsyncApp, *, command: str) -> None:
    app.command(command)(on_queue)
