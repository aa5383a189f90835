"""Root-message buttons: ack and hand the click off; then, on the replica performing it, find the
incident, call one method of the action core, tell the person the answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp

from bot.actions.core import ActionCore, Actor, Outcome
from bot.domain.units import MAX_SILENCE_S, ascii_whole, is_silence_length
from bot.outbound.gateway import SlackGateway
from handlers.context import (
    NO_INCIDENT,
    Work,
    actor_of,
    first_action,
    handed_off,
    incident_ref_of,
    interaction_of,
    tell,
    text_at,
)

CHOOSE = Outcome(False, "Choose how long to silence it for.")

# (core, who, incident reference, the click's identity, the payload) -> the answer
Act = Callable[[ActionCore, Actor, str, str | None, dict[str, Any]], Awaitable[Outcome]]


def incident_work(act: Act) -> Work:
    async def work(core: ActionCore, slack: SlackGateway, body: dict[str, Any]) -> None:
        ref = await incident_ref_of(body, core)
        outcome = (
            await act(core, actor_of(body), ref, interaction_of(body), body) if ref else NO_INCIDENT
        )
        await tell(slack, body, outcome)

    return work


async def _silence(
    core: ActionCore, actor: Actor, ref: str, interaction: str | None, body: dict[str, Any]
) -> Outcome:
    # The select's option values are durations in seconds.
    value = text_at(first_action(body), "selected_option", "value")
    seconds = ascii_whole(value, MAX_SILENCE_S + 1)
    if seconds is None or not is_silence_length(seconds):
        return CHOOSE
    return await core.silence(actor, ref, seconds, interaction=interaction)


async def dismiss_warning(core: ActionCore, slack: SlackGateway, body: dict[str, Any]) -> None:
    """An early warning's Dismiss: its value is `<warning uid>:<runner type>`."""
    uid, _, runner_type = text_at(first_action(body), "value").partition(":")
    outcome = await core.dismiss_warning(
        actor_of(body), runner_type, uid, interaction=interaction_of(body)
    )
    await tell(slack, body, outcome)


# Each button's work by its action_id, which also names the work in the requests stream.
WORKS: dict[str, Work] = {
    "incident_ack": incident_work(lambda c, who, ref, i, _: c.acknowledge(who, ref, interaction=i)),
    "incident_resolve": incident_work(lambda c, who, ref, i, _: c.resolve(who, ref, interaction=i)),
    "incident_resolve_anyway": incident_work(
        lambda c, who, ref, i, _: c.resolve(who, ref, anyway=True, interaction=i)
    ),
    "incident_silence": incident_work(_silence),
    "incident_unsilence": incident_work(
        lambda c, who, ref, i, _: c.unsilence(who, ref, interaction=i)
    ),
    "incident_diagnose": incident_work(
        lambda c, who, ref, i, _: c.diagnose(who, ref, interaction=i)
    ),
    "incident_postmortem": incident_work(
        lambda c, who, ref, i, _: c.postmortem(who, ref, interaction=i)
    ),
    "warning_dismiss": dismiss_warning,
}


def register(app: AsyncApp) -> None:
    """Every button but the Scale up… ones, which open a modal (`handlers.views`)."""
    for action_id in WORKS:
        app.action(action_id)(handed_off(action_id))
