"""The Scale up… modal, for an incident or an early warning: the form, then a confirmation of
what will be asked of which backend, so a stray Enter scales nothing (`ScaleForm` rides in
`private_metadata` between them). While the capacity is read the form shows no input: Slack keeps
an input's value across `views.update` when its IDs stay the same (bolt-js#290).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

from bot.domain.scale.scaling import Capacity, ScaleOwner, ScalePreview
from bot.domain.units import duration
from bot.render import mrkdwn as md
from bot.render.numbers import judged_parts
from bot.render.replies import title_text

SCALE_VIEW = "incident_scale_modal"
CONFIRM_VIEW = "incident_scale_confirm"
TAKE_ADVICE = "scale_take_advice"  # the review's button that takes the advice now instead
TYPE_BLOCK, AMOUNT_BLOCK, MODE_BLOCK, KEEP_BLOCK = "runner_type", "amount", "mode", "keep"
VALUE = "value"
RAISE_MAX, RAISE_MIN = "raise_max", "raise_min"
KEEP = "keep"
MAX_OPTIONS = 100
MAX_OPTION_VALUE = 150


@dataclass(frozen=True)
class ScaleForm:
    # A form another release opened (a rollback, an upgrade) keeps the fields this one knows.
    __pydantic_config__ = ConfigDict(extra="ignore")

    ref: str
    channel: str
    runner_type: str = ""
    delta: int = 0
    raise_maximum: bool = False
    keep: bool = False  # not put back when the incident resolves
    warning: str = ""  # from an early warning: its uid (`ref` is then empty)
    # What the form filled in when it opened (0: nothing; None: nothing read in time).
    advised: int | None = None

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, text: str) -> ScaleForm | None:
        try:
            return _FORM.validate_json(text)
        except ValidationError:
            return None


_FORM = TypeAdapter(ScaleForm)


def scale_about(owner: ScaleOwner, runner_type: str) -> str:
    if owner.warning is not None:
        return f"Early warning for {md.escaped(runner_type, 200)} · shown on its message"
    incident_id = owner.incident.id if owner.incident is not None else ""
    return f"Incident {md.escape(incident_id)} · recorded in its thread"


def render_scale_form(
    form: ScaleForm, owner: ScaleOwner, preview: ScalePreview | None
) -> dict[str, Any]:
    """Step one; `preview` is None while the capacity is read (Slack's trigger expires in 3 s)."""
    about = ""
    if (warned := owner.warning) is not None:
        # Its words are an older reading's: the numbers below are the reading the advice is.
        raised = md.time_of(datetime.fromtimestamp(warned.warned_at, UTC))
        about = f"*Early warning* · {md.escaped(warned.runner_type, 200)}, raised {raised}"
    elif (incident := owner.incident) is not None:
        about = f"*Incident {md.escape(incident.id)}* · {md.truncate(title_text(incident), 500)}"
    heading = md.section(about)
    if preview is None:
        waiting = md.context(["Reading the current capacity and the latest advice…"])
        return _modal(SCALE_VIEW, form, [heading, waiting], submit="")
    names = owner.choices[:MAX_OPTIONS]
    options = [md.option(name, name) for name in names if len(name) <= MAX_OPTION_VALUE]
    chosen = next((o for o in options if o["value"] == form.runner_type), options[0])
    blocks: list[dict[str, Any]] = [heading]
    if (advice := preview.recommended) is not None:  # the reading the advice below is
        said = " · ".join(part for part in (*judged_parts(advice), advice.heading) if part)
        at = md.time_of(advice.at.astimezone(UTC))
        blocks.append(md.context([f"The fleet at {at}: {said or 'no numbers'}"]))
    capacity = preview.capacity
    now = f"_{md.escape(preview.capacity_note)}_"
    if capacity is not None:
        now = f"Now: {md.escape(capacity.describe())}"
    # Without a default the amount is empty and required: nobody submits a number nobody advised.
    amount = {"type": "number_input", "action_id": VALUE, "is_decimal_allowed": False}
    amount["min_value"] = "1"
    if (delta := preview.default.delta) is not None:
        amount["initial_value"] = str(delta)
    else:
        amount["placeholder"] = md.plain("None advised: type how many to add anyway", 150)
    blocks += [
        _input(TYPE_BLOCK, "Runner type", _choice("static_select", options, chosen)),
        _input(
            AMOUNT_BLOCK, "Runners to add", amount, f"At most +{preview.target.cap} per request."
        ),
        md.context([now, *_advice_lines(preview)]),
    ]
    if preview.can_raise_maximum and (capacity is None or capacity.maximum is not None):
        blocks += _raise_maximum_choice(preview)
    blocks += _managed(preview)
    if preview.revert_after_s is not None and not preview.cannot_undo:
        after = "the warning" if form.warning else "the incident"
        keep = _choice("checkboxes", [md.option(f"Keep it after {after}", KEEP)])
        hint = f"Unless kept, the scale-up is put back {_plan(preview)}."
        blocks.append(_input(KEEP_BLOCK, f"After {after}", keep, hint) | {"optional": True})
    return _modal(SCALE_VIEW, form, blocks, submit="Review")


def _choice(
    kind: str, options: list[dict[str, Any]], chosen: dict[str, Any] | None = None
) -> dict[str, Any]:
    made = {"type": kind, "action_id": VALUE, "options": options}
    return made | {"initial_option": chosen} if chosen else made


def _input(block_id: str, label: str, element: dict[str, Any], hint: str = "") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "input", "block_id": block_id, "label": md.plain(label)}
    if hint:
        block["hint"] = md.plain(hint, 2000)
    return block | {"element": element}


