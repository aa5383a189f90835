"""The Scale up… modal, opened by an incident root's button or an early warning's, reviewed on the
replica Slack reached, then confirmed: the leader scales."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.core import ActionCore, Outcome
from bot.domain.scale.scaling import ScaleOwner
from bot.domain.units import ascii_whole
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.mrkdwn import plain_text
from bot.render.replies import incident_ref
from bot.render.scale_modal import (
    AMOUNT_BLOCK,
    CONFIRM_VIEW,
    KEEP,
    KEEP_BLOCK,
    MODE_BLOCK,
    RAISE_MAX,
    SCALE_VIEW,
    TAKE_ADVICE,
    TYPE_BLOCK,
    VALUE,
    ScaleForm,
    render_scale_confirm,
    render_scale_form,
    scale_about,
)
from handlers.context import (
    NO_INCIDENT,
    ack_only,
    actor_of,
    channel_of,
    core_of,
    first_action,
    incident_ref_of,
    interaction_of,
    object_at,
    slack_of,
    tell,
    text_at,
)

log = logging.getLogger(__name__)

# A submission's own work (user groups, then the capacity) fits under the boundary's bound
# (`handlers.slack_boundary.ANSWER_BUDGET_S`), so the person sees the next step.
SUBMISSION_S = 2.2
PREVIEW_IN_SUBMISSION_S = 1.5
PREVIEW_IN_FORM_S = 10.0
# Any larger amount reads as this, which every scaler's cap refuses under the field.
MAX_AMOUNT = 1_000_000


async def open_scale_form(body: dict[str, Any], context: AsyncBoltContext) -> None:
    """Open the form at once (the trigger expires in 3 s), then fill in the capacity."""
    slack, core, action = slack_of(context), core_of(context), first_action(body)
    if text_at(action, "action_id") == "warning_scale":
        # An early warning's: its value is `<warning uid>:<runner type>`.
        uid, _, runner_type = text_at(action, "value").partition(":")
        form = ScaleForm(ref="", channel=channel_of(body), runner_type=runner_type, warning=uid)
    elif ref := await incident_ref_of(body, core):
        form = ScaleForm(ref=ref, channel=channel_of(body))
    else:
        await tell(slack, body, NO_INCIDENT)
        return
    owner = await _owner(core, body, form, form.runner_type)
    if isinstance(owner, Outcome):
        await tell(slack, body, owner)
        return
    ref = incident_ref(owner.incident) if owner.incident is not None else ""
    form = replace(form, ref=ref, runner_type=owner.choices[0])
    try:
        shown = render_scale_form(form, owner, None)
        opened = await slack.call("views.open", trigger_id=text_at(body, "trigger_id"), view=shown)
    except SlackError as exc:
        await tell(slack, body, Outcome(False, f"Could not open the scale form ({exc.error})."))
        return
    preview = await core.scale_preview(owner, form.runner_type, timeout_s=PREVIEW_IN_FORM_S)
    if preview.recommended is not None:  # the review compares the advice then with the advice now
        form = replace(form, advised=preview.default.delta or 0)
    view = opened.get("view") or {}
    await _update(slack, view, render_scale_form(form, owner, preview), "scale form")


async def review_scale_form(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    async def refuse(block: str, message: str) -> None:
        # Slack shows a field's error as plain text, at most 150 characters.
        shown = plain_text(message).replace("`", "")[:150]
        await ack(response_action="errors", errors={block: shown})

    clock = asyncio.get_running_loop().time
    deadline = clock() + SUBMISSION_S
    core, view = core_of(context), object_at(body, "view")
    form = ScaleForm.load(text_at(view, "private_metadata"))
    values = object_at(view, "state", "values")
    runner_type, amount = _selected(values, TYPE_BLOCK), _amount(values)
    if form is None or (form.warning and runner_type != form.runner_type):
        return await refuse(TYPE_BLOCK, "This form is out of date.")
    problem = core.scaling.check(runner_type, amount or 0)
    if amount is None or problem:
        block = TYPE_BLOCK if runner_type not in core.scaling.targets else AMOUNT_BLOCK
        return await refuse(block, problem or "A whole number.")
    owner = await _owner(core, body, form, runner_type)
    if isinstance(owner, Outcome):
        return await refuse(TYPE_BLOCK, owner.message)
    left = max(min(PREVIEW_IN_SUBMISSION_S, deadline - clock()), 0.1)
    # With the advice now: the review says whether it moved since the form opened.
    preview = await core.scale_preview(owner, runner_type, timeout_s=left)
    raise_maximum = preview.can_raise_maximum and _selected(values, MODE_BLOCK) == RAISE_MAX
    # Checked at review as the scaler checks it on Confirm: a refusal shows under the amount.
    refused = core.scaling.refused(preview.target, preview.capacity, amount, raise_maximum)
    if refused:
        return await refuse(AMOUNT_BLOCK, refused)
    checked = object_at(values, KEEP_BLOCK, VALUE).get("selected_options")
    keep = isinstance(checked, list) and KEEP in {text_at(o, "value") for o in checked}
    step = replace(
        form, runner_type=runner_type, delta=amount, raise_maximum=raise_maximum, keep=keep
    )
    about = scale_about(owner, runner_type)
    view = render_scale_confirm(step, preview, core.scaling.backend_name, about=about)
    await ack(response_action="update", view=view)


async def take_advice(body: dict[str, Any], context: AsyncBoltContext) -> None:
    """The review's "Scale by +N instead": the same review, of the advice's amount, checked as
    a typed one is."""
    slack, core, view = slack_of(context), core_of(context), object_at(body, "view")
    form = ScaleForm.load(text_at(view, "private_metadata"))
    amount = ascii_whole(text_at(first_action(body), "value"), MAX_AMOUNT)
    if form is None or amount is None or core.scaling.check(form.runner_type, amount):
        return
    owner = await _owner(core, body, form, form.runner_type)
    if isinstance(owner, Outcome):
        await tell(slack, body, owner, channel=form.channel)
        return
    preview = await core.scale_preview(owner, form.runner_type, timeout_s=PREVIEW_IN_FORM_S)
    # The advice's amount in the advice's shape: the maximum raised where it raises it.
    taken = amount == preview.default.delta
    raise_maximum = preview.default.raise_maximum if taken else form.raise_maximum
    refused = core.scaling.refused(preview.target, preview.capacity, amount, raise_maximum)
    if refused:
        await tell(slack, body, Outcome(False, refused), channel=form.channel)
        return
    step = replace(form, delta=amount, advised=amount, raise_maximum=raise_maximum)
    about = scale_about(owner, form.runner_type)
    review = render_scale_confirm(step, preview, core.scaling.backend_name, about=about)
    await _update(slack, view, review, "scale review")


async def close_views(ack: AsyncAck) -> None:
    await ack(response_action="clear")


async def scale_as_confirmed(body: dict[str, Any], context: AsyncBoltContext) -> None:
    core = core_of(context)
    form = ScaleForm.load(text_at(body, "view", "private_metadata"))
    if form is None or not form.runner_type:
        return
    how = {"raise_maximum": form.raise_maximum, "keep": form.keep is True}
    actor, interaction = actor_of(body), interaction_of(body)
    if form.warning:
        outcome = await core.warnings.scale(
            actor, form.runner_type, form.warning, form.delta, **how, interaction=interaction
        )
    else:
        outcome = await core.scaling.scale(
            actor, form.ref, form.runner_type, form.delta, **how, interaction=interaction
        )
    await tell(slack_of(context), body, outcome, channel=form.channel)


async def refused_scaling(body: dict[str, Any], context: AsyncBoltContext) -> bool:
    """Whether the person may not scale at all: only then has the leader a refusal to keep."""
    return await core_of(context).scaling.refusal(actor_of(body)) is not None


async def keep_scale_refusal(body: dict[str, Any], context: AsyncBoltContext) -> None:
    """A Scale up… refused at the button, on the incident's timeline for its summary: written by
    the leader, whichever replica told the person."""
    core, actor = core_of(context), actor_of(body)
    ref = await incident_ref_of(body, core)
    if ref and (refusal := await core.scaling.refusal(actor)) is not None:
        await core.scaling.acting.keep_refusal(ref, "Scale-up", actor, refusal)


async def _owner(
    core: ActionCore, body: dict[str, Any], form: ScaleForm, runner_type: str
) -> ScaleOwner | Outcome:
    return await core.scale_owner(
        actor_of(body), ref=form.ref, warning=form.warning, runner_type=runner_type
    )


async def _update(
    slack: SlackGateway, view: dict[str, Any], new: dict[str, Any], what: str
) -> None:
    try:
        await slack.call("views.update", view_id=view.get("id"), hash=view.get("hash"), view=new)
    except SlackError as exc:  # closed or moved on meanwhile
        log.info("%s not updated: %s", what, exc.error)


def _selected(values: dict[str, Any], block: str) -> str:
    return text_at(values, block, VALUE, "selected_option", "value")


def _amount(values: dict[str, Any]) -> int | None:
    return ascii_whole(text_at(values, AMOUNT_BLOCK, VALUE, "value").strip(), MAX_AMOUNT)


def register(app: AsyncApp) -> None:
    app.action("incident_scale")(ack=ack_only, lazy=[open_scale_form, keep_scale_refusal])
    app.action("warning_scale")(ack=ack_only, lazy=[open_scale_form])
    app.view(SCALE_VIEW)(review_scale_form)
    app.view(CONFIRM_VIEW)(ack=close_views, lazy=[scale_as_confirmed])
    app.action(TAKE_ADVICE)(ack=ack_only, lazy=[take_advice])
