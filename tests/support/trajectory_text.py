"""What the surfaces of an incident say, read from their text: every reading of message text
the trajectories do (`tests/support/trajectory.py`), so a change of wording is adjusted here.

The judgement is read by two functions, `direction_of` and `advice_of`, in the words every
surface is to use for a runner type (the root, a status, `/queue`):

    • linux.2xlarge: *12* queued · longest wait *9 min* · busy 30/30 · ▲ rising +2.0 jobs/min ·
      +7 runners would drain it in 30 min
    … · ▼ falling 3.0 jobs/min · none: it clears in ~4 min
    … · holding · +7 runners would drain it in 30 min; raise the maximum by 5 (40 → 45)

with diagnostics' next step ending in the same advice words. Today's words for the same
judgement ("growing +3.0 jobs/min: +6 runners would …", "draining ~2.0 jobs/min → clear in
~7 min", "holding steady") are read as the same directions and advice.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

Direction = Literal["rising", "holding", "falling"]
Advice = int | Literal["clears", "covered", "pending"] | None

# The words of a direction, the new ones first.
DIRECTION_WORDS: tuple[tuple[str, Direction], ...] = (
    ("▲ rising", "rising"),
    ("▼ falling", "falling"),
    ("growing", "rising"),
    ("draining", "falling"),
    ("holding", "holding"),
)
RUNNERS = re.compile(r"\+(\d+) runners? (?:would|\(the cap\))")
CLEARS = re.compile(r"\bclears? (?:in ~|within)")
COVERED = re.compile(r"\+\d+ runners? on their way")
PENDING = re.compile(r"\bnone yet: \+\d+ runners? if the queue keeps rising")
RAISE_BY = re.compile(r"raise the maximum by (\d+)")
NEXT = ("*Next:*", "Next:")  # how diagnostics' next step starts its line
# Where a surface names the time of the reading it renders (a Slack date token).
STAMP = re.compile(
    r"(?:live from \w+ at|Status update ·|Diagnostics · incident \S+ ·) <!date\^(\d+)\^"
)
CHANGE = re.compile(r"(minRunners|maxRunners) (\d+) → (\d+)")


def direction_of(text: str, runner_type: str) -> Direction | None:
    """Which way the message says `runner_type`'s queue goes; None when it says nothing."""
    for line in type_lines(text, runner_type):
        if line.startswith(NEXT):
            continue
        for words, direction in DIRECTION_WORDS:
            if words in line:
                return direction
    return None


def advice_of(text: str, runner_type: str) -> Advice:
    """The runners the message advises for `runner_type`: N from "+N runners would …",
    "clears" from "(none: it) clears in ~…", "covered" from "+N runners on their way …",
    "pending" from "none yet: +N runners if the queue keeps rising", None when it advises
    nothing."""
    line = advice_line(text, runner_type)
    if found := RUNNERS.search(line):
        return int(found.group(1))
    if CLEARS.search(line):
        return "clears"
    if COVERED.search(line):
        return "covered"
    return "pending" if PENDING.search(line) else None


def raise_of(text: str, runner_type: str) -> int | None:
    """How far the message says the maximum must rise for `runner_type` (None: it need not)."""
    found = RAISE_BY.search(advice_line(text, runner_type))
    return int(found.group(1)) if found else None


def advice_line(text: str, runner_type: str) -> str:
    """The line that carries the type's advice: diagnostics' next step (the one naming the
    type, if several), else the type's own line, else the first line that advises anything."""
    lines = type_lines(text, runner_type)
    steps = [line for line in lines if line.startswith(NEXT)]
    steps = steps or [line for line in text.splitlines() if line.startswith(NEXT)]
    if steps:
        return steps[0]
    advising = [
        line
        for line in lines
        if RUNNERS.search(line) or CLEARS.search(line) or COVERED.search(line)
    ]
    return (advising or lines or [""])[0]


def type_lines(text: str, runner_type: str) -> list[str]:
    """The lines about `runner_type`, its own first: its line on the root, a status or `/queue`
    ("• name: …") and its section of diagnostics ("*name* · …"), then others naming it (a next
    step, a likely cause); the whole text when no line names it (the modal, about one type)."""
    lines = [line for line in text.splitlines() if runner_type in line]
    own = [line for line in lines if line.startswith((f"• {runner_type}:", f"*{runner_type}*"))]
    return [*own, *(line for line in lines if line not in own)] or text.splitlines()


def cites_maximum(text: str, maximum: int) -> bool:
    """Whether the message says the maximum of `maximum` is short: "raise the maximum by 5
    (40 → 45)", "raise it", "… under the maximum of 40: 5 short", "demand 52 runners > maximum
    40". Read over the whole message: a trajectory's fleet is one type."""
    said = text.replace("&gt;", ">")
    return bool(
        re.search(r"raise (?:the maximum|it\b)", said)
        or re.search(rf"maximum (?:of )?\*?{maximum}\b[^\n]*\bshort\b", said)
        or re.search(rf"> maximum {maximum}\b", said)
    )


def target_refusal(confirmation: str, spec: dict[str, int], registered: int) -> str:
    """Why the scale set would not take what the confirmation step says will be asked
    ("minRunners 0 → 5", "maxRunners 40 → 45"); "" when it would. Its rules as the `arc`
    backend applies them when the confirmation is submitted: minRunners stays within
    maxRunners, and is not raised at the maximum (ARC would run no more runners)."""
    found = CHANGE.search(confirmation)
    if found is None:
        return f"the confirmation names no change: {confirmation[:200]}"
    field, after = found.group(1), int(found.group(3))
    if field == "minRunners" and after > spec["maxRunners"]:
        return f"minRunners {after} above maxRunners {spec['maxRunners']}"
    if field == "minRunners" and registered >= spec["maxRunners"]:
        return f"minRunners raised at the maximum ({spec['maxRunners']}): nothing would change"
    return ""


def stamp_of(text: str) -> int | None:
    """The time of the reading a message renders (epoch seconds of its Slack date token)."""
    found = STAMP.search(text)
    return int(found.group(1)) if found else None


def initial_of(view: dict[str, Any], block_id: str) -> Any:
    """A view's preset for one input: the number input's value, a radio's option."""
    for block in view["blocks"]:
        if block.get("block_id") != block_id:
            continue
        element = block["element"]
        if "initial_value" in element:
            return int(element["initial_value"])
        option = element.get("initial_option")
        return option["value"] if option else None
    return None


def shown_text(message: Any) -> str:
    """What a message or a view shows: its blocks' texts, a line each (the text when none)."""
    blocks = message.get("blocks") if isinstance(message, dict) else message.blocks
    texts = list(_texts(blocks))
    if texts:
        return "\n".join(texts)
    return str(message.get("text", "")) if isinstance(message, dict) else message.text


def _texts(node: Any) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _texts(item)
    elif isinstance(node, dict):
        if node.get("type") in ("mrkdwn", "plain_text") and isinstance(node.get("text"), str):
            yield node["text"]
        for key, value in node.items():
            if key != "text" or not isinstance(value, str):
                yield from _texts(value)
