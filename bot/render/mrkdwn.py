"""Slack primitives: escaping, links, mentions, dates, and blocks that stay within limits.

Everything an alert sender controls is untrusted: it must reach Slack with `&`, `<` and `>`
escaped, so a label can neither ping `<!channel>` nor forge a link. The only `<…>` tokens the
renderers emit are built here: user mentions, `<!date^…>` and http(s) links. The block builders
truncate to Slack's documented limits, so no input size can make Slack refuse a message.
Numbers and durations are said by `bot.domain.units`; a message is a `bot.domain.message.Rendered`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bot.domain.message import Rendered

ELLIPSIS = "…"

# Slack user IDs start with U (or W on Enterprise Grid); anything else is shown as text.
_USER_ID = re.compile(r"[UW][A-Z0-9]+")
_MAX_USER_ID = 32
# Links longer than this are shown as their label: one link must never eat a whole text object.
MAX_URL = 2000
_UNSAFE_IN_URL = re.compile(r"[\s|<>]")
# A date token or a link, with the text shown for it; a mention; a name in bold (`person`).
_LABELLED = re.compile(r"<[^<>|]*\|([^<>]*)>")
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)>")
_BOLD = re.compile(r"\*([^*\n]+)\*")
# Escape sequences and `<…>` tokens that truncation must keep whole.
_TOKEN = re.compile(r"&(?:amp|lt|gt);|<[^<>]*>")


def escape(text: str) -> str:
    """Make untrusted text inert in mrkdwn and in fallback text, which Slack parses the same way."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plain_text(mrkdwn: str) -> str:
    """What mrkdwn made here reads as, as plain text: a date as its UTC fallback, a link as its
    label, a mention as the user ID, a name without its bold, entities as their characters. For
    an answer kept as a timeline line, which is escaped again wherever it is shown."""
    text = _LABELLED.sub(r"\1", mrkdwn)
    text = _MENTION.sub(r"\1", text)
    text = _BOLD.sub(r"\1", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def link(url: str, label: str) -> str:
    """`<url|label>` for a plain http(s) URL; otherwise the escaped label, so nothing is forged.

    URLs such as "www.time.com" or "javascript:…" are not links we vouch for: they stay text.
    """
    url = url.strip()
    if not is_linkable(url):
        return escape(label)
    # Slack decodes entities inside the URL part too; Grafana URLs carry `&` between parameters.
    return f"<{escape(url)}|{escape(label)}>"


def is_linkable(url: str) -> bool:
    """Only plain http(s) URLs become links: no scheme tricks, nothing that ends the token early."""
    url = url.strip()
    return (
        url.lower().startswith(("http://", "https://"))
        and len(url) <= MAX_URL
        and not _UNSAFE_IN_URL.search(url)
    )


def mention(user_id: str) -> str:
    """A user mention for a real Slack user ID, the escaped text otherwise."""
    if len(user_id) <= _MAX_USER_ID and _USER_ID.fullmatch(user_id):
        return f"<@{user_id}>"
    return truncate(escape(user_id), 64)


def person(user_id: str | None, name: str = "") -> str:
    """Someone named without a mention, for replies that must ping nobody (status, summary).

    The display name comes from `users.info` (or the interaction payload); without one, the
    user ID is shown as plain text, which Slack never turns into a mention on its own.
    """
    shown = name.strip() or (user_id or "someone")
    return f"*{truncate(escape(shown), 80)}*"


def truncate(text: str, limit: int) -> str:
    """Cut already-escaped mrkdwn to `limit` characters, ending with "…".

    The cut never splits `&amp;` or a `<…>` token: half of either would show garbage or leave a
    dangling `<` that Slack tries to parse.
    """
    if len(text) <= limit:
        return text
    cut = limit - len(ELLIPSIS)
    for token in _TOKEN.finditer(text):
        if token.start() >= cut:
            break
        if token.end() > cut:
            cut = token.start()
            break
    return text[:cut].rstrip() + ELLIPSIS


# What a line shortened between words must not end on, before its "…".
_DANGLING = " ,;:·-–—(\"'"


def shorten(text: str, limit: int) -> str:
    """Plain text as one line of at most `limit` characters, cut between words with "…".

    For lines a person reads whole (the root's latest actions), where "changes it m…" reads as
    a typo. Escape the result, not the input, so no entity is cut either. A first word longer
    than the line leaves only "…": the line never ends inside a word.
    """
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    room = line[: limit - len(ELLIPSIS) + 1]  # one more: whether the cut falls on a space
    kept = room.rsplit(" ", 1)[0] if " " in room else ""
    return kept.rstrip(_DANGLING) + ELLIPSIS


def fit_lines(lines: list[str], limit: int) -> list[str]:
    """The leading lines that fit in `limit` characters when joined by newlines."""
    kept: list[str] = []
    size = -1
    for line in lines:
        size += len(line) + 1
        if size > limit:
            break
        kept.append(line)
    return kept


def slack_date(moment: datetime, token: str = "{date_short_pretty} {time}") -> str:
    """A date Slack renders in each reader's time zone, so the message never needs re-rendering.

    The fallback (shown by clients that can't format dates) is the UTC time.
    """
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    utc = aware.astimezone(UTC)
    fallback = utc.strftime("%H:%M UTC" if token == "{time}" else "%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(utc.timestamp())}^{token}|{fallback}>"


# --- blocks -----------------------------------------------------------------------------------

MAX_BLOCKS = 50
MAX_HEADER = 150
MAX_SECTION = 3000
MAX_FIELDS = 10
MAX_FIELD = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_TEXT_OBJECT = 3000
MAX_BUTTON_TEXT = 75
MAX_FALLBACK = 3000


def rendered(text: str, blocks: list[dict[str, Any]]) -> Rendered:
    return Rendered(text=truncate(text, MAX_FALLBACK), blocks=blocks[:MAX_BLOCKS])


def _mrkdwn(text: str, limit: int) -> dict[str, Any]:
    # verbatim: Slack's own preprocessing would turn bare URLs and names in alert text into links
    # and mentions; we emit exactly the tokens we build.
    return {"type": "mrkdwn", "text": truncate(text, limit), "verbatim": True}


def header(text: str) -> dict[str, Any]:
    """A header block; `text` is escaped already (Slack decodes entities in plain_text too)."""
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": truncate(text, MAX_HEADER), "emoji": True},
    }


def section(text: str, *, block_id: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "section", "text": _mrkdwn(text, MAX_SECTION)}
    if block_id:
        block["block_id"] = block_id
    return block


def fields(items: list[str], *, more: str = "+{n} more") -> dict[str, Any]:
    """A section of two-column fields; past ten, the last field says how many were left out."""
    if len(items) > MAX_FIELDS:
        hidden = len(items) - (MAX_FIELDS - 1)
        items = [*items[: MAX_FIELDS - 1], more.format(n=hidden)]
    return {"type": "section", "fields": [_mrkdwn(item, MAX_FIELD) for item in items]}


def context(items: list[str], *, block_id: str | None = None) -> dict[str, Any]:
    elements = [_mrkdwn(item, MAX_TEXT_OBJECT) for item in items[:MAX_CONTEXT_ELEMENTS]]
    block: dict[str, Any] = {"type": "context", "elements": elements}
    if block_id:
        block["block_id"] = block_id
    return block


def sections(lines: list[str]) -> list[dict[str, Any]]:
    """Lines packed into as few sections as fit; each line must be shorter than a section."""
    blocks: list[dict[str, Any]] = []
    rest = lines
    while rest:
        # An over-long line is truncated by section() rather than never fitting.
        kept = fit_lines(rest, MAX_SECTION) or [rest[0]]
        blocks.append(section("\n".join(kept)))
        rest = rest[len(kept) :]
    return blocks


def plain(text: str, limit: int = MAX_BUTTON_TEXT) -> dict[str, Any]:
    return {"type": "plain_text", "text": truncate(text, limit), "emoji": True}
