"""What Slack listeners read from a request (who, where, which incident), how they answer, and
how they hand their work to the requests stream for whichever replica performs it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import RedisError
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.actions.core import ActionCore, Actor, Outcome
from bot.actions.flow import NO_REDIS
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.root import incident_ref_of as incident_ref_of_message
from bot.storage.consumer_group import NotReplicated
from bot.storage.requests import RequestRefused, RequestStream

log = logging.getLogger(__name__)

# A listener's work once Slack has its answer, on whichever replica performs it.
Work = Callable[[ActionCore, SlackGateway, dict[str, Any]], Awaitable[None]]
NO_INCIDENT = Outcome(False, "This message is not an incident queuepilot knows.")
NOT_TAKEN = Outcome(False, "queuepilot could not take this request; its log says why.", "error")

_after_ack: set[asyncio.Task[None]] = set()


def after_ack(work: Awaitable[None]) -> None:
    """Do a listener's work once Slack has its answer (`process_before_response` sends it the
    moment the listener returns)."""

    async def logged() -> None:
        try:
            await work
        except Exception:
            log.exception("slack: a listener failed after acknowledging")

    task = asyncio.ensure_future(logged())
    _after_ack.add(task)  # a reference, so the task is not collected mid-way
    task.add_done_callback(_after_ack.discard)


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
    return (
        text_at(body, "container", "channel_id")
        or _id_of(body.get("channel"))
        or text_at(body, "channel_id")
    )


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
    if not message_ts:
        return None
    return await core.incident_of_message(channel_of(body), message_ts)


def core_of(context: AsyncBoltContext) -> ActionCore:
    return context["actions"]  # type: ignore[no-any-return]


def slack_of(context: AsyncBoltContext) -> SlackGateway:
    return context["slack"]  # type: ignore[no-any-return]


def hand_off(context: AsyncBoltContext, work: str, body: dict[str, Any]) -> None:
    """Append `work` on `body` to the requests stream once Slack has its answer; one that cannot
    be appended is answered here, so the person hears why."""
    requests: RequestStream = context["requests"]
    slack = slack_of(context)

    async def kept() -> None:
        try:
            await requests.append(work, body)
        except RequestRefused as exc:
            log.warning("slack: a %s request was not taken: %s", work, exc)
            await tell(slack, body, NOT_TAKEN)
        except NotReplicated as exc:
            # In the stream, so it will be done: asking the person to retry would do it twice.
            log.warning("slack: a %s request is not yet on a Redis replica: %s", work, exc)
        except RedisError as exc:
            log.error("slack: a %s request was not taken: Redis: %s", work, exc)
            await tell(slack, body, Outcome(False, NO_REDIS, "error"))

    after_ack(kept())


async def tell(
    slack: SlackGateway, body: dict[str, Any], outcome: Outcome, *, channel: str | None = None
) -> None:
    """Answer the person who acted, visible to them only: ephemerally where the bot is a member,
    else (a DM, a channel without the bot, a Web API failure) through the `response_url`."""
    user = actor_of(body).user_id
    try:
        where = channel or channel_of(body)
        await slack.post_ephemeral(where, user, outcome.message, blocks=outcome.blocks)
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
    message: dict[str, Any] = {"text": outcome.message}
    if outcome.blocks:
        message["blocks"] = list(outcome.blocks)
    message.update(response_type="ephemeral", replace_original=False)
    calls = slack.telemetry.slack_calls
    try:
        answer = await AsyncWebhookClient(url).send_dict(message)
    except Exception as exc:  # whatever the URL or the network: one line, no traceback
        calls.labels("response_url", "connection_error").inc()
        log.warning("could not answer %s: %s", user, type(exc).__name__)
        return
    calls.labels(
        "response_url", "ok" if answer.status_code == 200 else f"http_{answer.status_code}"
    ).inc()
    if answer.status_code != 200:
        log.warning("could not answer %s: response_url answered %d", user, answer.status_code)
