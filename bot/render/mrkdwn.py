"""Slack primitives: escaping, links, mentions, dates, and blocks within Block Kit's limits.
Alert text is untrusted: escaped, it can neither ping `<!channel>` nor forge a link (the only `<…>`
tokens are built here); the builders truncate, so no input size makes Slack refuse a message.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from typing import Any

from bot.domain.message import Rendered
from bot.domain.shortened import shortened
from bot.domain.units import plural as plural  # phrased once, for render too

# Slack user IDs start with U (or W on Enterprise Grid); anything else is shown as text.
_USER_ID = re.compile(r"[UW][A-Z0-9]{1,31}")
# Longer links are shown as their label: one link must never eat a whole text object.
MAX_URL = 2000
_UNSAFE_IN_URL = re.compile(r"[\s|<>]")
# A date token or a link, with the text shown for it; a mention; a name in bold (`person`).
_LABELLED = re.compile(r"<[^<>|]*\|([^<>]*)>")
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)>")
_BOLD = re.compile(r"\*([^*\n]+)\*")
# Escape sequences and `<…>` tokens that truncation must keep whole.
_TOKEN = re.compile(r"&(?:amp|lt|gt);|<[^<>]*>")
# A moment a stored line says in UTC ("2026-11-27 14:02 UTC", "14:02:07 UTC"), after any token.
_UTC_TIME = re.compile(
    r"(?P<token><[^<>]*>)|\b(?:(?P<day>\d{4}-\d{2}-\d{2}) )?"
    r"(?P<clock>(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?) UTC\b"
)

MAX_BLOCKS = 50
MAX_HEADER = 150
MAX_SECTION = 3000
MAX_FIELDS = 10
MAX_FIELD = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_TEXT_OBJECT = 3000
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000  # Slack's limit for a button's value
MAX_FALLBACK = 3000
MAX_RUNNER_NAME = 80


def escape(text: str) -> str:
    """Untrusted text made inert in mrkdwn and in fallback text, which Slack parses the same way."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escaped(text: str, limit: int) -> str:
    return truncate(escape(text), limit)


def plain_text(mrkdwn: str) -> str:
    """Mrkdwn made here as plain text (a date's fallback, a link's label, a mention's user ID)."""
    text = _BOLD.sub(r"\1", _MENTION.sub(r"\1", _LABELLED.sub(r"\1", mrkdwn)))
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def link(url: str, label: str) -> str:
    """`<url|label>` for a plain http(s) URL; otherwise the escaped label, so nothing is forged.
    Slack decodes entities inside the URL too: Grafana URLs carry `&` between parameters."""
    url = url.strip()
    return f"<{escape(url)}|{escape(label)}>" if is_linkable(url) else escape(label)


def is_linkable(url: str) -> bool:
    """Only plain http(s) URLs: no scheme tricks ("javascript:"), nothing that ends the token."""
    url = url.strip()
    return (
        url.lower().startswith(("http://", "https://"))
        and len(url) <= MAX_URL
        and not _UNSAFE_IN_URL.search(url)
    )


def link_label(text: str) -> str:
    """Slack ends a link's URL at the first "|": one more in its label makes it read two ways."""
    return text.replace("|", "¦")


def mention(user_id: str) -> str:
    return f"<@{user_id}>" if _USER_ID.fullmatch(user_id) else escaped(user_id, 64)


def person(user_id: str | None, name: str = "") -> str:
    """Someone named, pinging nobody: the display name on one line, else the user ID as text."""
    shown = " ".join(name.split()) or (user_id or "someone")
    return f"*{escaped(shown, 80)}*"


def runner_name(name: str) -> str:
    return escaped(name, MAX_RUNNER_NAME)


def truncate(text: str, limit: int) -> str:
    """Text within `limit`, whole clauses dropped for "…", never inside `&amp;` or a `<…>` token:
    half of one shows garbage or a dangling `<` Slack parses (plain text is cut the same way)."""
    return shortened(text, limit, _TOKEN)


def fit_lines(lines: list[str], limit: int) -> list[str]:
    sizes = accumulate(len(line) + 1 for line in lines)  # each line and the newline before it
    return [line for line, size in zip(lines, sizes, strict=True) if size - 1 <= limit]


_FALLBACKS = {"{time}": "%H:%M UTC", "{time_secs}": "%H:%M:%S UTC"}


