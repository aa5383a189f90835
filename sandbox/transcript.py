"""Render emulated Slack messages as terminal text, so the demo can show a thread without a browser.

Slack's wire format is not meant for reading: mrkdwn escapes `&<>`, links and mentions are `<…>`
tokens, dates are `<!date^…|fallback>`, and most of a bot message lives in Block Kit. This module
turns all of that into plain lines, roughly as a Slack client would draw them. Everything here is
a pure function of the messages, so the rendering is tested without any server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from sandbox.slack_state import BOT_USER_ID, BOT_USER_NAME

REPLY_INDENT = "    "
DIVIDER = "─" * 40
WIDTH = 100
# Users' and channels' names by ID (the two never share an ID), as a reader's client knows them.
DEFAULT_NAMES: Mapping[str, str] = {BOT_USER_ID: BOT_USER_NAME}

_TOKEN = re.compile(r"<([^<>]*)>")
_PLACEHOLDER = re.compile(r"\0(\d+)\0")
# One pass, so `&amp;lt;` decodes once (to `&lt;`), as Slack does.
_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}
# Slack only treats `*x*` / `_x_` as emphasis at word boundaries: `a*b*c` and `linux_2xl` stay.
_BOLD = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
_LINKABLE = ("http://", "https://", "mailto:")
_SELECTS = ("static_select", "external_select", "users_select", "conversations_select")


class MessageLike(Protocol):
    """What a transcript needs of a message; `sandbox.slack_state.Message` has it all."""

    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    edits: int


def mrkdwn_to_text(
    text: str, *, keep_emphasis: bool = False, names: Mapping[str, str] = DEFAULT_NAMES
) -> str:
    """Plain text for a mrkdwn string: tokens shown as a reader sees them, entities decoded;
    a mention of a user or a channel in `names` shows its name.

    Emphasis markers (`*bold*`, `_italic_`) are stripped unless `keep_emphasis`, because a
    terminal cannot show them and the asterisks only add noise. Tokens are set aside first, so
    an underscore or asterisk inside a URL is never mistaken for emphasis.
    """
    shown: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        shown.append(_token(match.group(1), names))
        return f"\0{len(shown) - 1}\0"

    text = _TOKEN.sub(set_aside, text.replace("\0", ""))
    if not keep_emphasis:
        text = _ITALIC.sub(r"\1", _BOLD.sub(r"\1", text))
    return _PLACEHOLDER.sub(lambda m: shown[int(m.group(1))], _unescape(text))


def _token(body: str, names: Mapping[str, str] = DEFAULT_NAMES) -> str:
    """One `<…>` token: a link, a mention, a channel, a special mention or a date."""
    target, _, label = body.partition("|")
    target, label = _unescape(target), _unescape(label)
    if target.startswith("@"):
        return f"@{label or names.get(target[1:], target[1:])}"
    if target.startswith("#"):  # Slack shows the channel's name now, whatever the label says
        return f"#{names.get(target[1:]) or label or target[1:]}"
    if target.startswith("!date^"):
        # Slack shows the fallback where it cannot format; without one, the moment itself.
        return label or _date(target.split("^")[1])
    if target.startswith("!subteam^"):
        return f"@{label.lstrip('@') or target[len('!subteam^') :]}"
    if target.startswith("!"):
        return f"@{label or target[1:]}"
    if not target.lower().startswith(_LINKABLE):
        # A link to nowhere: Slack shows its label, and without one nothing (`<duration>`).
        return label
    return f"{label} ({target})" if label and label != target else target


def _unescape(text: str) -> str:
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def _text_object(
    obj: Mapping[str, Any] | None, *, keep_emphasis: bool, names: Mapping[str, str] = DEFAULT_NAMES
) -> str:
    """A Block Kit text object: mrkdwn is parsed; plain_text only has its entities decoded."""
    if not obj:
        return ""
    text = str(obj.get("text", ""))
    if obj.get("type") == "mrkdwn":
        return mrkdwn_to_text(text, keep_emphasis=keep_emphasis, names=names)
    return _unescape(text)


def render_element(element: Mapping[str, Any]) -> str:
    """An interactive element as a bracketed control: `[Resolve]`, `[Silence… ▾]`."""
    kind = element.get("type", "")
    if kind == "button":
        return f"[{_text_object(element.get('text'), keep_emphasis=False)}]"
    if kind in _SELECTS or kind.startswith("multi_"):
        placeholder = _text_object(element.get("placeholder"), keep_emphasis=False)
        return f"[{placeholder or 'Select'} ▾]"
    if kind == "overflow":
        return "[⋯]"
    if kind in ("datepicker", "timepicker"):
        return f"[{element.get('initial_date') or element.get('initial_time') or kind} ▾]"
    return f"[{kind}]"


def render_block(
    block: Mapping[str, Any],
    *,
    keep_emphasis: bool = False,
    names: Mapping[str, str] = DEFAULT_NAMES,
) -> list[str]:
    """The lines one block shows; unknown block types are named so nothing vanishes silently."""
    kind = block.get("type")
    if kind == "header":
        return [_text_object(block.get("text"), keep_emphasis=False)]
    if kind == "divider":
        return [DIVIDER]
    if kind == "section":
        return _section(block, keep_emphasis=keep_emphasis, names=names)
    if kind == "context":
        elements = block.get("elements", [])
        parts = [_context_part(e, keep_emphasis=keep_emphasis, names=names) for e in elements]
        return _wrap([part for part in parts if part])
    if kind == "actions":
        return [" ".join(render_element(e) for e in block.get("elements", []))]
    if kind == "image":
        return [f"[image: {block.get('alt_text', '')}]"]
    return [f"[{kind} block]"]


def _section(
    block: Mapping[str, Any], *, keep_emphasis: bool, names: Mapping[str, str]
) -> list[str]:
    """A section's text, then its fields one per line, then its accessory control if any."""
    lines: list[str] = []
    text = _text_object(block.get("text"), keep_emphasis=keep_emphasis, names=names)
    if text:
        lines += text.split("\n")
    for field in block.get("fields", []):
        lines += _text_object(field, keep_emphasis=keep_emphasis, names=names).split("\n")
    accessory = block.get("accessory")
    if accessory:
        lines.append(render_element(accessory))
    return lines