def _advice_lines(preview: ScalePreview) -> list[str]:
    advice, default, cap = preview.recommended, preview.default, preview.target.cap
    if advice is None:
        return ["No reading of this runner type to advise from: type how many runners to add."]
    why = f" ({md.escape(advice.why)})" if advice.why else ""
    if not advice.advice and not why and advice.queued == 0:
        why = ": no job waits for a runner in this reading"
    said = f"Recommended: *{md.escape(advice.advice or 'none')}*{why}."
    if not advice.runners:
        return [said, "Nothing is filled in: type a number to add runners anyway."]
    if default.delta is None:
        return [said, f"Nothing is filled in: {md.escape(default.limited)}."]
    if default.more_after:
        more = f"*+{default.more_after} more after this one*"
        return [said, f"One request adds at most +{cap}: {more}."]
    if default.limited:
        most = f"Filled in: +{default.delta}, the most the target takes now"
        return [said, f"{most}: {md.escape(default.limited)}."]
    return [said]


def render_scale_confirm(
    form: ScaleForm, preview: ScalePreview, backend: str, *, about: str
) -> dict[str, Any]:
    """Step two: exactly what will be asked, and of whom; `about`: where it is recorded."""
    target = f"`{md.escaped(preview.target.target, 200)}`"
    lines = [
        f"Scale *{md.escape(form.runner_type)}* by *+{form.delta}* through {md.escape(backend)} "
        f"({target})?"
    ]
    if (capacity := preview.capacity) is not None:
        lines.append(f"Now: {md.escape(capacity.describe())}.")
        if after := _after(form, preview.can_raise_maximum, capacity):
            lines.append(f"After the scale-up: {after}.")
    else:
        lines.append(f"_{md.escape(preview.capacity_note)}_.")
    if preview.cannot_undo:
        lines.append(f"Cannot be undone: {md.escape(preview.cannot_undo)}.")
    elif preview.revert_after_s is not None and form.keep:
        lines.append(
            "Kept, as you chose." if form.warning else "Kept after the incident, as you chose."
        )
    elif preview.revert_after_s is not None:
        lines.append(f"Put back {_plan(preview)}, unless someone changes it meanwhile.")
    blocks = [md.section("\n".join(lines))]
    blocks += _against_advice(form, preview)
    blocks += _managed(preview)
    blocks.append(md.context([about]))
    return _modal(CONFIRM_VIEW, form, blocks, submit="Scale up")


