"""Slack's limits as the emulator enforces them: payload size and shape, and call rates.

Kept apart from the workspace because they judge a request before it changes anything: a
handler validates blocks and content first, and the HTTP layer asks for a rate-limit token
before dispatching at all.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.models.blocks import Block, BlockElement

from sandbox import slack_charts
from sandbox.slack_model import SlackError, invalid_blocks

MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
# views.publish's `view_too_large`: "the provided view is greater than 250kb".
MAX_VIEW_BYTES = 250_000
# Slack's method pages ask for at most 4,000 characters of `text`, and Slack now answers
# `msg_too_long` past about that: "the 40K truncation is an old requirement and the platform
# now has a smaller limit for the text data. If your app generates 4K text, indeed posting the
# message could result in the error" (seratch, slack_sdk's maintainer, ChatGPT-in-Slack#102,
# 2024-10); chat.update refusing ~4K text with msg_too_long: geppetto#37, archive-slackblast#64.
# The 2018 changelog's 40,000-character truncation (with a `message_truncated` warning) is the
# older rule. The stricter bound keeps the bot inside what Slack accepts.
MAX_TEXT_CHARS = 4_000

# (burst, sustained calls per second), mirroring Slack's documented "1 message per second per
# channel" special limit for chat.postMessage, Tier 3 (50/min) for chat.update and Tier 4
# (100+/min) for views.publish, which like every tier is counted "per API method per workspace
# per app": one bucket for the whole app.
RATE_LIMITS: dict[str, tuple[int, float]] = {
    "chat.postMessage": (3, 1.0),
    "chat.update": (5, 50 / 60),
    "views.publish": (5, 100 / 60),
}
PER_CHANNEL = frozenset({"chat.postMessage"})

HISTORY_METHODS = ("conversations.history", "conversations.replies")


@dataclass(frozen=True)
class HistoryTier:
    """How Slack serves `conversations.history` and `.replies` to an app.

    Since 2025-05-29 a commercially distributed app that is not in the Marketplace gets them at
    Tier 1: about one call a minute per method (app-wide), at most 15 messages a call (`limit`
    default and maximum 15). Internal, customer-built apps (the usual self-hosted install) and
    Marketplace apps keep Tier 3: about 50 calls a minute, `conversations.history` returning
    100 by default and at most 999, `conversations.replies` up to 1,000 (Slack changelog
    2025-05-29 "rate limit changes for non-Marketplace apps" and its 2025-06-03 clarification).
    """

    calls: int  # per interval, per method, app-wide
    always: bool  # enforced even when the emulator's `enforce_rate_limits` is off
    pages: Mapping[str, tuple[int, int]]  # method -> (default `limit`, largest `limit`)
    interval_s: float = 60.0

    @classmethod
    def of(cls, tier: int, *, interval_s: float = 60.0) -> HistoryTier:
        """Tier 1 (distributed, non-Marketplace) or 3 (internal); `interval_s` stands in for
        Slack's minute so a test can wait it out."""
        if interval_s <= 0:
            raise ValueError(f"history_interval_s must be positive, not {interval_s!r}")
        if tier == 1:
            # Tier 1 is the point of this mode: a bot must cope with it even in tests that
            # leave the other limits off.
            pages = {method: (15, 15) for method in HISTORY_METHODS}
            return cls(calls=1, always=True, pages=pages, interval_s=interval_s)
        if tier == 3:
            pages = {"conversations.history": (100, 999), "conversations.replies": (1000, 1000)}
            return cls(calls=50, always=False, pages=pages, interval_s=interval_s)
        raise ValueError(f"history_tier must be 1 or 3, not {tier!r}")

    def page_size(self, method: str, requested: int | None) -> int:
        """The `limit` Slack applies: its default when none (or a non-positive one) is asked,
        and never more than its maximum."""
        default, largest = self.pages[method]
        return default if requested is None or requested <= 0 else min(requested, largest)


class TokenBucket:
    """Classic token bucket: `burst` immediate calls, then `per_second` refill."""

    def __init__(self, burst: int, per_second: float) -> None:
        self._capacity = float(burst)
        self._rate = per_second
        self._tokens = float(burst)
        self._updated = time.monotonic()

    def take(self) -> int:
        """0 when a call may go now (a token is spent), else the whole seconds until one may:
        Slack's `Retry-After`, never less than 1."""
        now = time.monotonic()
        elapsed = now - self._updated
        self._tokens = min(self._capacity, self._tokens + elapsed * self._rate)
        self._updated = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0
        return max(1, math.ceil((1.0 - self._tokens) / self._rate))


