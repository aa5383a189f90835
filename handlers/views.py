"""The scale-up modal: opened by the root's button or an early warning's, reviewed, then
confirmed into the core.

Slack wants a 200 within 3 seconds and a modal opened within 3 seconds of the click, so the
button opens the form at once and fills in the capacity with `views.update` when the backend
answers. A submission answers with the next step (`response_action: update`) or with errors
under the field they concern; the confirmed scale-up runs after the modal closed, and its answer
arrives ephemerally in the incident's channel and in the thread (an early warning's: on the
warning's message).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext

from bot.actions.core import ActionCore, Actor, Outcome
from bot.domain.early_warning import SCALE_UNTIL, Phase, WarningState
from bot.domain.judgement import Judgement
from bot.domain.scaling import ScalePreview
from bot.domain.whole_numbers import ascii_whole
from bot.outbound.gateway import SlackError, SlackGateway
from bot.render.mrkdwn import escape, truncate
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
    incident_heading,
    render_scale_confirm,
    render_scale_form,
    warning_heading,
)
from handlers.context import (
    actor_of,
    after_ack,
    channel_of,
    core_of,
    first_action,
    incident_ref_of,
    interaction_of,
    object_at,
    tell,
    text_at,
)

log = logging.getLogger(__name__)

# A submission must be answered within Slack's 3 seconds, permission and capacity read included:
# its own work fits in SUBMISSION_S (user groups take up to
# `bot.actions.permissions.GROUP_LOOKUP_S`, the capacity what is left), under the boundary's
# bound (`handlers.slack_boundary.ANSWER_BUDGET_S`), so the person sees the next step rather
# than the boundary's "took too long". (A scaler whose client hangs overruns its timeout by
# `bot.backends.errors.MARGIN_S`: that bound catches it.)
SUBMISSION_S = 2.2
PREVIEW_IN_SUBMISSION_S = 1.5
PREVIEW_IN_FORM_S = 10.0
NO_INCIDENT = Outcome(False, "This message is not an incident queuepilot knows.")
NO_WARNINGS = Outcome(False, "Early warnings are turned off.", "refused")
# Any larger amount reads as this, which every scaler's cap refuses under the field.
MAX_AMOUNT = 1_000_000


async def on_scale_button(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack()
    after_ack(_open_form(body, context))


async def on_warning_scale_button(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext
) -> None:
    """An early warning's Scale up: its value names the warning (uid) and runner type."""
    await ack()
    after_ack(_open_warning_form(body, context))


async def _open_form(body: dict[str, Any], context: AsyncBoltContext) -> None:
    core, actor = core_of(context), actor_of(body)
    ref = await incident_ref_of(body, core)
    choice = await core.scaling.choices(actor, ref) if ref else NO_INCIDENT
    if isinstance(choice, Outcome):
        await tell(context, body, choice)
        return
    incident, types = choice
    form = ScaleForm(ref=incident_ref(incident), channel=channel_of(body), runner_type=types[0])
    preview = core.scaling.preview(incident, types[0], timeout_s=PREVIEW_IN_FORM_S)
    await _show_form(body, context, form, incident_heading(incident), types, preview)


async def _open_warning_form(body: dict[str, Any], context: AsyncBoltContext) -> None:
    core, actor = core_of(context), actor_of(body)
    uid, _, runner_type = text_at(first_action(body), "value").partition(":")
    choice = await _warning_choice(core, actor, runner_type, uid)
    if isinstance(choice, Outcome):
        await tell(context, body, choice)
        return
    form = ScaleForm(ref="", channel=channel_of(body), runner_type=runner_type, warning=uid)
    preview = _warning_preview(core, choice, PREVIEW_IN_FORM_S)
    await _show_form(body, context, form, warning_heading(choice), [runner_type], preview)


async def _show_form(
    body: dict[str, Any],
    context: AsyncBoltContext,
    form: ScaleForm,
    heading: str,
    types: list[str],
    preview: Coroutine[Any, Any, ScalePreview],
) -> None:
    """Open the form at once (the trigger expires in 3 s), then fill in the capacity."""
    cap = _cap(core_of(context), types[0])
    slack: SlackGateway = context["slack"]
    try:
        opened = await slack.call(
            "views.open",
            trigger_id=text_at(body, "trigger_id"),
            view=render_scale_form(form, heading, types, None, cap=cap),
        )
    except SlackError as exc:
        preview.close()  # never awaited: the form did not open
        await tell(context, body, Outcome(False, f"Could not open the scale form ({exc.error})."))
        return
    view = opened.get("view") or {}
    try:
        await slack.call(
            "views.update",
            view_id=view.get("id"),
            hash=view.get("hash"),
            view=render_scale_form(form, heading, types, await preview, cap=cap),
        )
    except SlackError as exc:  # closed meanwhile, or already on its next step
        log.info("scale form not updated: %s", exc.error)