def slack_date(moment: datetime, token: str = "{date_short_pretty} {time}") -> str:
    """A date each reader's client shows in their time zone; the fallback is UTC."""
    utc = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    fallback = utc.strftime(_FALLBACKS.get(token, "%Y-%m-%d %H:%M UTC"))
    return f"<!date^{int(utc.timestamp())}^{token}|{fallback}>"


def in_zone(text: str, around: datetime) -> str:
    """Escaped mrkdwn with each moment it says in UTC as a date token (convert before a cut);
    the day of a bare "14:02 UTC" is the one nearest `around`, its line's own moment."""
    near = (around if around.tzinfo else around.replace(tzinfo=UTC)).astimezone(UTC)

    def token(found: re.Match[str]) -> str:
        if found["token"]:
            return found[0]
        secs = found["clock"].count(":") == 2
        clock = datetime.strptime(found["clock"], "%H:%M:%S" if secs else "%H:%M").time()
        if found["day"]:
            day = datetime.strptime(found["day"], "%Y-%m-%d").date()
            return slack_date(datetime.combine(day, clock, UTC))
        same = datetime.combine(near.date(), clock, UTC)
        moment = min((same + timedelta(days=d) for d in (-1, 0, 1)), key=lambda m: abs(m - near))
        return slack_date(moment, "{time_secs}" if secs else "{time}")

    return _UTC_TIME.sub(token, text)


def time_of(moment: datetime) -> str:
    return slack_date(moment, "{time}")


def rendered(text: str, blocks: list[dict[str, Any]]) -> Rendered:
    return Rendered(text=truncate(text, MAX_FALLBACK), blocks=blocks[:MAX_BLOCKS])


def _mrkdwn(text: str, limit: int) -> dict[str, Any]:
    # verbatim: Slack would turn bare URLs and names in alert text into links and mentions.
    return {"type": "mrkdwn", "text": truncate(text, limit), "verbatim": True}


def header(text: str) -> dict[str, Any]:
    # `text` is escaped already: Slack decodes entities in plain_text too.
    return {"type": "header", "text": plain(text, MAX_HEADER)}


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text, MAX_SECTION)}


def fields(items: list[str], *, more: str = "+{n} more", text: str = "") -> dict[str, Any]:
    """Two-column fields under `text`; past ten, the last says how many were left out."""
    if len(items) > MAX_FIELDS:
        hidden = len(items) - (MAX_FIELDS - 1)
        items = [*items[: MAX_FIELDS - 1], more.format(n=hidden)]
    block = {"type": "section", "fields": [_mrkdwn(item, MAX_FIELD) for item in items]}
    return block | {"text": _mrkdwn(text, MAX_SECTION)} if text else block


def context(items: list[str], *, block_id: str = "") -> dict[str, Any]:
    elements = [_mrkdwn(item, MAX_TEXT_OBJECT) for item in items[:MAX_CONTEXT_ELEMENTS]]
    block = {"type": "context", "elements": elements}
    return block | {"block_id": block_id} if block_id else block


def sections(lines: list[str]) -> list[dict[str, Any]]:
    """Lines packed into as few sections as fit; an over-long line is truncated by section()."""
    blocks: list[dict[str, Any]] = []
    rest = lines
    while rest:
        kept = fit_lines(rest, MAX_SECTION) or [rest[0]]
        blocks.append(section("\n".join(kept)))
        rest = rest[len(kept) :]
    return blocks


def plain(text: str, limit: int = MAX_BUTTON_TEXT) -> dict[str, Any]:
    return {"type": "plain_text", "text": truncate(text, limit), "emoji": True}


def option(text: str, value: str) -> dict[str, Any]:
    return {"text": plain(text), "value": value}


def button(text: str, action_id: str, value: str, style: str = "") -> dict[str, Any]:
    made = {"type": "button", "text": plain(text), "action_id": action_id, "value": value}
    return made | {"style": style} if style else made


def confirm(title: str, text: str, yes: str, no: str) -> dict[str, Any]:
    said = {"title": plain(title, 100), "text": plain(text, 300)}
    return said | {"confirm": plain(yes, 30), "deny": plain(no, 30)}


def actions(elements: list[dict[str, Any]], block_id: str = "") -> dict[str, Any]:
    return {"type": "actions", **({"block_id": block_id} if block_id else {}), "elements": elements}
