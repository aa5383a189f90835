"""Slack's limits as the emulator enforces them: payload size and shape, and call rates.

Kept apart from the workspace because they judge a request before it changes anything: a
handler validates blocks and content first, and the HTTP layer asks for a rate-limit token
before dispatching at all.
"""

from __future__ import annotations

import time
from typing import Any

from slack_sdk.models.blocks import Block

from bot.sandbox.slack_model import SlackError

MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_TEXT_CHARS = 40_000

# (burst, sustained calls per second) per (method, channel), mirroring Slack's documented
# "1 message per second per channel" special limit and Tier 3 (50/min) for chat.update.
RATE_LIMITS: dict[str, tuple[int, float]] = {
    "chat.postMessage": (3, 1.0),
    "chat.update": (5, 50 / 60),
}


class TokenBucket:
    """Classic token bucket: `burst` immediate calls, then `per_second` refill."""

    def __init__(self, burst: int, per_second: float) -> None:
        self._capacity = float(burst)
        self._rate = per_second
        self._tokens = float(burst)
        self._updated = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        elapsed = now - self._updated
        self._tokens = min(self._capacity, self._tokens + elapsed * self._rate)
        self._updated = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class RateLimiter:
    """One bucket per (method, channel) for the methods in RATE_LIMITS; other calls are free."""

    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def allow(self, method: str, channel_id: str) -> bool:
        limits = RATE_LIMITS.get(method)
        if limits is None:
            return True
        bucket = self._buckets.setdefault((method, channel_id), TokenBucket(*limits))
        return bucket.take()

    def reset(self) -> None:
        self._buckets.clear()


def validate_blocks(blocks: object, *, limit: int = MAX_MESSAGE_BLOCKS) -> list[str]:
    """Return Slack-style error strings for `blocks`; empty means valid.

    slack_sdk's own models carry Slack's length/count rules, so reusing them keeps the
    emulator as strict as the real API without duplicating the rulebook.
    """
    if not isinstance(blocks, list):
        return ["[ERROR] blocks must be an array [json-pointer:/blocks]"]
    if len(blocks) > limit:
        return [f"[ERROR] no more than {limit} items allowed [json-pointer:/blocks]"]
    errors = []
    for index, block in enumerate(blocks):
        problem = _block_problem(block)
        if problem is not None:
            errors.append(f"[ERROR] {problem} [json-pointer:/blocks/{index}]")
    return errors


def _block_problem(block: object) -> str | None:
    if not isinstance(block, dict):
        return "block must be an object"
    try:
        parsed = Block.parse(dict(block))
        if parsed is None:
            return f"unsupported block type {block.get('type')!r}"
        parsed.validate_json()
        # to_dict() validates nested elements (buttons, text objects) too.
        parsed.to_dict()
    except Exception as exc:  # the SDK raises several types for malformed input
        return str(exc) or type(exc).__name__
    return None


def check_content(text: str, blocks: list[dict[str, Any]] | None, *, has_other: bool) -> None:
    """Apply chat.* content rules: something to show, not too long, valid blocks."""
    if not text and not blocks and not has_other:
        raise SlackError("no_text")
    if len(text) > MAX_TEXT_CHARS:
        raise SlackError("msg_too_long")
    if blocks is not None:
        errors = validate_blocks(blocks)
        if errors:
            raise SlackError("invalid_blocks", extra={"errors": errors})
