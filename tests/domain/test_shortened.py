"""One cut for every text the bot shortens: whole clauses dropped from the end and "…" where they
were; a word is cut within only where it fills more than half the room (an ID, a URL)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.shortened import ELLIPSIS, shortened
from bot.render.mrkdwn import truncate


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("fits", 4, "fits"),
        # The demo's "…at this rate the alert fires a…": the clause is dropped whole.
        (
            "queue building, 6 jobs queued; at this rate the alert fires any minute now",
            60,
            "queue building, 6 jobs queued…",
        ),
        ("one clause with no end in sight at all", 20, "one clause with no…"),
        ("first line\nsecond line goes on", 25, "first line…"),
        ("id " + "x" * 40, 20, "id " + "x" * 16 + ELLIPSIS),
    ],
)
def test_a_cut_drops_whole_clauses(text: str, limit: int, expected: str) -> None:
    assert shortened(text, limit) == expected


WORD = st.text(st.sampled_from("abcdefgh"), min_size=1, max_size=12)
CLAUSE = st.lists(WORD, min_size=1, max_size=8).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(CLAUSE, min_size=1, max_size=8), st.sampled_from(["; ", ", "]), st.integers(1, 120))
def test_a_sentence_is_cut_after_a_clause_else_between_words(
    clauses: list[str], sep: str, limit: int
) -> None:
    text = sep.join(clauses)
    cut = shortened(text, limit)
    assert len(cut) <= limit
    if cut == text:
        return
    kept = cut.removesuffix(ELLIPSIS)
    assert cut.endswith(ELLIPSIS) and text.startswith(kept)
    ends = [len(sep.join(clauses[:k])) for k in range(1, len(clauses))]
    fills = " " not in text[math.ceil((limit - 1) / 2) : limit]  # a word fills the rest
    if kept and not fills:
        assert text[len(kept)] == " " or text[len(kept) :].startswith(sep.strip())
        if any(0 < end <= limit - 1 for end in ends):
            assert len(kept) in ends, (kept, text)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("The queue drained. Its silence ended at resolve", 30, "The queue drained…"),
        ("Scaled up by +6; then put back", 20, "Scaled up by +6…"),
        ("Is it up? Nobody knows yet", 15, "Is it up…"),
        ("at this rate… and then some more", 16, "at this rate…"),
    ],
)
def test_a_cut_after_a_sentence_or_a_clause_ends_in_one_mark(
    text: str, limit: int, expected: str
) -> None:
    assert shortened(text, limit) == expected


_TOKEN = re.compile(r"&(?:amp|lt|gt);|<[^<>]*>")
MARKS = st.sampled_from([". ", ", ", "; ", ": ", "! ", "? ", "… ", "... ", " — ", " · ", " "])
TOKENS = st.sampled_from(["<@U0ALICE>", "<!date^1795859805^{time}|09:56 UTC>", "&amp;", "&lt;"])
PIECES = st.lists(st.one_of(WORD, WORD, TOKENS, MARKS), min_size=1, max_size=30).map("".join)


@settings(max_examples=500, deadline=None)
@given(PIECES, st.integers(1, 160))
def test_a_cut_never_ends_in_a_mark_before_its_ellipsis_nor_within_a_word_or_token(
    text: str, limit: int
) -> None:
    cut = truncate(text, limit)
    assert len(cut) <= limit
    if cut == text:
        return
    kept = cut.removesuffix(ELLIPSIS)
    assert cut.endswith(ELLIPSIS) and text.startswith(kept)
    escape = _TOKEN.search(kept[-5:]) is not None and kept.endswith(";")
    assert escape or not re.search(r"[.,;:!?…]$", kept), cut
    # No token left half: every one the kept text starts is whole in it.
    assert all(
        found.end() <= len(kept)
        for found in _TOKEN.finditer(text, 0, len(kept) + 60)
        if found.start() < len(kept)
    ), cut
    fills = not re.search(
        r"\s", _TOKEN.sub(lambda m: "x" * len(m[0]), text)[math.ceil((limit - 1) / 2) : limit]
    )
    if kept and not fills:
        assert not (kept[-1].isalnum() and text[len(kept)].isalnum()), (cut, text)
