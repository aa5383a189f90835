"""The scale-up modal, rendered as pure functions of what it shows.

Two steps, so nothing is scaled by a stray Enter: the form (runner type, preselected from the
incident, or the early warning's own; amount, prefilled with the recommendation; the capacity
now; at ARC's maximum, whether to raise the ceiling instead; whether to keep it after the
incident), then a confirmation that
states what will be asked of which backend, before → after where the backend knows, when it
will be put back (or why it cannot be), and that Helm or Argo CD would put it back anyway.
`ScaleForm` rides in `private_metadata` between the steps; everything else is read again from
Redis and the backend.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from bot.domain.early_warning import WarningState
from bot.domain.incidents import Incident
from bot.domain.scaling import ScalePreview
from bot.domain.units import duration
from bot.render.mrkdwn import context, escape, plain, section, truncate
from bot.render.replies import title_text

SCALE_VIEW = "incident_scale_modal"
CONFIRM_VIEW = "incident_scale_confirm"
TYPE_BLOCK, AMOUNT_BLOCK, MODE_BLOCK, KEEP_BLOCK = "runner_type", "amount", "mode", "keep"
VALUE = "value"
RAISE_MAX, RAISE_MIN = "raise_max", "raise_min"
KEEP = "keep"
MAX_OPTIONS = 100
MAX_OPTION_VALUE = 150


@dataclass(frozen=True)
class ScaleForm:
    ref: str
    channel: str
    runner_type: str = ""
    delta: int = 0
    raise_maximum: bool = False
    keep: bool = False  # not put back when the incident resolves
    warning: str = ""  # from an early warning: its uid (`ref` is then empty)

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, text: str) -> ScaleForm | None:
        try:
            data = json.loads(text)
            return cls(**data) if isinstance(data, dict) else None
        except (ValueError, TypeError):
            return None


def incident_heading(incident: Incident) -> str:
    return f"*Incident {escape(incident.id)}* · {truncate(title_text(incident), 500)}"


def warning_heading(state: WarningState) -> str:
    return f"*Early warning* · {truncate(escape(state.text), 1500)}"


def render_scale_form(
    form: ScaleForm,
    heading: str,
    choices: list[str],
    preview: ScalePreview | None,
    *,
    cap: int,
) -> dict[str, Any]:
    """Step one, under `heading` (`incident_heading`, `warning_heading`). `preview` is None while
    capacity is still being read (the modal opens first: Slack's trigger expires in 3
    seconds)."""
    options = [_option(name) for name in choices[:MAX_OPTIONS] if len(name) <= MAX_OPTION_VALUE]
    chosen = next((o for o in options if o["value"] == form.runner_type), options[0])
    suggested = preview.recommended.runners if preview and preview.recommended else 1
    blocks: list[dict[str, Any]] = [
        section(heading),
        {
            "type": "input",
            "block_id": TYPE_BLOCK,
            "label": plain("Runner type"),
            "element": {
                "type": "static_select",
                "action_id": VALUE,
                "options": options,
                "initial_option": chosen,
            },
        },
        {
            "type": "input",
            "block_id": AMOUNT_BLOCK,
            "label": plain("Runners to add"),
            "hint": plain(f"At most +{cap} per request."),
            "element": {
                "type": "number_input",
                "action_id": VALUE,
                "is_decimal_allowed": False,
                "min_value": "1",
                "initial_value": str(max(1, min(suggested, cap))),
            },
        },
        context([_capacity_line(preview)]),
    ]
    recommended = preview.recommended if preview is not None else None
    if recommended is not None and recommended.runners:
        why = escape(recommended.why)
        over = f"; one request adds at most +{cap}" if recommended.runners > cap else ""
        blocks.append(context([f"Recommended: *+{recommended.runners}* ({why}{over})"]))
    elif recommended is not None:  # the queue drains, or what is booting covers it
        blocks.append(context([f"No more runners recommended: {escape(recommended.why)}."]))
    if preview is not None and _at_maximum(preview):
        blocks += _raise_maximum_choice(preview)
    if preview is not None and _managed(preview):
        blocks.append(context([_managed(preview)]))
    if preview is not None and _can_revert(preview):
        blocks.append(_keep_choice(form, preview))
    return _modal(SCALE_VIEW, form, blocks, submit="Review")


def render_scale_confirm(
    form: ScaleForm, preview: ScalePreview, backend: str, *, about: str
) -> dict[str, Any]:
    """Step two: exactly what will be asked, and of whom; `about` says where it is recorded."""
    target = preview.target
    lines = [
        f"Scale *{escape(form.runner_type)}* by *+{form.delta}* through {escape(backend)} "
        f"(`{truncate(escape(target.target), 200)}`)?",
    ]
    capacity = preview.capacity
    if capacity is not None:
        lines.append(f"Now: {escape(capacity.describe())}.")
        after = _after(form, preview)
        if after:
            lines.append(f"After the scale-up: {after}.")
    else:
        lines.append(f"_{escape(preview.capacity_note)}._")
    lines.append(_undo_line(form, preview))
    blocks = [section("\n".join(line for line in lines if line))]
    if _managed(preview):
        blocks.append(context([_managed(preview)]))
    blocks.append(context([about]))
    return _modal(CONFIRM_VIEW, form, blocks, submit="Scale up")


def _after(form: ScaleForm, preview: ScalePreview) -> str:
    """The value that changes, before → after, named as the thread's reply will name it
    ("minRunners 16 → 21")."""
    capacity = preview.capacity
    if capacity is None:
        return ""
    if form.raise_maximum and capacity.maximum is not None:
        return f"maxRunners {capacity.maximum} → {capacity.maximum + form.delta}"
    if preview.can_raise_maximum and capacity.minimum is not None:
        return f"minRunners {capacity.minimum} → {capacity.minimum + form.delta}"
    if capacity.current is not None:
        return f"{capacity.current} → {capacity.current + form.delta} runners"
    return ""


def _can_revert(preview: ScalePreview) -> bool:
    return preview.revert_after_s is not None and not preview.cannot_undo


def _plan(preview: ScalePreview) -> str:
    after_s = preview.revert_after_s
    if not after_s:
        return f"when {preview.until}"
    return f"when {preview.until} or after {duration(timedelta(seconds=after_s))}"


def _undo_line(form: ScaleForm, preview: ScalePreview) -> str:
    if preview.cannot_undo:
        return f"Cannot be undone: {escape(preview.cannot_undo)}."
    if preview.revert_after_s is None:
        return ""
    if form.keep:
        return "Kept, as you chose." if form.warning else "Kept after the incident, as you chose."
    return f"Put back {_plan(preview)}, unless someone changes it meanwhile."


def _managed(preview: ScalePreview) -> str:
    """The warning that the target's own tool will put its value back anyway: which tool, the
    marking that says so, and what it will do."""
    manager = preview.capacity.managed_by if preview.capacity else None
    if manager is None:
        return ""
    return (
        f"⚠️ This scale set is managed by {escape(manager.describe())}: "
        f"{escape(manager.undoes)}, undoing this scale-up whatever is chosen here."
    )


def _keep_choice(form: ScaleForm, preview: ScalePreview) -> dict[str, Any]:
    after = "the warning" if form.warning else "the incident"
    return {
        "type": "input",
        "block_id": KEEP_BLOCK,
        "optional": True,
        "label": plain(f"After {after}"),
        "hint": plain(f"Unless kept, the scale-up is put back {_plan(preview)}.", 2000),
        "element": {
            "type": "checkboxes",
            "action_id": VALUE,
            "options": [{"text": plain(f"Keep it after {after}"), "value": KEEP}],
        },
    }


def _capacity_line(preview: ScalePreview | None) -> str:
    if preview is None:
        return "Reading the current capacity…"
    if preview.capacity is None:
        return f"_{escape(preview.capacity_note)}_"
    return f"Now: {escape(preview.capacity.describe())}"


def _at_maximum(preview: ScalePreview) -> bool:
    return bool(preview.capacity and preview.capacity.at_maximum and preview.can_raise_maximum)


def _raise_maximum_choice(preview: ScalePreview) -> list[dict[str, Any]]:
    maximum = preview.capacity.maximum if preview.capacity else None
    raise_max = {"text": plain("Raise maxRunners (the ceiling)"), "value": RAISE_MAX}
    return [
        section(
            f"⚠️ This scale set is at its maximum ({maximum} runners): ARC runs "
            "min(minRunners + assigned jobs, maxRunners), so raising minRunners changes nothing."
        ),
        {
            "type": "input",
            "block_id": MODE_BLOCK,
            "label": plain("What to raise"),
            "element": {
                "type": "radio_buttons",
                "action_id": VALUE,
                "options": [
                    raise_max,
                    {"text": plain("Raise minRunners anyway"), "value": RAISE_MIN},
                ],
                "initial_option": raise_max,
            },
        },
    ]


def _option(name: str) -> dict[str, Any]:
    return {"text": plain(name), "value": name}


def _modal(
    callback: str, form: ScaleForm, blocks: list[dict[str, Any]], *, submit: str
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback,
        "title": plain("Scale up", 24),
        "submit": plain(submit, 24),
        "close": plain("Cancel", 24),
        "private_metadata": form.dump(),
        "blocks": blocks,
    }
