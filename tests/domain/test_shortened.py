"""One cut for every text the bot shortens: whole clauses dropped from the end and "…" where they
were; a word is cut within only where it fills more than half the room (an ID, a URL)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.shortened import ELLIPSIS, shortened


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
