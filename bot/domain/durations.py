"""Durations as people write them, one syntax everywhere: `30s`, `10m`, `4h`, `1d`, `1h30m`.

`/queue silence 2h`, the root's silence select and every duration setting read the same way, so
what works in one place works in the others. How long a silence made from Slack may last is one
rule here too, for the command and the select alike.
"""

from __future__ import annotations

import re

from bot.domain.whole_numbers import ascii_whole

MIN_SILENCE_S = 60
MAX_SILENCE_S = 7 * 86_400
# Each part is capped just past a century, so thousands of digits read as "too long", not a
# crash or a number nobody meant.
_PART_CAP = 100 * 365 * 86_400
_SPAN = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
_SECONDS_PER = (86_400, 3600, 60, 1)


def is_silence_length(seconds: int) -> bool:
    return MIN_SILENCE_S <= seconds <= MAX_SILENCE_S


def span_seconds(text: str) -> int | None:
    """`1d`, `4h`, `1h30m`, `90s`, `2H` -> seconds; None for anything else (a bare number
    included: what its unit is depends on where it is written)."""
    match = _SPAN.fullmatch(text.strip().lower())
    if match is None or not any(match.groups()):
        return None
    parts = (ascii_whole(g or "0", _PART_CAP) or 0 for g in match.groups())
    return sum(part * unit for part, unit in zip(parts, _SECONDS_PER, strict=True))