async def on_scale_form(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    clock = asyncio.get_running_loop().time
    deadline = clock() + SUBMISSION_S
    core, view = core_of(context), object_at(body, "view")
    form = ScaleForm.load(text_at(view, "private_metadata"))
    values = object_at(view, "state", "values")
    runner_type = _selected(values, TYPE_BLOCK)
    amount = _amount(values)
    if form is None or (form.warning and runner_type != form.runner_type):
        await ack(response_action="errors", errors={TYPE_BLOCK: "This form is out of date."})
        return
    problem = core.scaling.check(runner_type, amount or 0)
    if amount is None or problem:
        block = TYPE_BLOCK if core.scaling.target(runner_type) is None else AMOUNT_BLOCK
        await ack(response_action="errors", errors={block: _plain(problem or "A whole number.")})
        return
    actor = actor_of(body)
    if form.warning:
        warning = await _warning_choice(core, actor, runner_type, form.warning)
        if isinstance(warning, Outcome):
            await ack(response_action="errors", errors={TYPE_BLOCK: _plain(warning.message)})
            return
        left = max(min(PREVIEW_IN_SUBMISSION_S, deadline - clock()), 0.1)
        preview = await _warning_preview(core, warning, left)
        about = f"Early warning for {truncate(escape(runner_type), 200)} · shown on its message"
    else:
        choice = await core.scaling.choices(actor, form.ref)
        if isinstance(choice, Outcome):
            await ack(response_action="errors", errors={TYPE_BLOCK: _plain(choice.message)})
            return
        incident, _ = choice
        left = max(min(PREVIEW_IN_SUBMISSION_S, deadline - clock()), 0.1)
        preview = await core.scaling.preview(incident, runner_type, timeout_s=left)
        about = f"Incident {escape(incident.id)} · recorded in its thread"
    raise_maximum = _selected(values, MODE_BLOCK) == RAISE_MAX
    keep = KEEP in _checked(values, KEEP_BLOCK)
    step = ScaleForm(form.ref, form.channel, runner_type, amount, raise_maximum, keep, form.warning)
    backend = core.scaling.backend_name
    view = render_scale_confirm(step, preview, backend, about=about)
    await ack(response_action="update", view=view)


async def on_scale_confirm(ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext) -> None:
    await ack(response_action="clear")
    after_ack(_scale(body, context))


async def _scale(body: dict[str, Any], context: AsyncBoltContext) -> None:
    form = ScaleForm.load(text_at(body, "view", "private_metadata"))
    if form is None or not form.runner_type:
        return
    core, actor = core_of(context), actor_of(body)
    keep, interaction = form.keep is True, interaction_of(body)
    if not form.warning:
        outcome = await core.scale(
            actor,
            form.ref,
            form.runner_type,
            form.delta,
            raise_maximum=form.raise_maximum,
            keep=keep,
            interaction=interaction,
        )
    elif core.warnings is None:
        outcome = NO_WARNINGS
    else:
        outcome = await core.warnings.scale(
            actor,
            form.runner_type,
            form.warning,
            form.delta,
            raise_maximum=form.raise_maximum,
            keep=keep,
            interaction=interaction,
        )
    await tell(context, body, outcome, channel=form.channel)


async def _warning_choice(
    core: ActionCore, actor: Actor, runner_type: str, uid: str
) -> WarningState | Outcome:
    if core.warnings is None:
        return NO_WARNINGS
    return await core.warnings.scale_choice(actor, runner_type, uid)


async def _warning_preview(core: ActionCore, state: WarningState, timeout_s: float) -> ScalePreview:
    """The warning's recommendation (the incident's own, at the growth the warning sees) is the
    amount; once an incident took the warning on, the scale-up is the incident's, and goes back
    as the incident's do."""
    recommended = None
    if state.hold_runners:
        at = datetime.fromtimestamp(state.updated_at, UTC)
        recommended = Judgement(at=at, runners=state.hold_runners, why="the early warning's")
    until = "" if state.phase is Phase.FOLDED else SCALE_UNTIL
    return await core.scaling.preview_of(
        state.runner_type, recommended, timeout_s=timeout_s, until=until
    )


def _selected(values: dict[str, Any], block: str) -> str:
    return text_at(values, block, VALUE, "selected_option", "value")


def _checked(values: dict[str, Any], block: str) -> set[str]:
    """The values of a checkboxes element's selected options."""
    options = object_at(values, block, VALUE).get("selected_options")
    return {text_at(o, "value") for o in options} if isinstance(options, list) else set()


def _amount(values: dict[str, Any]) -> int | None:
    return ascii_whole(text_at(values, AMOUNT_BLOCK, VALUE, "value").strip(), MAX_AMOUNT)


def _cap(core: ActionCore, runner_type: str) -> int:
    target = core.scaling.target(runner_type)
    return target.cap if target is not None else 1


def _plain(message: str) -> str:
    """Modal errors are plain text: drop mrkdwn code marks and entities."""
    text = message.replace("`", "").replace("&lt;", "<").replace("&gt;", ">")
    return text.replace("&amp;", "&")[:150]


def register(app: AsyncApp) -> None:
    app.action("incident_scale")(on_scale_button)
    app.action("warning_scale")(on_warning_scale_button)
    app.view(SCALE_VIEW)(on_scale_form)
    app.view(CONFIRM_VIEW)(on_scale_confirm)
