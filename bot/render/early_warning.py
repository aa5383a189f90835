"""An early warning as Slack shows it: one quiet channel message per runner type, edited in place
as the forecast moves and when it ends; what was scaled from it stays on it in every phase."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.domain.message import Rendered
from bot.domain.reading.early_warning import Phase, WarningState, scaled_words, warning_acts
from bot.domain.scale.pilot import WARNING_REF
from bot.render import mrkdwn as md
from bot.render.replies import pilot_buttons

DISMISS = "warning_dismiss"
SCALE = "warning_scale"
DISMISS_FOR_S = 3600
MAX_ID = 100  # of an incident's ID, in a link's label: the link must fit its line whole


def _at(timestamp: float) -> str:
    return md.time_of(datetime.fromtimestamp(timestamp, UTC))


def render_warning(state: WarningState) -> Rendered:
    name, said = md.escaped(state.runner_type, 200), md.escaped(state.text, 1500)
    warned = _at(state.warned_at)
    updated = datetime.fromtimestamp(state.updated_at, UTC)
    words = md.in_zone(md.escaped(scaled_words(state.scaled), 1000), updated)
    scaled = [f"↗️ {words}"] if state.scaled else []
    if state.would:  # a dry-run pilot's acts: nothing was scaled
        acts = ", ".join(f"+{n} at {_at(at)}" for at, n in state.would)
        scaled.append(f"🧪 Dry run: the pilot would have scaled {name} by {acts}")
    if state.phase is Phase.ACTIVE:
        if state.held_since:
            head = f"⌛ *Early warning, on hold* · {said}"
            note = (
                f"No fresh reading of the fleet since {_at(state.held_since)}: this forecast "
                "waits until it can be read again."
            )
        else:
            head = f"⏳ *Early warning* · {said}"
            note = (
                f"From the fleet's readings, updated {md.time_of(updated)}; withdrawn if the "
                "queue stops building, carried on by the incident if the alert fires."
            )
        # The uid, so a button of an older warning never acts on a newer one of the same type.
        value = f"{state.uid}:{state.runner_type}"[: md.MAX_BUTTON_VALUE]
        buttons = [md.button("Scale up…", SCALE, value)] if state.scalable else []
        buttons.append(md.button("Dismiss for 1 h", DISMISS, value))
        blocks = [
            md.section(head),
            md.context([note, *scaled]),
            md.actions(buttons, "early_warning"),
            *_pilot_act(state),
        ]
        return md.rendered(f"Early warning: {said}", blocks)
    if state.phase is Phase.FOLDED:
        # The incident's thread is linked once the upkeep knows it.
        label = md.link_label(f"incident {state.incident_id[:MAX_ID]}")
        line = f"🔔 The alert fired: {md.link(state.incident_link, label)} carries it on "
        line += f"(warned at {warned})."
        blocks = [md.section(f"*Early warning* · {said}"), md.context([line, *scaled])]
        return md.rendered(f"Early warning: {said}\n{line}", blocks)
    if state.phase is Phase.DISMISSED:
        line = (
            f"🔕 Early warning · {name}: dismissed by {md.escaped(state.by, 100)} until "
            f"{_at(state.until)} (warned at {warned})."
        )
    else:
        line = f"✅ Early warning · {name}: no longer building (warned at {warned})."
    return md.rendered(line, [md.context([line, *scaled]), *_pilot_act(state)])


def _pilot_act(state: WarningState) -> list[dict[str, Any]]:
    """Undo and Pause pilot under the pilot's last act while it can be put back."""
    acts = warning_acts(state)
    last = acts[-1] if acts else None
    if last is None or last.at is None or not last.back or last.undone:
        return []
    return [pilot_buttons(f"{WARNING_REF}{state.uid}", last, last.at)]
