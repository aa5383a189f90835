"""An early warning as Slack shows it: one quiet channel message per runner type, edited in place
as the forecast moves, and when it ends (cleared, the alert fired, dismissed). What was scaled
from it, and what became of that, stays on it in every phase. Once the alert fired, it keeps what
it last said and links the incident's thread, where the story goes on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.domain.early_warning import Phase, WarningState
from bot.domain.message import Rendered
from bot.render.mrkdwn import (
    context,
    escape,
    link,
    plain,
    rendered,
    section,
    slack_date,
    truncate,
)

DISMISS = "warning_dismiss"
SCALE = "warning_scale"
DISMISS_FOR_S = 3600
MAX_VALUE = 2000  # Slack's limit for a button's value
MAX_ID = 100  # of an incident's ID, in a link's label: the link must fit its line whole


def dismiss_value(state: WarningState) -> str:
    """The warning's uid and runner type, on both its buttons: a button of an older warning
    never acts on a newer one of the same type (the uid is checked); the type fits whole or not
    at all."""
    return f"{state.uid}:{state.runner_type}"[:MAX_VALUE]


def render_warning(state: WarningState) -> Rendered:
    name = truncate(escape(state.runner_type), 200)
    warned = slack_date(datetime.fromtimestamp(state.warned_at, UTC), "{time}")
    said = truncate(escape(state.text), 1500)
    if state.phase is Phase.ACTIVE:
        if state.held_since:
            since = slack_date(datetime.fromtimestamp(state.held_since, UTC), "{time}")
            head = f"⌛ *Early warning, on hold* · {said}"
            note = (
                f"No fresh reading of the fleet since {since}: this forecast waits until it can "
                "be read again."
            )
        else:
            head = f"⏳ *Early warning* · {said}"
            note = (
                f"From the fleet's readings, updated "
                f"{slack_date(datetime.fromtimestamp(state.updated_at, UTC), '{time}')}; "
                "withdrawn if the queue stops building, carried on by the incident if the "
                "alert fires."
            )
        buttons = [_button("Dismiss for 1 h", DISMISS, state)]
        if state.scalable:
            buttons.insert(0, _button("Scale up…", SCALE, state))
        blocks: list[dict[str, Any]] = [
            section(head),
            context([note, *_scaled(state)]),
            {"type": "actions", "block_id": "early_warning", "elements": buttons},
        ]
        return rendered(f"Early warning: {said}", blocks)
    if state.phase is Phase.FOLDED:
        return _folded(state, said, warned)
    if state.phase is Phase.DISMISSED:
        until = slack_date(datetime.fromtimestamp(state.until, UTC), "{time}")
        line = (
            f"🔕 Early warning · {name}: dismissed by {truncate(escape(state.by), 100)} until "
            f"{until} (warned at {warned})."
        )
    else:
        line = f"✅ Early warning · {name}: no longer building (warned at {warned})."
    return rendered(line, [context([line, *_scaled(state)])])


def _folded(state: WarningState, said: str, warned: str) -> Rendered:
    """What the warning said when the alert fired, and where the incident carries it on: its
    thread, linked once the upkeep knows it (`WarningState.incident_link`; `link` keeps anything
    but a plain http(s) URL as text)."""
    # No "|" in a link's label: Slack ends the URL at the first, and one more makes the token
    # read two ways.
    label = f"incident {state.incident_id[:MAX_ID]}".replace("|", "¦")
    incident = link(state.incident_link, label)
    line = f"🔔 The alert fired: {incident} carries it on (warned at {warned})."
    blocks = [section(f"*Early warning* · {said}"), context([line, *_scaled(state)])]
    return rendered(f"Early warning: {said}\n{line}", blocks)


def _scaled(state: WarningState) -> list[str]:
    return [f"↗️ {truncate(escape(state.scaled), 1000)}"] if state.scaled else []


def _button(label: str, action_id: str, state: WarningState) -> dict[str, Any]:
    return {
        "type": "button",
        "text": plain(label),
        "action_id": action_id,
        "value": dismiss_value(state),
    }
