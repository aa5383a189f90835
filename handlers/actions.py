"""Root-message actions: acknowledge Slack at once, then hand the click to the action core.

Every button (and the silence select) is the same few steps: ack, find the incident the message
is about, call one method of the core with who clicked and the click's identity, tell the person
the answer. `incident_action` builds such a listener from that one call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.core import ActionCore, Actor, Outcome
from bot.domain.durations import MAX_SILENCE_S, is_silence_length
from bot.domain.whole_numbers import ascii_whole
from handlers.context import (
    actor_of,
    after_ack,
    core_of,
    first_action,
    incident_ref_of,
    interaction_of,
    tell,
    text_at,
)

NO_INCIDENT = Outcome(False, "This message is not an incident queuepilot knows.")
CHOOSE = Outcome(False, "Choose how long to silence it for.")

# (core, who, incident reference, the click's identity, the payload) -> the answer
Act = Callable[[ActionCore, Actor, str, str | None, dict[str, Any]], Awaitable[Outcome]]
Listener = Callable[[AsyncAck, dict[str, Any], AsyncBoltContext], Awaitable[None]]


def incident_action(act: Act) -> Listener:
    async def listener(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
        await ack()
        after_ack(_act(act, body, context))

    return listener


async def _act(act: Act, body: dict[str, Any], context: AsyncBoltContext) -> None:
    core = core_of(context)
    ref = await incident_ref_of(body, core)
    outcome = (
        await act(core, actor_of(body), ref, interaction_of(body), body) if ref else NO_INCIDENT
    )
    await tell(context, body, outcome)


async def _silence(
    core: ActionCore, actor: Actor, ref: str, interaction: str | None, body: dict[str, Any]
) -> Outcome:
    seconds = _selected_seconds(body)
    if seconds is None:
        return CHOOSE
    return await core.silence(actor, ref, seconds, interaction=interaction)


def _selected_seconds(body: dict[str, Any]) -> int | None:
    """The silence select's choice: its option values are durations in seconds."""
    value = text_at(first_action(body), "selected_option", "value")
    seconds = ascii_whole(value, MAX_SILENCE_S + 1)
    return seconds if seconds is not None and is_silence_length(seconds) else None


on_ack = incident_action(lambda core, who, ref, i, _: core.acknowledge(who, ref, interaction=i))
on_resolve = incident_action(lambda core, who, ref, i, _: core.resolve(who, ref, interaction=i))
on_resolve_anyway = incident_action(
    lambda core, who, ref, i, _: core.resolve(who, ref, anyway=True, interaction=i)
)
on_silence = incident_action(_silence)
on_unsilence = incident_action(lambda core, who, ref, i, _: core.unsilence(who, ref, interaction=i))
on_diagnose = incident_action(lambda core, who, ref, i, _: core.diagnose(who, ref, interaction=i))
on_postmortem = incident_action(
    lambda core, who, ref, i, _: core.postmortem(who, ref, interaction=i)
)


async def on_dismiss_warning(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext
) -> None:
    """An early warning's Dismiss button: its value names the warning (uid) and runner type."""
    await ack()
    after_ack(_dismiss(body, context))


async def _dismiss(body: dict[str, Any], context: AsyncBoltContext) -> None:
    uid, _, runner_type = text_at(first_action(body), "value").partition(":")
    core = core_of(context)
    outcome = await core.dismiss_warning(
        actor_of(body), runner_type, uid, interaction=interaction_of(body)
    )
    await tell(context, body, outcome)


def register(app: AsyncApp) -> None:
    """Every root-message action but `incident_scale`, which opens a modal (`handlers.views`);
    the summary's Postmortem button; the *Resolve anyway* that a Resolve's answer offers while
    the queue is still live."""
    app.action("incident_ack")(on_ack)
    app.action("incident_resolve")(on_resolve)
    app.action("incident_resolve_anyway")(on_resolve_anyway)
    app.action("incident_silence")(on_silence)
    app.action("incident_unsilence")(on_unsilence)
    app.action("incident_diagnose")(on_diagnose)
    app.action("incident_postmortem")(on_postmortem)
    app.action("warning_dismiss")(on_dismiss_warning)
