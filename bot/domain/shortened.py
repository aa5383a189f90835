"""Text cut to a limit the way a person would shorten it: whole clauses dropped from the end, and
"…" where they were, so what is left is true as far as it goes. Every cut in the bot's text."""

from __future__ import annotations

import re

ELLIPSIS = "…"
# Where a clause ends, before a space: "; ", ", ", ": ", ". ", ") ", " · ", " — ".
CLAUSE_ENDS = frozenset(".,;:)·—–")
_DROPPED = frozenset(",;:·—–")  # a clause's end said by "…" instead
# What a cut must not end on, before its "…" (an escape's ";" stays): a sentence's stop too, as
# "…" says where the rest was and "done.…" reads as a stumble.
_DANGLING = re.compile(r"(?<!&amp)(?<!&lt)(?<!&gt)[\s.,;:!?…·\-–—(\"']+$")


def shortened(text: str, limit: int, whole: re.Pattern[str] | None = None) -> str:
    """`text` within `limit` characters, "…" where it was cut: after its last clause that fits,
    else its last word; only a word filling more than half the room (an ID, a URL) is cut within.
    A match of `whole` (an escape, a Slack token) is never cut."""
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 0)
    for span in whole.finditer(text) if whole is not None else ():
        if span.start() >= room:
            break
        if span.end() > room:
            room = span.start()
            break
    # Two more characters: whether the cut falls on a space, or on a clause's "; " dropped whole.
    seen = text[: room + 2]
    if whole is not None:
        seen = whole.sub(lambda span: "x" * len(span[0]), seen)
    spaces = [m.start() for m in re.finditer(r"\s", seen)]
    clauses = [end for at in spaces if (end := _clause_end(seen, at)) is not None and end <= room]
    spaces = [at for at in spaces if at <= room]
    # One word filling the rest is cut within: before it, little but "…" would be left.
    filled = not [at for at in spaces if at >= room / 2]
    at = room if filled else (clauses or spaces)[-1]
    return _DANGLING.sub("", text[:at]) + ELLIPSIS


def _clause_end(seen: str, at: int) -> int | None:
    """Where a clause ends before the space at `at`, its "," or ";" left out; None where the
    space is within one. A line break ends one."""
    if seen[at] == "\n":
        return at
    before = at - 2 if seen[at - 1 : at] == "\n" else at - 1
    mark = seen[before : before + 1]
    if mark not in CLAUSE_ENDS:
        return None
    return before if mark in _DROPPED else at


def one_line(value: object, cap: int | None = None) -> str:
    """Outside text on one line (a line break in a name would forge a line where it is said), at
    most `cap` characters; what is no text, ""."""
    return " ".join(value.split())[:cap] if isinstance(value, str) else ""