class RateLimiter:
    """Buckets for the methods Slack limits: per (method, channel) for posts, per method
    (app-wide) for edits and for history reads at the workspace's tier; other calls are free."""

    def __init__(self, history: HistoryTier) -> None:
        self.history = history
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def use_history(self, history: HistoryTier) -> None:
        """Read history at another tier from now on (its calls so far no longer count)."""
        if history != self.history:
            self.history = history
            for method in HISTORY_METHODS:
                self._buckets.pop((method, ""), None)

    def retry_after(self, method: str, channel_id: str, *, enforce: bool) -> int:
        """0 if the call may go now (and counts), else the seconds to wait."""
        history = self.history
        if method in HISTORY_METHODS:
            if not (enforce or history.always):
                return 0
            key, limits = (method, ""), (history.calls, history.calls / history.interval_s)
        else:
            found = RATE_LIMITS.get(method) if enforce else None
            if found is None:
                return 0
            key, limits = (method, channel_id if method in PER_CHANNEL else ""), found
        return self._buckets.setdefault(key, TokenBucket(*limits)).take()

    def reset(self) -> None:
        self._buckets.clear()


def validate_blocks(
    blocks: object, *, limit: int = MAX_MESSAGE_BLOCKS, chart_blocks: bool = True
) -> list[str]:
    """Return Slack's messages for what it refuses in `blocks`; empty means valid.

    Each is "[ERROR] <why> [json-pointer:/blocks/<i>/<field>]", as Slack words them in
    `response_metadata.messages` (see `slack_model.invalid_blocks`). slack_sdk's own models carry
    Slack's length/count rules, so reusing them keeps the emulator as strict as the real API
    without duplicating the rulebook; `_sdk_problems` points at the field they name. The one
    block they do not know, `data_visualization`, is judged by `slack_charts`. A workspace
    without `chart_blocks` refuses that block as it refuses any type it does not support.
    """
    if not isinstance(blocks, list):
        return ["[ERROR] must provide an array [json-pointer:/blocks]"]
    if len(blocks) > limit:
        return [f"[ERROR] no more than {limit} items allowed [json-pointer:/blocks]"]
    errors = []
    for index, block in enumerate(blocks):
        for at, problem in _block_problems(block, chart_blocks=chart_blocks):
            errors.append(f"[ERROR] {problem} [json-pointer:/blocks/{index}{at}]")
    if chart_blocks:
        for index in slack_charts.excess_charts(blocks):
            errors.append(
                f"[ERROR] no more than {slack_charts.MAX_PER_MESSAGE} {slack_charts.BLOCK_TYPE}"
                f" blocks allowed [json-pointer:/blocks/{index}]"
            )
    return errors


def _block_problems(block: object, *, chart_blocks: bool) -> list[slack_charts.Problem]:
    """(JSON pointer below the block, wording) of what Slack would refuse in `block`."""
    if not isinstance(block, dict):
        return [("", "must provide an object")]
    if block.get("type") == slack_charts.BLOCK_TYPE:
        if not chart_blocks:
            return [("/type", f"unsupported type: {slack_charts.BLOCK_TYPE}")]
        return slack_charts.chart_problems(block)
    return _sdk_problems(block)


def _sdk_problems(block: dict[str, Any]) -> list[slack_charts.Problem]:
    """What slack_sdk's models refuse in a block, at the field its message names.

    Slack names a block type it does not know at `/type` ("unsupported type: sections
    [json-pointer:/blocks/0/type]", node-slack-sdk's WebClient tests; blocks.validate's
    reference page answers "unsupported type: invalid" at `.../type` too). An element's rules
    (a button, a select) are checked on the element first, so the pointer reaches it
    (`/elements/0`, `/accessory`) rather than stopping at the block the SDK fails to build.
    """
    for at, element in _elements(block):
        found = _element_problems(element, at)
        if found:
            return found
    try:
        parsed = Block.parse(dict(block))
        if parsed is None:
            return [("/type", f"unsupported type: {block.get('type')}")]
        parsed.validate_json()
        # to_dict() validates what is nested deeper (options, confirm dialogs...).
        parsed.to_dict()
    except Exception as exc:  # the SDK raises several types for malformed input
        return located(block, "", str(exc) or type(exc).__name__)
    return []


