"""Root-message buttons, an early warning's Dismiss and the pilot's Undo and Pause: acked, then
performed by the leader, which finds the incident, carries out the `/queue` command the button
stands for and tells the person."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.commands import Command, perform
from bot.actions.core import Outcome
from bot.domain.units import MAX_SILENCE_S, ascii_whole, is_silence_length
from bot.render.replies import PILOT_PAUSE, PILOT_UNDO
from bot.render.root import KEEP_SILENCE
from handlers.context import (
    NO_INCIDENT,
    ack_only,
    actor_of,
    core_of,
    first_action,
    incident_ref_of,
    interaction_of,
    slack_of,
    tell,
    text_at,
)

CHOOSE = Outcome(False, "Choose how long to silence it for.")

# Each incident button's command by its action_id; the root's Resolve asks in its confirm dialog
# first (with what is still live), so confirmed it resolves anyway.
COMMANDS = {
    "incident_ack": Command("ack"),
    "incident_resolve": Command("resolve", anyway=True),
    "incident_resolve_anyway": Command("resolve", anyway=True),
    "incident_silence": Command("silence"),
    "incident_unsilence": Command("unsilence"),
    "incident_diagnose": Command("diagnose"),
    "incident_postmortem": Command("postmortem"),
}


async def act_on_incident(body: dict[str, Any], context: AsyncBoltContext) -> None:
    core, action = core_of(context), first_action(body)
    command = COMMANDS[text_at(action, "action_id")]
    outcome = NO_INCIDENT
    if ref := await incident_ref_of(body, core):
        # The select's values are seconds, with `:keep` for a silence kept after the resolve.
        chosen = text_at(action, "selected_option", "value")
        keep = chosen.endswith(KEEP_SILENCE)
        seconds = ascii_whole(chosen.removesuffix(KEEP_SILENCE), MAX_SILENCE_S + 1)
        if command.verb == "silence" and (seconds is None or not is_silence_length(seconds)):
            outcome = CHOOSE
        else:
            command = replace(command, incident_ref=ref, seconds=seconds, keep=keep)
            outcome = await perform(core, actor_of(body), command, interaction=interaction_of(body))
    await tell(slack_of(context), body, outcome)


async def act_for_pilot(body: dict[str, Any], context: AsyncBoltContext) -> None:
    """Undo and Pause pilot, under one of its acts: its value is `<ref>|<act's time>|<type>`."""
    action, piloting = first_action(body), core_of(context).piloting
    act = piloting.undo if text_at(action, "action_id") == PILOT_UNDO else piloting.pause
    outcome = await act(actor_of(body), text_at(action, "value"), interaction_of(body))
    await tell(slack_of(context), body, outcome)


async def dismiss_warning(body: dict[str, Any], context: AsyncBoltContext) -> None:
    """An early warning's Dismiss: its value is `<warning uid>:<runner type>`."""
    uid, _, runner_type = text_at(first_action(body), "value").partition(":")
    outcome = await core_of(context).warnings.dismiss(
        actor_of(body), runner_type, uid, interaction=interaction_of(body)
    )
    await tell(slack_of(context), body, outcome)


def register(app: AsyncApp) -> None:
    """Every button but the Scale up… ones, which open a modal (`handlers.views`)."""
    for action_id in COMMANDS:
        app.action(action_id)(ack=ack_only, lazy=[act_on_incident])
    app.action("warning_dismiss")(ack=ack_only, lazy=[dismiss_warning])
    for action_id in (PILOT_UNDO, PILOT_PAUSE):
        app.action(action_id)(ack=ack_only, lazy=[act_for_pilot])
