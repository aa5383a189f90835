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


def text_at(data: Any, *path: str) -> str:
    """The string at `path` in a payload, "" when a step is not an object or the end not a string.

    Bolt hands listeners the body as Slack sent it, unchecked: every field a listener reads goes
    through this (or `object_at`), so a signed body of another shape reads as absent instead of
    raising after the ack."""
    found = object_at(data, *path[:-1]).get(path[-1]) if path else data
    return found if isinstance(found, str) else ""


def object_at(data: Any, *path: str) -> dict[str, Any]:
    """The object at `path` in a payload, {} when it is not there or not an object."""
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def first_action(body: dict[str, Any]) -> dict[str, Any]:
    """The action of a `block_actions` payload (Slack sends one per click), {} for none."""
    actions = body.get("actions")
    first = actions[0] if isinstance(actions, list) and actions else None
    return first if isinstance(first, dict) else {}


def actor_of(body: dict[str, Any]) -> Actor:
    """The user of an interaction payload (`user`) or a slash command form (`user_id`)."""
    return Actor(
        user_id=_id_of(body.get("user")) or text_at(body, "user_id"),
        name=text_at(body, "user", "username") or text_at(body, "user_name"),
    )


def _id_of(value: Any) -> str:
    """The ID a `user` or `channel` field names: an object's `id` (interactions), or the field
    itself as a string. Bolt reads both, and a slash command's JSON (Socket Mode) or extra form
    fields (HTTP) may carry either; what Bolt takes as the request's user and channel is what
    the listeners act for and answer in."""
    return value if isinstance(value, str) else text_at(value, "id")


def interaction_of(body: dict[str, Any]) -> str | None:
    """The request's own identity, so the same delivery twice is acted on once.

    A click has its `action_ts`; a modal submission its view ID (with the step's callback); a
    slash command its `trigger_id`.
    """
    if action := first_action(body):
        stamp = text_at(action, "action_ts")
        return f"action:{stamp}" if stamp else None
    view = object_at(body, "view")
    if view_id := text_at(view, "id"):
        return f"view:{view_id}:{text_at(view, 'callback_id')}:{text_at(view, 'hash')}"
    trigger = text_at(body, "trigger_id")
    return f"trigger:{trigger}" if trigger else None


def channel_of(body: dict[str, Any]) -> str:
    return (
        text_at(body, "container", "channel_id")
        or _id_of(body.get("channel"))
        or text_at(body, "channel_id")
    )


async def incident_ref_of(body: dict[str, Any], core: ActionCore) -> str | None:
    """The incident a root-message action is about, as `<id>:<uid>` whenever known.

    Buttons carry it as their value. A select's value is its choice, so for it the clicked
    message tells: its blocks (which Slack echoes) name the incident, else the message index.
    """
    action = first_action(body)
    if text_at(action, "type") == "button" and (value := text_at(action, "value")):
        return value
    message = object_at(body, "message")
    if isinstance(message.get("blocks"), list) and (ref := incident_ref_of_message(message)):
        return ref
    message_ts = text_at(body, "container", "message_ts")
    if not message_ts:
        return None
    return await core.incident_of_message(channel_of(body), message_ts)


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
        await slack.post_ephemeral(
            where, actor_of(body).user_id, outcome.message, blocks=outcome.blocks
        )
        return
    except SlackError as exc:
        log.info("ephemeral answer failed (%s); trying response_url", exc.error)
    respond = context.respond
    if respond is None:
        return
    try:
        await respond(
            text=outcome.message,
            blocks=list(outcome.blocks) or None,
            response_type="ephemeral",
            replace_original=False,
        )
    except Exception as exc:
        log.warning("could not answer %s: %s", actor_of(body).user_id, type(exc).__name__)
