"""Root-message actions: acknowledge Slack at once, then hand the click to the action core."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions import Outcome
from handlers.context import actor_of, core_of, incident_ref_of, interaction_of, tell

NO_INCIDENT = Outcome(False, "This message is not an incident queuepilot knows.")


async def _on_incident(
    body: dict[str, Any], context: AsyncBoltContext, act: Callable[[str], Awaitable[Outcome]]
) -> None:
    ref = await incident_ref_of(body, core_of(context))
    await tell(context, body, await act(ref) if ref else NO_INCIDENT)


async def on_ack(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    actor, interaction = actor_of(body), interaction_of(body)
    core = core_of(context)
    await _on_incident(
        body, context, lambda ref: core.acknowledge(actor, ref, interaction=interaction)
    )


async def on_resolve(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    actor, interaction = actor_of(body), interaction_of(body)
    core = core_of(context)
    await _on_incident(body, context, lambda ref: core.resolve(actor, ref, interaction=interaction))


async def on_silence(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    seconds = _selected_seconds(body)
    if seconds is None:
        await tell(context, body, Outcome(False, "Choose how long to silence it for."))
        return
    actor, interaction = actor_of(body), interaction_of(body)
    core = core_of(context)
    await _on_incident(
        body, context, lambda ref: core.silence(actor, ref, seconds, interaction=interaction)
    )


async def on_unsilence(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    actor, interaction = actor_of(body), interaction_of(body)
    core = core_of(context)
    await _on_incident(
        body, context, lambda ref: core.unsilence(actor, ref, interaction=interaction)
    )


async def on_diagnose(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    actor, interaction = actor_of(body), interaction_of(body)
    core = core_of(context)
    await _on_incident(
        body, context, lambda ref: core.diagnose(actor, ref, interaction=interaction)
    )


def _selected_seconds(body: dict[str, Any]) -> int | None:
    """The silence select's choice: its option values are durations in seconds."""
    action = (body.get("actions") or [{}])[0]
    value = str(((action.get("selected_option") or {}).get("value")) or "")
    return int(value) if value.isdigit() and 60 <= int(value) <= 7 * 86_400 else None


def register(app: AsyncApp) -> None:
    app.action("incident_ack")(on_ack)
    app.action("incident_resolve")(on_resolve)
    app.action("incident_silence")(on_silence)
    app.action("incident_unsilence")(on_unsilence)
    app.action("incident_diagnose")(on_diagnose)