def _against_advice(form: ScaleForm, preview: ScalePreview) -> list[dict[str, Any]]:
    """The advice now, offered where it moved or differs from what was typed; that new pods
    cannot start is said whatever was typed."""
    advice = preview.recommended
    if advice is None:
        return []
    words = md.escape(advice.advice or "none")
    now = preview.default.delta or 0
    blocks: list[dict[str, Any]] = []
    if advice.cannot_start or advice.nodes_short:
        blocks.append(md.section(f"⚠️ Runner pods of this type cannot all start: *{words}*."))
    elif now != form.delta:
        said = f"+{now}" if now else "none"
        if form.advised is not None and now != form.advised:
            was = f"+{form.advised}" if form.advised else "none"
            line = f"⚠️ The advice moved since the form opened: {was} then, *{said}* now ({words})."
        else:
            line = f"You chose +{form.delta}; the advice is *{said}* ({words})."
        blocks.append(md.section(line))
        if now:
            use = md.button(f"Scale by +{now} instead", TAKE_ADVICE, str(now))
            blocks.append(md.actions([use], "scale_advice"))
    return blocks


def _after(form: ScaleForm, can_raise_maximum: bool, capacity: Capacity) -> str:
    if form.raise_maximum and capacity.maximum is not None:
        return f"maxRunners {capacity.maximum} → {capacity.maximum + form.delta}"
    if can_raise_maximum and capacity.minimum is not None:
        return f"minRunners {capacity.minimum} → {capacity.minimum + form.delta}"
    if capacity.current is not None:
        return f"{capacity.current} → {capacity.current + form.delta} runners"
    return ""


def _plan(preview: ScalePreview) -> str:
    if not (after_s := preview.revert_after_s):
        return f"when {preview.until}"
    return f"when {preview.until} or after {duration(timedelta(seconds=after_s))}"


def _managed(preview: ScalePreview) -> list[dict[str, Any]]:
    """That the target's own tool (Helm, Argo CD) will put its value back anyway."""
    manager = preview.capacity.managed_by if preview.capacity else None
    if manager is None:
        return []
    said = (
        f"⚠️ This scale set is managed by {md.escape(manager.describe())}: "
        f"{md.escape(manager.undoes)}, undoing this scale-up whatever is chosen here."
    )
    return [md.context([said])]


def _raise_maximum_choice(preview: ScalePreview) -> list[dict[str, Any]]:
    capacity, default = preview.capacity, preview.default
    raise_max = md.option("Raise maxRunners (the ceiling)", RAISE_MAX)
    raise_min = md.option("Raise minRunners (the floor)", RAISE_MIN)
    blocks: list[dict[str, Any]] = []
    if capacity is not None and capacity.at_maximum:
        at_maximum = (
            f"⚠️ This scale set is at its maximum ({capacity.maximum} runners): ARC runs "
            "min(minRunners + assigned jobs, maxRunners), so raising minRunners changes nothing."
        )
        blocks.append(md.section(at_maximum))
    chosen = raise_max if default.raise_maximum else raise_min
    radio = _choice("radio_buttons", [raise_max, raise_min], chosen)
    hint = ""
    if default.raise_maximum and default.delta is not None:
        raised = ""
        if capacity is not None and capacity.maximum is not None:
            raised = f" ({capacity.maximum} → {capacity.maximum + default.delta})"
        why = f": {default.because}" if default.because else ""
        hint = f"maxRunners is chosen{raised}{why}."
    return [*blocks, _input(MODE_BLOCK, "What to raise", radio, hint)]


def _modal(
    callback: str, form: ScaleForm, blocks: list[dict[str, Any]], *, submit: str
) -> dict[str, Any]:
    view = {
        "type": "modal",
        "callback_id": callback,
        "title": md.plain("Scale up", 24),
        "close": md.plain("Cancel", 24),
        "private_metadata": form.dump(),
        "blocks": blocks,
    }
    return view | {"submit": md.plain(submit, 24)} if submit else view
