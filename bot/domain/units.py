"""Quantities as people read them ("14", "18 min", "▲ +12 min") and type them (`2h`, `1h30m`):
one syntax everywhere."""

from __future__ import annotations

import math
import re
from datetime import timedelta

MIN_SILENCE_S = 60
MAX_SILENCE_S = 7 * 86_400
# Each part of a span is capped just past a century, so thousands of digits read as "too long".
_PART_CAP = 100 * 365 * 86_400
_SPAN = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_SECONDS_PER = (86_400, 3600, 60, 1)
_ASCII_DIGITS = re.compile(r"[0-9]+")


def number(value: float) -> str:
    """ "14", "2.5"."""
    if not math.isfinite(value):
        return str(value)
    rounded = round(float(value), 1)
    return str(int(rounded)) if rounded.is_integer() else f"{rounded:.1f}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def minutes(value: float) -> str:
    """ "16 min", "2.5 min": a tenth of a minute tells something under ten minutes, never above."""
    shown = round(value) if math.isfinite(value) and abs(value) >= 10 else value
    return f"{number(shown)} min"


def duration(span: timedelta) -> str:
    """ "45 s", "18 min", "1 h 18 min", "2 d 3 h"; negative spans count as 0."""
    total = max(int(span.total_seconds()), 0)
    if total < 60:
        return f"{total} s"
    days, rest = divmod(total // 60, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {mins} min" if mins else f"{hours} h"
    return f"{mins} min"


def change(current: float | None, previous: float | None, unit: str = "") -> str | None:
    """ "▲ +12 min", "▼ -3", "no change"; None if unknown."""
    if current is None or previous is None:
        return None
    diff = number(current - previous)
    if diff == "0":
        return "no change"
    suffix = f" {unit}" if unit else ""
    return f"▼ {diff}{suffix}" if diff.startswith("-") else f"▲ +{diff}{suffix}"


def ascii_whole(text: str, cap: int) -> int | None:
    """`int()` takes other Unicode digits and `_` and raises past 4,300 digits: this does not."""
    if not _ASCII_DIGITS.fullmatch(text):
        return None
    digits = text.lstrip("0") or "0"
    return cap if len(digits) > len(str(cap)) else min(int(digits), cap)


def is_silence_length(seconds: int) -> bool:
    return MIN_SILENCE_S <= seconds <= MAX_SILENCE_S


def span_seconds(text: str) -> int | None:
    """`1d`, `4h`, `1h30m`, `90s` -> seconds; None for a bare number (its unit depends on where
    it is written) or anything else."""
    match = _SPAN.fullmatch(text.strip().lower())
    if match is None or not any(match.groups()):
        return None
    parts = (ascii_whole(g or "0", _PART_CAP) or 0 for g in match.groups())
    return sum(part * unit for part, unit in zip(parts, _SECONDS_PER, strict=True))
