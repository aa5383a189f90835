"""An early warning as Slack shows it: every phase valid Block Kit and inert, whatever the runner
type is called (GitHub's runner labels come from any workflow file)."""

from __future__ import annotations

import pytest

from bot.domain.early_warning import Phase, WarningState
from bot.render.early_warning import DISMISS, render_warning
from tests.render.test_messages import EVIL, assert_valid

NAME = f"{EVIL}linux.2xlarge" + "x" * 400


def warning(phase: Phase, **more: object) -> WarningState:
    text = f"{NAME}: queue building, 9 queued and +1.4/min; at this rate the alert fires in ~11 min"
    state = WarningState.raised(NAME, "C1", text, 1_795_500_000.0)
    return (
        state.changed(1_795_500_060.0, phase=phase, **more) if phase is not Phase.ACTIVE else state
    )


@pytest.mark.parametrize(
    "state",
    [
        warning(Phase.ACTIVE),
        warning(Phase.CLEARED),
        warning(Phase.FOLDED, incident_id=f"12{EVIL}"),
        warning(Phase.DISMISSED, by=f"al{EVIL}", until=1_795_503_600.0),
    ],
    ids=lambda s: s.phase.value,
)
def test_every_phase_is_valid_and_inert(state: WarningState) -> None:
    shown = render_warning(state)
    assert_valid(shown)
    buttons = [e for b in shown.blocks if b["type"] == "actions" for e in b["elements"]]
    if state.phase is Phase.ACTIVE:
        [button] = buttons
        assert button["action_id"] == DISMISS and state.uid in button["value"]
    else:
        assert buttons == [], "an ended warning has nothing to click"
