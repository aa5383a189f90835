"""Whole numbers people type or send back: a command's `+4` and `2h`, a modal's amount, a select's
seconds.

Python's `int()` reads more than a person means and fails on what they may send: it takes
Arabic-Indic and other Unicode digits (`int('١٢') == 12`) and underscores, refuses digits that
`str.isdigit` accepts (`'²'`), and raises `ValueError` past 4,300 digits. `ascii_whole` reads
ASCII digits only and never converts more digits than its cap needs, so any text gives a number
or None, and a caller's bounds check says what was wrong.
"""

from __future__ import annotations

import re

_ASCII_DIGITS = re.compile(r"[0-9]+")


def ascii_whole(text: str, cap: int) -> int | None:
    """`text` as a whole number if it is ASCII digits only, at most `cap` (anything larger,
    however many digits, is `cap`); None for anything else."""
    if not _ASCII_DIGITS.fullmatch(text):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(cap)):
        return cap
    return min(int(digits), cap)