def _wrap(parts: list[str], *, width: int = WIDTH, sep: str = " · ") -> list[str]:
    """Context elements side by side like Slack, starting a new line rather than passing
    `width` (one long Grafana silence link would otherwise make an unreadable line)."""
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines.append(part)
    return lines


def _context_part(
    element: Mapping[str, Any], *, keep_emphasis: bool, names: Mapping[str, str]
) -> str:
    if element.get("type") == "image":
        return f"[{element.get('alt_text', 'image')}]"
    return _text_object(element, keep_emphasis=keep_emphasis, names=names)


def render_message(
    message: MessageLike,
    *,
    names: Mapping[str, str] = DEFAULT_NAMES,
    keep_emphasis: bool = False,
) -> list[str]:
    """A message's byline (author, UTC time, edits) and its body lines, unindented.

    The body is the blocks when there are any (that is what Slack shows), else the text.
    """
    author = getattr(message, "user", None)
    byline = [names.get(author, f"@{author}") if author else "?", _clock(message.ts)]
    if message.edits:
        byline.append(f"edited {message.edits}×")
    if message.blocks:
        body = [
            line
            for block in message.blocks
            for line in render_block(block, keep_emphasis=keep_emphasis, names=names)
        ]
    else:
        body = mrkdwn_to_text(message.text, keep_emphasis=keep_emphasis, names=names).split("\n")
    body += [f"📎 {f.get('title') or f.get('name', 'file')}" for f in _files(message)]
    return [" · ".join(byline), *body]


def _files(message: MessageLike) -> Iterable[Mapping[str, Any]]:
    return getattr(message, "files", None) or ()


def _date(epoch: str) -> str:
    try:
        return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (ValueError, OverflowError, OSError):
        return epoch


def _clock(ts: str) -> str:
    """Slack timestamps are epoch seconds; the demo shows UTC, like the bot's date fallbacks."""
    try:
        return datetime.fromtimestamp(float(ts), UTC).strftime("%H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):
        return ts


def render_thread(
    messages: Sequence[MessageLike],
    *,
    channel: str = "",
    names: Mapping[str, str] = DEFAULT_NAMES,
    keep_emphasis: bool = False,
) -> str:
    """A thread as a transcript: a header line, the root, then each reply indented under it."""
    if not messages:
        return f"#{channel}: (no messages)" if channel else "(no messages)"
    root, replies = messages[0], messages[1:]
    noun = "reply" if len(replies) == 1 else "replies"
    where = f"#{channel} · " if channel else ""
    lines = [f"━━ {where}thread {root.ts} · {len(replies)} {noun} ━━"]
    lines += _indented(render_message(root, names=names, keep_emphasis=keep_emphasis), "")
    for reply in replies:
        lines.append("")
        rendered = render_message(reply, names=names, keep_emphasis=keep_emphasis)
        lines += _indented(rendered, REPLY_INDENT, mark="↳ ")
    return "\n".join(lines)


def _indented(rendered: list[str], indent: str, *, mark: str = "") -> list[str]:
    """Byline at `indent` (after `mark`), body two spaces deeper; blank lines stay blank."""
    byline, body = rendered[0], rendered[1:]
    deeper = indent + " " * max(len(mark), 2)
    return [f"{indent}{mark}{byline}", *(f"{deeper}{line}" if line else "" for line in body)]
