"""The scale-up modal: opened by the root's button, reviewed, then confirmed into the core.

Slack wants a 200 within 3 seconds and a modal opened within 3 seconds of the click, so the
button opens the form at once and fills in the capacity with `views.update` when the backend
answers. A submission answers with the next step (`response_action: update`) or with errors
under the field they concern; the confirmed scale-up runs after the modal closed, and its answer
arrives ephemerally in the incident's channel and in the thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.core import ActionCore, Outcome
from bot.domain.whole_numbers import ascii_whole
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.root import incident_ref
from bot.render.scale_modal import (
    AMOUNT_BLOCK,
    CONFIRM_VIEW,
    KEEP,
    KEEP_BLOCK,
    MODE_BLOCK,
    RAISE_MAX,
    SCALE_VIEW,
    TYPE_BLOCK,
    VALUE,
    ScaleForm,
    render_scale_confirm,
    render_scale_form,
)
from handlers.context import (
    actor_of,
    after_ack,
    channel_of,
    core_of,
    incident_ref_of,
    interaction_of,
    tell,
)

log = logging.getLogger(__name__)

# A submission must be answered within Slack's 3 seconds, permission and capacity read included:
# its own work fits in SUBMISSION_S (user groups take up to
# `bot.actions.permissions.GROUP_LOOKUP_S`,
# the capacity what is left), under the dispatch's bound (`handlers.slack_events.ANSWER_BUDGET_S`),
# so the person sees the next step rather than the dispatch's "took too long". (A scaler whose
# client hangs overruns its timeout by `bot.backends.errors.MARGIN_S`: that bound catches it.)
SUBMISSION_S = 2.2
PREVIEW_IN_SUBMISSION_S = 1.5
PREVIEW_IN_FORM_S = 10.0
NO_INCIDENT = Outcome(False, "This message is not an incident queuepilot knows.")
# Any larger amount reads as this, which every scaler's cap refuses under the field.
MAX_AMOUNT = 1_000_000


async def on_scale_button(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    after_ack(_open_form(body, context))


async def _open_form(body: dict[str, Any], context: AsyncBoltContext) -> None:
    core, actor = core_of(context), actor_of(body)
    ref = await incident_ref_of(body, core)
    choice = await core.scaling.choices(actor, ref) if ref else NO_INCIDENT
    if isinstance(choice, Outcome):
        await tell(context, body, choice)
        return
    incident, types = choice
    form = ScaleForm(ref=incident_ref(incident), channel=channel_of(body), runner_type=types[0])
    cap = _cap(core, types[0])
    slack: SlackGateway = context["slack"]
    try:
        opened = await slack.call(
            "views.open",
            trigger_id=body.get("trigger_id"),
            view=render_scale_form(form, incident, types, None, cap=cap),
        )
    except SlackError as exc:
        await tell(context, body, Outcome(False, f"Could not open the scale form ({exc.error})."))
        return
    preview = await core.scaling.preview(incident, types[0], timeout_s=PREVIEW_IN_FORM_S)
    view = opened.get("view") or {}
    try:
        await slack.call(
            "views.update",
            view_id=view.get("id"),
            hash=view.get("hash"),
            view=render_scale_form(form, incident, types, preview, cap=cap),
        )
    except SlackError as exc:  # closed meanwhile, or already on its next step
        log.info("scale form not updated: %s", exc.error)


async def on_scale_form(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    clock = asyncio.get_running_loop().time
    deadline = clock() + SUBMISSION_S
    core, view = core_of(context), body.get("view") or {}
    form = ScaleForm.load(str(view.get("private_metadata") or ""))
    values = (view.get("state") or {}).get("values") or {}
    runner_type = _selected(values, TYPE_BLOCK)
    amount = _amount(values)
    if form is None:
        await ack(response_action="errors", errors={TYPE_BLOCK: "This form is out of date."})
        return
    problem = core.scaling.check(runner_type, amount or 0)
    if amount is None or problem:
        block = TYPE_BLOCK if core.scaling.target(runner_type) is None else AMOUNT_BLOCK
        await ack(response_action="errors", errors={block: _plain(problem or "A whole number.")})
        return
    choice = await core.scaling.choices(actor_of(body), form.ref)
    if isinstance(choice, Outcome):
        await ack(response_action="errors", errors={TYPE_BLOCK: _plain(choice.message)})
        return
    incident, _ = choice
    left = min(PREVIEW_IN_SUBMISSION_S, deadline - clock())
    preview = await core.scaling.preview(incident, runner_type, timeout_s=max(left, 0.1))
    raise_maximum = _selected(values, MODE_BLOCK) == RAISE_MAX
    keep = KEEP in _checked(values, KEEP_BLOCK)
    step = ScaleForm(form.ref, form.channel, runner_type, amount, raise_maximum, keep)
    backend = core.scaling.backend_name
    await ack(response_action="update", view=render_scale_confirm(step, preview, backend))


async def on_scale_confirm(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack(response_action="clear")
    after_ack(_scale(body, context))


async def _scale(body: dict[str, Any], context: AsyncBoltContext) -> None:
    view = body.get("view") or {}
    form = ScaleForm.load(str(view.get("private_metadata") or ""))
    if form is None or not form.runner_type:
        return
    outcome = await core_of(context).scale(
        actor_of(body),
        form.ref,
        form.runner_type,
        form.delta,
        raise_maximum=form.raise_maximum,
        keep=form.keep is True,
        interaction=interaction_of(body),
    )
    await tell(context, body, outcome, channel=form.channel)


def _selected(values: dict[str, Any], block: str) -> str:
    element = (values.get(block) or {}).get(VALUE) or {}
    return str((element.get("selected_option") or {}).get("value") or "")


def _checked(values: dict[str, Any], block: str) -> set[str]:
    """The values of a checkboxes element's selected options."""
    element = (values.get(block) or {}).get(VALUE) or {}
    options = element.get("selected_options")
    if not isinstance(options, list):
        return set()
    return {str(o.get("value")) for o in options if isinstance(o, dict)}


def _amount(values: dict[str, Any]) -> int | None:
    text = str(((values.get(AMOUNT_BLOCK) or {}).get(VALUE) or {}).get("value") or "").strip()
    return ascii_whole(text, MAX_AMOUNT)


def _cap(core: ActionCore, runner_type: str) -> int:
    target = core.scaling.target(runner_type)
    return target.cap if target is not None else 1


def _plain(message: str) -> str:
    """Modal errors are plain text: drop mrkdwn code marks and entities."""
    text = message.replace("`", "").replace("&lt;", "<").replace("&gt;", ">")
    return text.replace("&amp;", "&")[:150]


def register(app: AsyncApp) -> None:
    app.action("incident_scale")(on_scale_button)
    app.view(SCALE_VIEW)(on_scale_form)
    app.view(CONFIRM_VIEW)(on_scale_confirm)
