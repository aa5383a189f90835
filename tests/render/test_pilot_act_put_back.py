"""The pilot's act in the thread once its record ended: Block Kit has no disabled button, so its
Undo and Pause pilot (and the Undo's confirm, which offered to put it back) give way to a line
saying what became of it; its own words and what came of its runners stay above that line."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from bot.actions.scale import made
from bot.backends.scale import Undo
from bot.domain.incident.incidents import PILOT, Event
from bot.domain.scale.scale_ups import Outcome
from bot.render.replies import render_act, render_event, render_outcome
from tests.support.store import incident

AT = datetime(2026, 11, 24, 14, 2, tzinfo=UTC)
TEXT = "queuepilot (policy) scaled linux by +6: +6 wanted for 2 min; maxRunners 20 → 26 (ARC)"
DETAIL = "· It goes back when the incident resolves or after 4 h, unless someone changes it."
FATE = "Put back at 14:20 UTC: nothing to undo"
CAME = "✅ +6 on linux at 14:02 UTC: 6 registered by 14:04 UTC, all busy"


def act(**changes: object) -> Event:
    done = made("linux", 6, PILOT, AT, Undo("maxRunners", 20, 26), pilot=True)
    done = done.model_copy(update={"reply": 3, "detail": DETAIL, **changes})
    return Event(at=AT, kind="scaled", text=TEXT, actor_name=PILOT, scale=done)


def said(blocks: list[dict[str, object]]) -> str:
    return json.dumps(blocks, ensure_ascii=False)


def test_an_act_put_back_shows_why_in_place_of_its_buttons() -> None:
    going = render_event(incident("1"), act()).blocks
    assert [b["type"] for b in going] == ["section", "actions"], "its buttons while it stands"
    assert "pilot_undo" in said(going) and "pilot_pause" in said(going)
    blocks = render_event(incident("1"), act(fate=FATE)).blocks
    assert [b["type"] for b in blocks] == ["section", "context"], blocks
    shown = said(blocks)
    assert "pilot_undo" not in shown and "pilot_pause" not in shown and "confirm" not in shown
    [line] = blocks[-1]["elements"]  # type: ignore[index]
    stamp = int(datetime(2026, 11, 24, 14, 20, tzinfo=UTC).timestamp())
    assert line["text"] == f"↩️ Put back at <!date^{stamp}^{{time}}|14:20 UTC>: nothing to undo"


def test_its_reply_edited_at_the_put_back_keeps_its_words_and_what_came_of_it() -> None:
    rendered = render_act(incident("1"), act(fate=FATE, came_said=CAME, came=True))
    blocks = rendered.blocks
    assert [b["type"] for b in blocks] == ["section", "section", "context"], blocks
    shown = said(blocks)
    assert TEXT in shown and DETAIL in shown, "its own line, as posted"
    assert "6 registered by <!date^" in shown and "all busy" in shown, "what came of it"
    assert "pilot_undo" not in shown
    assert rendered.text == f"Incident 1: {TEXT}"


def test_an_outcome_said_after_the_put_back_goes_above_the_line_that_ends_it() -> None:
    """A follow-up that decides after the record ended (its deadline came first) edits the reply
    without bringing its buttons back."""
    scaled = act(fate=FATE)
    outcome = Outcome(None, AT + timedelta(minutes=10), why="no reading counted them")
    blocks = render_outcome(incident("1"), scaled, DETAIL, outcome, edit=True).blocks
    assert [b["type"] for b in blocks] == ["section", "section", "context"], blocks
    assert "pilot_undo" not in said(blocks) and "Put back at" in said(blocks)