def _elements(block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The interactive elements a block holds, each with its pointer below the block."""
    found = []
    for name in ("accessory", "element"):
        if isinstance(block.get(name), dict):
            found.append((f"/{name}", block[name]))
    elements = block.get("elements")
    if block.get("type") == "actions" and isinstance(elements, list):
        found += [(f"/elements/{i}", e) for i, e in enumerate(elements) if isinstance(e, dict)]
    return found


def _element_problems(element: dict[str, Any], at: str) -> list[slack_charts.Problem]:
    try:
        parsed = BlockElement.parse(dict(element))
        if parsed is not None:
            parsed.to_dict()
    except Exception as exc:  # as above
        return located(element, at, str(exc) or type(exc).__name__)
    return []


# What Slack says of an object that is none of the shapes it may take (a text object, a view).
SCHEMA_MISMATCH = "failed to match all allowed schemas"
_TOO_LONG = re.compile(r"cannot exceed (\d+) characters|between \d+ and (\d+) characters")
_TOO_MANY = re.compile(r"cannot exceed (\d+) (?:items|elements)")
# A model built without a field it requires: "ButtonElement.__init__() missing 1 required
# keyword-only argument: 'text'".
_MISSING = re.compile(r"missing \d+ required [\w-]* ?arguments?: '(\w+)'")


def located(obj: dict[str, Any], at: str, message: str) -> list[slack_charts.Problem]:
    """slack_sdk's `message` about `obj` (at `at`) as Slack says it, at the field it names.

    slack_sdk starts each message with the attribute ("text attribute cannot exceed 3000
    characters"). Slack words a length "must be less than 3001 characters", a count "no more
    than 10 items allowed", and for a text object it names the object first (it matches none of
    the schemas a text object may have), then the string: "failed to match all allowed schemas
    [json-pointer:/blocks/0/text]", "must be less than 3001 characters
    [json-pointer:/blocks/0/text/text]" (a chat.postMessage answer quoted whole at
    brainxx.org/blog/fixing-slack-api-error-message; the schema line over a text object in
    slack-go's ResponseWithStringErrors test too). The length rule on a text object is the
    emulator's reading for every text object, the section's being the one seen. A field the
    object lacks is "missing required field: source [json-pointer:/blocks/0]", at the object
    (raycharius/slack-block-builder#120 quotes that answer; views.publish answers "missing
    required field: image_url [json-pointer:/view/blocks/3/accessory]" the same way). A message
    naming no field of `obj` stays slack_sdk's, at `at`.
    """
    missing = _MISSING.search(message)
    if missing:
        return [(at, f"missing required field: {missing.group(1)}")]
    name = message.split(" ", 1)[0]
    if name not in obj:
        return [(at, message)]
    field, value = f"{at}/{name}", obj[name]
    text_object = isinstance(value, dict) and "text" in value
    text = value.get("text") if text_object else value
    long = _TOO_LONG.search(message)
    if long and isinstance(text, str):
        most = int(long.group(1) or long.group(2))
        wording = (
            f"must be less than {most + 1} characters" if text else "must be more than 0 characters"
        )
        if text_object:
            return [(field, SCHEMA_MISMATCH), (f"{field}/text", wording)]
        return [(field, wording)]
    many = _TOO_MANY.search(message)
    if many:
        return [(field, f"no more than {many.group(1)} items allowed")]
    return [(field, message)]


def check_content(
    text: str,
    blocks: list[dict[str, Any]] | None,
    *,
    has_other: bool,
    chart_blocks: bool = True,
) -> None:
    """Apply chat.* content rules: something to show, not too long, valid blocks (charts among
    them only where the workspace takes them)."""
    if not text and not blocks and not has_other:
        raise SlackError("no_text")
    if len(text) > MAX_TEXT_CHARS:
        raise SlackError("msg_too_long")
    if blocks is not None:
        errors = validate_blocks(blocks, chart_blocks=chart_blocks)
        if errors:
            raise invalid_blocks(*errors)


def check_metadata(metadata: object) -> dict[str, Any] | None:
    """Message metadata as Slack takes it: an object with a string `event_type` and an object
    `event_payload` (docs.slack.dev/messaging/message-metadata); anything else, a JSON string
    that did not decode included, is `invalid_metadata_format`. (`invalid_metadata_schema` is
    for payloads that break an event schema declared in the app's manifest; this app declares
    none.)"""
    if metadata is None:
        return None
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("event_type"), str)
        or not metadata["event_type"]
        or not isinstance(metadata.get("event_payload"), dict)
    ):
        raise SlackError("invalid_metadata_format")
    return metadata
