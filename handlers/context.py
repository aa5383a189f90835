"""What Slack listeners read from a request (who, where, which incident) and how they answer."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.actions.core import ActionCore, Actor, Outcome
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.mrkdwn import in_zone
from bot.render.root import incident_ref_of as incident_ref_of_message

log = logging.getLogger(__name__)

NO_INCIDENT = Outcome(False, "This message is not an incident queuepilot knows.")


@dataclass(frozen=True)
class Parts:
    """What listeners act with, in Bolt's context as `parts`."""

    actions: ActionCore
    slack: SlackGateway

    def __deepcopy__(self, memo: dict[int, Any]) -> Parts:
        # Bolt deep-copies the context for each lazy listener: the parts are shared, not copied.
        return self


async def ack_only(ack: AsyncAck) -> None:
    await ack()


def text_at(data: Any, *path: str) -> str:
    """The string at `path` in a payload, else "": Bolt hands listeners the body unchecked, and a
    body of another shape must read as absent instead of raising after the ack."""
    found = object_at(data, *path[:-1]).get(path[-1]) if path else data
    return found if isinstance(found, str) else ""


def object_at(data: Any, *path: str) -> dict[str, Any]:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def first_action(body: dict[str, Any]) -> dict[str, Any]:
    actions = body.get("actions")
    first = actions[0] if isinstance(actions, list) and actions else None
    return first if isinstance(first, dict) else {}


def actor_of(body: dict[str, Any]) -> Actor:
    return Actor(
        user_id=_id_of(body.get("user")) or text_at(body, "user_id"),
        name=text_at(body, "user", "username") or text_at(body, "user_name"),
    )


def _id_of(value: Any) -> str:
    return value if isinstance(value, str) else text_at(value, "id")


def interaction_of(body: dict[str, Any]) -> str | None:
    """The request's own identity, so the same delivery twice is acted on once."""
    if action := first_action(body):
        stamp = text_at(action, "action_ts")
        return f"action:{stamp}" if stamp else None
    view = object_at(body, "view")
    if view_id := text_at(view, "id"):
        return f"view:{view_id}:{text_at(view, 'callback_id')}:{text_at(view, 'hash')}"
    trigger = text_at(body, "trigger_id")
    return f"trigger:{trigger}" if trigger else None


def channel_of(body: dict[str, Any]) -> str:
    clicked = text_at(body, "container", "channel_id")
    return clicked or _id_of(body.get("channel")) or text_at(body, "channel_id")


async def incident_ref_of(body: dict[str, Any], core: ActionCore) -> str | None:
    """`<id>:<uid>` whenever known: a button's value, else the clicked message's blocks (Slack
    echoes them), else the message index."""
    action = first_action(body)
    if text_at(action, "type") == "button" and (value := text_at(action, "value")):
        return value
    message = object_at(body, "message")
    if isinstance(message.get("blocks"), list) and (ref := incident_ref_of_message(message)):
        return ref
    message_ts = text_at(body, "container", "message_ts")
    return await core.incident_of_message(channel_of(body), message_ts) if message_ts else None


def core_of(context: AsyncBoltContext) -> ActionCore:
    return context["parts"].actions  # type: ignore[no-any-return]


def slack_of(context: AsyncBoltContext) -> SlackGateway:
    return context["parts"].slack  # type: ignore[no-any-return]


async def tell(
    slack: SlackGateway, body: dict[str, Any], outcome: Outcome, *, channel: str | None = None
) -> None:
    """Answer the person who acted, visible to them only: ephemerally where the bot is a member,
    else (a DM, a channel without the bot, a Web API failure) through the `response_url`."""
    user = actor_of(body).user_id
    said = in_zone(outcome.message, datetime.now(UTC))  # an answer speaks of moments near now
    try:
        where = channel or channel_of(body)
        await slack.post_ephemeral(where, user, said, blocks=outcome.blocks)
        return
    except SlackError as exc:
        log.info("ephemeral answer failed (%s); trying response_url", exc.error)
    except RedisError as exc:
        log.info("ephemeral answer not sent (Redis: %s); trying response_url", exc)
    urls = body.get("response_urls")
    url = text_at(body, "response_url") or (
        text_at(urls[0], "response_url") if isinstance(urls, list) and urls else ""
    )
    if not url:
        log.warning("could not answer %s: the request has no response_url", user)
        return
    blocks = {"blocks": list(outcome.blocks)} if outcome.blocks else {}
    message = {"text": said, **blocks, "response_type": "ephemeral", "replace_original": False}
    calls = slack.telemetry.slack_calls
    try:
        answer = await AsyncWebhookClient(url).send_dict(message)
    except Exception as exc:  # whatever the URL or the network: one line, no traceback
        calls.labels("response_url", "connection_error").inc()
        log.warning("could not answer %s: %s", user, type(exc).__name__)
        return
    status = answer.status_code
    calls.labels("response_url", "ok" if status == 200 else f"http_{status}").inc()
    if status != 200:
        log.warning("could not answer %s: response_url answered %d", user, status)
