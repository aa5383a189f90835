"""How long a silence made from Slack may last: one rule for `/queue silence <duration>` and the
root's silence select, so the two cannot drift apart."""

from __future__ import annotations

MIN_SILENCE_S = 60
MAX_SILENCE_S = 7 * 86_400


def is_silence_length(seconds: int) -> bool:
    return MIN_SILENCE_S <= seconds <= MAX_SILENCE_S
