"""An early warning as Slack shows it: every phase valid Block Kit and inert, whatever the runner
type is called (GitHub's runner labels come from any workflow file)."""

from __future__ import annotations

import pytest

from bot.domain.reading.early_warning import Phase, WarningState
from bot.domain.scale.scale_ups import ScaleUp
from bot.render.early_warning import DISMISS, SCALE, render_warning
from bot.render.mrkdwn import escape
from tests.render.test_messages import EVIL, assert_valid

NAME = f"{EVIL}linux.2xlarge" + "x" * 400
THREAD = "https://acme.slack.com/archives/C1/p1795500000000100"


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
        warning(Phase.ACTIVE).changed(1_795_500_400.0, held_since=1_795_500_060.0),
        warning(Phase.CLEARED),
        warning(Phase.FOLDED, incident_id=f"12{EVIL}"),
        warning(Phase.FOLDED, incident_id=f"12{EVIL}", incident_link=f"{THREAD}?a=1&b=<!here>"),
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


def test_a_warning_on_hold_says_since_when_the_fleet_went_unread() -> None:
    held = warning(Phase.ACTIVE).changed(1_795_500_400.0, held_since=1_795_500_060.0)
    text = str(render_warning(held).blocks)
    assert "Early warning, on hold" in text
    assert "No fresh reading of the fleet since <!date^1795500060^" in text
    assert "on hold" not in str(render_warning(warning(Phase.ACTIVE)).blocks)


def test_a_scalable_warning_offers_scale_up_beside_dismiss_for_the_same_warning() -> None:
    state = warning(Phase.ACTIVE).changed(1_795_500_100.0, scalable=True)
    shown = render_warning(state)
    assert_valid(shown)
    [actions] = [b for b in shown.blocks if b["type"] == "actions"]
    assert [e["action_id"] for e in actions["elements"]] == [SCALE, DISMISS]
    assert {e["value"] for e in actions["elements"]} == {f"{state.uid}:{NAME}"[:2000]}


@pytest.mark.parametrize("phase", list(Phase), ids=lambda p: p.value)
def test_what_was_scaled_from_a_warning_stays_on_it_escaped_in_every_phase(phase: Phase) -> None:
    said = f"al{EVIL}ice scaled {NAME} by +6 at 10:02 UTC: minRunners 0 → 6 (ARC)."
    state = warning(phase).changed(
        1_795_500_100.0, scaled=(ScaleUp(runner_type=NAME, added=6, by="", said=said),)
    )
    shown = render_warning(state)
    assert_valid(shown)
    texts = [
        item["text"]
        for block in shown.blocks
        for item in [block.get("text") or {}, *block.get("elements", [])]
        if item.get("type") == "mrkdwn"
    ]
    [line] = [t for t in texts if "by +6 at <!date^" in t]
    assert line.startswith("↗️ al&lt;!channel&gt;"), "escaped"
    assert "^{time}|10:02 UTC>: minRunners" in line, "its time in the reader's zone"


@pytest.mark.parametrize(
    ("incident_id", "incident_link", "said"),
    [
        ("12", "", "incident 12"),
        ("12", THREAD, f"<{THREAD}|incident 12>"),
        # Slack decodes entities in a link's URL too: `&` reaches it as `&amp;`.
        ("12", f"{THREAD}?a=1&b=2", f"<{THREAD}?a=1&amp;b=2|incident 12>"),
        (f"12{EVIL}", THREAD, f"<{THREAD}|incident 12{escape(EVIL).replace('|', '¦')}>"),
        # Anything but a plain http(s) URL stays text: nothing can end the token or forge one.
        ("12", f"{THREAD}|<!channel>", "incident 12"),
        ("12", "javascript:alert(1)", "incident 12"),
    ],
    ids=["no link", "link", "ampersand", "hostile id", "hostile url", "not http"],
)
def test_a_folded_warning_keeps_its_forecast_and_links_the_incident_thread(
    incident_id: str, incident_link: str, said: str
) -> None:
    state = warning(Phase.FOLDED, incident_id=incident_id, incident_link=incident_link)
    shown = render_warning(state)
    assert_valid(shown)
    section, context = shown.blocks
    assert section["text"]["text"] == f"*Early warning* · {escape(state.text)}", "what it said"
    line = context["elements"][0]["text"]
    assert line.startswith(
        f"🔔 The alert fired: {said} carries it on (warned at <!date^1795500000^"
    )
    assert line.endswith(">).")
