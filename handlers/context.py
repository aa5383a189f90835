"""What Slack listeners get from a request: who, where, which incident, and how to answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.core import ActionCore, Actor, Outcome
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.root import incident_ref_of as incident_ref_of_message

log = logging.getLogger(__name__)


_after_ack: set[asyncio.Task[None]] = set()


def after_ack(work: Awaitable[None]) -> None:
    """Do a listener's work once Slack has its answer.

    Bolt runs listeners with `process_before_response`, so the HTTP answer (or the Socket Mode
    envelope's) goes out the moment the listener returns, instead of when Bolt next polls its
    `ack` (every 10 ms): a listener acknowledges, hands its work here, and returns.
    """
    task = asyncio.ensure_future(_logged(work))
    _after_ack.add(task)  # a reference, so the task is not collected mid-way
    task.add_done_callback(_after_ack.discard)


async def _logged(work: Awaitable[None]) -> None:
    try:
        await work
    except Exception:
        log.exception("slack: a listener failed after acknowledging")


def actor_of(body: dict[str, Any]) -> Actor:
    """The user of an interaction payload (`user`) or a slash command form (`user_id`)."""
    user = body.get("user")
    name = user.get("username") if isinstance(user, dict) else None
    return Actor(
        user_id=_id_of(user) or str(body.get("user_id") or ""),
        name=str(name or body.get("user_name") or ""),
    )


def _id_of(value: Any) -> str:
    """The ID a `user` or `channel` field names: an object's `id` (interactions), or the field
    itself as a string. Bolt reads both, and a slash command's JSON (Socket Mode) or extra form
    fields (HTTP) may carry either; what Bolt takes as the request's user and channel is what
    the listeners act for and answer in."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) else ""


def interaction_of(body: dict[str, Any]) -> str | None:
    """The request's own identity, so the same delivery twice is acted on once.

    A click has its `action_ts`; a modal submission its view ID (with the step's callback); a
    slash command its `trigger_id`.
    """
    actions = body.get("actions")
    if isinstance(actions, list) and actions and isinstance(actions[0], dict):
        stamp = actions[0].get("action_ts")
        return f"action:{stamp}" if stamp else None
    view = body.get("view")
    if isinstance(view, dict) and view.get("id"):
        return f"view:{view['id']}:{view.get('callback_id', '')}:{view.get('hash', '')}"
    trigger = body.get("trigger_id")
    return f"trigger:{trigger}" if trigger else None


def channel_of(body: dict[str, Any]) -> str:
    container = body.get("container")
    in_container = container.get("channel_id") if isinstance(container, dict) else None
    return str(in_container or _id_of(body.get("channel")) or body.get("channel_id") or "")


async def incident_ref_of(body: dict[str, Any], core: ActionCore) -> str | None:
    """The incident a root-message action is about, as `<id>:<uid>` whenever known.

    Buttons carry it as their value. A select's value is its choice, so for it the clicked
    message tells: its blocks (which Slack echoes) name the incident, else the message index.
    """
    action = (body.get("actions") or [{}])[0]
    if action.get("type") == "button" and action.get("value"):
        return str(action["value"])
    message = body.get("message")
    if isinstance(message, dict) and (ref := incident_ref_of_message(message)):
        return ref
    message_ts = (body.get("container") or {}).get("message_ts")
    if not message_ts:
        return None
    return await core.incident_of_message(channel_of(body), str(message_ts))


def core_of(context: AsyncBoltContext) -> ActionCore:
    return context["actions"]  # type: ignore[no-any-return]


async def tell(
    context: AsyncBoltContext,
    body: dict[str, Any],
    outcome: Outcome,
    *,
    channel: str | None = None,
) -> None:
    """Answer the person who acted, visible to them only.

    An ephemeral message through the Web API works wherever the bot is a member; elsewhere (a
    slash command typed in a DM or a channel without the bot) the request's `response_url` does.
    """
    slack: SlackGateway = context["slack"]
    try:
        where = channel or channel_of(body)
        await slack.post_ephemeral(where, actor_of(body).user_id, outcome.message)
        return
    except SlackError as exc:
        log.info("ephemeral answer failed (%s); trying response_url", exc.error)
    respond = context.respond
    if respond is None:
        return
    try:
        await respond(text=outcome.message, response_type="ephemeral", replace_original=False)
    except Exception as exc:
        log.warning("could not answer %s: %s", actor_of(body).user_id, type(exc).__name__)
