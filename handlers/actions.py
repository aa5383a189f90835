"""Root-message actions (buttons and the silence select): acknowledge, then hand to the core."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions import Actor, Outcome
from handlers.context import actor_of, core_of, incident_ref_of, tell

NO_INCIDENT = Outcome(False, "This message is not an incident queuepilot knows.")


async def _on_incident(
    body: dict[str, Any],
    context: AsyncBoltContext,
    act: Callable[[Actor, str], Awaitable[Outcome]],
) -> None:
    ref = await incident_ref_of(body, core_of(context))
    outcome = await act(actor_of(body), ref) if ref else NO_INCIDENT
    await tell(context, body, outcome)


async def on_ack(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    await _on_incident(body, context, core_of(context).acknowledge)


async def on_resolve(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    await _on_incident(body, context, core_of(context).resolve)


async def on_silence(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    await tell(context, body, core_of(context).unavailable("Silencing from Slack"))


async def on_unsilence(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    await tell(context, body, core_of(context).unavailable("Removing a silence from Slack"))


async def on_scale(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    await tell(context, body, core_of(context).unavailable("Scaling up from Slack"))


async def on_diagnose(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    await tell(context, body, core_of(context).unavailable("Diagnostics"))


def register(app: AsyncApp) -> None:
    app.action("incident_ack")(on_ack)
    app.action("incident_resolve")(on_resolve)
    app.action("incident_silence")(on_silence)
    app.action("incident_unsilence")(on_unsilence)
    app.action("incident_scale")(on_scale)
    app.action("incident_diagnose")(on_diagnose)
