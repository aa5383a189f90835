"""Who works an incident and what was done, on its root: the owner, the responders, the latest
actions as a short list that never ends mid-word, and the likely cause once diagnostics ran."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.incident.incidents import Event, Incident, acknowledge, diagnosed, with_action
from bot.domain.shortened import ELLIPSIS
from bot.render.mrkdwn import escape, truncate
from bot.render.root import render_root
from tests.render.test_messages import EVIL, assert_valid, texts_of
from tests.support.incidents import T0, make_incident

ISSUE_TEXT = (
    "Scaled linux.2xlarge by +5: minRunners 0 → 5 (ARC). It goes back when the incident "
    "resolves or after 4 h, unless someone changes it meanwhile"
)
HAND_OVER = (
    "Took on the early warning's scale-up of linux by alice (minRunners 0 → 5): it goes back "
    "when the incident resolves or after 4 h, unless someone changes it meanwhile"
)


def acted(incident: Incident, *actions: tuple[str, str, str]) -> Incident:
    """The incident after each (user, name, text) action, a minute apart."""
    for i, (user, name, text) in enumerate(actions):
        at = T0 + timedelta(minutes=i + 1)
        event = Event(at=at, kind="scaled", text=text, actor=user or None, actor_name=name)
        incident = with_action(incident, event)
    return incident


def owned(incident: Incident, user: str, name: str) -> Incident:
    now = T0 + timedelta(minutes=30)
    event = Event(at=now, kind="acknowledged", text="Acknowledged", actor=user, actor_name=name)
    return with_action(acknowledge(incident, by=user, name=name, now=now), event)


def status_text(incident: Incident, *, mentions: bool = True) -> str:
    return str(render_root(incident, now=T0, mentions=mentions).blocks[1]["text"]["text"])


def latest_text(incident: Incident) -> str:
    blocks = render_root(incident, now=T0).blocks
    shown = [t for b in blocks if b["type"] == "context" for t in texts_of(b)]
    return next(t for t in shown if t.startswith("*Latest*"))


def action_texts(latest: str) -> list[str]:
    """Each listed action's text: between its time and "by" (or the line's end)."""
    lines = latest.split("\n")[1:]
    return [re.sub(r"^• <!date[^>]*> | by \*[^*]*\*$", "", line) for line in lines]


ALICE = ("U0ALICE", "alice", "Silenced for 1 h in Alertmanager")
BOB = ("U0BOB", "bob", "Scaled linux by +5")


@pytest.mark.parametrize(
    ("incident", "expected"),
    [
        (make_incident(), "🔴 *Firing* · not acknowledged · ID *12*"),
        (
            acted(
                make_incident(), ALICE, ("U0ALICE", "alice", "Scaled"), ("U0ALICE", "alice", "D")
            ),
            "🔴 *Firing* · not acknowledged · ID *12*\nResponders: *alice*",
        ),
        (
            acted(make_incident(), BOB, ALICE, BOB),
            "🔴 *Firing* · not acknowledged · ID *12*\nResponders: *bob*, *alice*",
        ),
        (
            owned(acted(make_incident(), ALICE), "U0ALICE", "alice"),
            "🔴 *Firing* · acknowledged by <@U0ALICE> · ID *12*",
        ),
        (
            owned(acted(make_incident(), BOB, ALICE), "U0ALICE", "alice"),
            "🔴 *Firing* · acknowledged by <@U0ALICE> · ID *12*\nResponders: *bob*",
        ),
        (
            owned(owned(make_incident(), "U0ALICE", "alice"), "U0BOB", "bob"),
            "🔴 *Firing* · acknowledged by <@U0BOB> · ID *12*\nResponders: *alice*",
        ),
        (
            acted(make_incident(), *[(f"U{i}", f"p{i}", "Scaled") for i in range(8)]),
            "🔴 *Firing* · not acknowledged · ID *12*\nResponders: *p0*, *p1*, *p2*, *p3*, *p4* +3",
        ),
        (
            acted(make_incident(), ("", "", HAND_OVER)),
            "🔴 *Firing* · not acknowledged · ID *12*",
        ),
    ],
    ids=[
        "nobody",
        "one-person-three-actions",
        "in-order-of-first-action",
        "the-owner-is-not-a-responder",
        "owner-and-responder",
        "taken-over-from",
        "past-five",
        "the-bot-is-nobody",
    ],
)
def test_the_status_names_the_owner_and_the_responders(incident: Incident, expected: str) -> None:
    assert status_text(incident) == expected


def test_responders_are_named_without_a_ping_even_where_the_owner_is_mentioned() -> None:
    incident = owned(acted(make_incident(), BOB), "U0ALICE", "alice")
    assert status_text(incident).endswith("\nResponders: *bob*")
    assert "<@U0BOB>" not in str(render_root(incident, now=T0).blocks)


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ([ALICE], ["Silenced for 1 h in Alertmanager"]),
        (
            [ALICE, BOB, ("U0ALICE", "alice", "Diagnostics: likely cause not determined")],
            [
                "Diagnostics: likely cause not determined",
                "Scaled linux by +5",
                "Silenced for 1 h in Alertmanager",
            ],
        ),
        (
            [ALICE, BOB, ALICE, ("U0BOB", "bob", "Resolved manually")],
            ["Resolved manually", "Silenced for 1 h in Alertmanager", "Scaled linux by +5"],
        ),
        (
            [("U0ALICE", "alice", ISSUE_TEXT)],
            [
                "Scaled linux.2xlarge by +5: minRunners 0 → 5 (ARC). It goes back when the "
                "incident resolves or after 4 h…"  # after the clause, not "…, unless…"
            ],
        ),
        (
            [("", "", HAND_OVER)],
            ["Took on the early warning's scale-up of linux by alice (minRunners 0 → 5)…"],
        ),
        # A word filling most of the room is cut within it.
        (
            [("U1", "x", "a<b> & <!here> " + "c" * 300)],
            [escape("a<b> & <!here> " + "c" * 104) + "…"],
        ),
    ],
    ids=["one", "three-newest-first", "at-most-three", "long", "by-the-bot", "hostile"],
)
def test_the_latest_actions_are_a_short_list_newest_first(
    actions: list[tuple[str, str, str]], expected: list[str]
) -> None:
    latest = latest_text(acted(make_incident(), *actions))
    assert action_texts(latest) == expected
    assert all(line.startswith("• <!date^") for line in latest.split("\n")[1:])


def test_each_latest_action_says_who_did_it_and_the_bot_says_nothing() -> None:
    latest = latest_text(acted(make_incident(), BOB, ("", "", HAND_OVER)))
    first, second = latest.split("\n")[1:]
    assert not first.endswith("*"), "the hand-over names alice in its own words"
    assert second.endswith(" by *bob*")


def test_the_likely_cause_is_shown_escaped_and_replaced_by_a_newer_diagnosis() -> None:
    incident = diagnosed(make_incident(), "Listener stalled (high confidence): linux <!here>")
    texts = list(texts_of(render_root(incident, now=T0).blocks))
    assert "🩺 *Likely cause:* Listener stalled (high confidence): linux &lt;!here&gt;" in texts
    newer = list(texts_of(render_root(diagnosed(incident, "not determined"), now=T0).blocks))
    assert "🩺 *Likely cause:* not determined" in newer
    assert not any("Listener stalled" in t for t in newer)
    assert not any("Likely cause" in t for t in texts_of(render_root(make_incident(), now=T0)))


def hostile_worked_on() -> Incident:
    people = [(f"U{i}", EVIL * 20, (EVIL * 100)[: 900 + i]) for i in range(12)]
    incident = acted(make_incident(), *people)
    return diagnosed(owned(incident, EVIL, EVIL), (EVIL * 200)[:5000])


def test_a_hostile_worked_on_root_stays_valid_and_inert() -> None:
    for mentions in (True, False):
        assert_valid(render_root(hostile_worked_on(), now=T0, mentions=mentions))


WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)


def _ends_mid_word(kept: str, line: str) -> bool:
    """Whether `kept` (a shortened `line` without its "…") stops inside one of its words."""
    return bool(kept) and kept[-1].isalnum() and line[len(kept)].isalnum()


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(
        st.one_of(st.text(max_size=400), st.lists(WORDS, max_size=60).map(" ".join)),
        min_size=1,
        max_size=5,
    ),
    names=st.lists(st.text(max_size=200), min_size=5, max_size=5),
)
def test_latest_lines_never_end_mid_word_and_stay_within_limits(
    texts: list[str], names: list[str]
) -> None:
    incident = acted(make_incident(), *[(f"U{i}", names[i], text) for i, text in enumerate(texts)])
    root = render_root(incident, now=T0)
    assert_valid(root)
    latest = latest_text(incident)
    lines = latest.split("\n")[1:]
    assert len(lines) == min(len(texts), 3)
    assert len(latest) <= 3000
    for text, shown in zip(reversed(texts[-3:]), lines, strict=True):
        line = " ".join(text.split())
        short = truncate(line, 120)
        assert f"> {escape(short)}" in shown and len(short) <= 120
        if short == line:
            continue
        kept = short.removesuffix(ELLIPSIS)
        assert short.endswith(ELLIPSIS) and line.startswith(kept)
        # A word filling more than half the room is cut within it: "…" would say nothing.
        if re.search(r"\s", line[59:120]):
            assert not _ends_mid_word(kept, line), (kept, line)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("changes it meanwhile", 100, "changes it meanwhile"),
        ("unless someone changes it meanwhile", 20, "unless someone…"),
        ("unless someone changes", 16, "unless someone…"),
        ("a,  b\n\tc", 10, "a, b c"),
        ("goes back (ARC): it stays", 18, "goes back (ARC)…"),
        ("one, two three", 11, "one…"),
        ("one, two three", 8, "one…"),
        ("x" * 50, 20, "x" * 19 + ELLIPSIS),
        ("it fell, and more words follow", 26, "it fell…"),
        ("at this rate the alert fires any minute now", 32, "at this rate the alert fires…"),
        ("the queue fell 3.0 jobs/min, clears soon", 36, "the queue fell 3.0 jobs/min…"),
    ],
)
def test_truncate_cuts_after_a_clause_else_between_words(
    text: str, limit: int, expected: str
) -> None:
    assert truncate(" ".join(text.split()), limit) == expected


def test_an_incident_stored_before_responders_loads_without_them() -> None:
    stored: dict[str, Any] = make_incident().model_dump(mode="json")
    del stored["actions"], stored["likely_cause"]
    incident = Incident.model_validate(stored)
    assert incident.responders == () and incident.cause.said == ""
    assert status_text(incident) == "🔴 *Firing* · not acknowledged · ID *12*"
