"""The storm digest: one message that lists every new alert group of a storm, a pure function of
the storm's incidents.

It is posted once and edited in place, so it must stay within Block Kit's limits however many
groups join: one line per group, packed into sections; past `MAX_LINES` or the block budget, a
"+N more" line points at the slash command that lists them all. Groups that join when no edit
can add them soon get a continuation: one more message of the same shape (`part` 1, 2, …)
listing only them; the first message keeps counting the whole storm.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.domain.headline import headline
from bot.domain.incidents import Incident, severity_rank
from bot.domain.message import Rendered
from bot.domain.units import duration, number
from bot.render.mrkdwn import (
    MAX_BLOCKS,
    context,
    escape,
    header,
    link,
    rendered,
    sections,
    slack_date,
    truncate,
)
from bot.render.replies import title_text

MAX_LINES = 300
MAX_TITLE = 120
MAX_TYPES_SHOWN = 2
MAX_TYPE_NAME = 40
# Header and the two context blocks; the rest of Slack's 50 blocks hold the lines.
_FIXED_BLOCKS = 3


@dataclass(frozen=True)
class DigestEntry:
    """One group of the storm: its incident, and the link to its thread once it has one."""

    incident: Incident
    threaded: bool
    link: str = ""


def render_digest(
    entries: Sequence[DigestEntry],
    *,
    started: datetime,
    now: datetime,
    over: bool,
    command: str = "/queue",
    part: int = 0,
    storm_entries: Sequence[DigestEntry] | None = None,
) -> Rendered:
    """Digest message `part` (0 the first, then its continuations) listing `entries`, while the
    storm lasts (`over=False`) and as its summary once it is over. The first message counts
    `storm_entries`, every group of the storm (by default its own)."""
    if part > 0:
        title, about = _continued(entries, over=over)
        counted: Sequence[DigestEntry] = entries
    else:
        counted = entries if storm_entries is None else storm_entries
        title, about = _first(counted, started=started, now=now, over=over)
        if len(counted) > len(entries) and not over:
            about += " Those that came later are listed in the messages below."
    total = len(entries)
    lines = [_line(entry) for entry in entries]
    blocks = [header(title), context([about, _by_priority(counted)])]
    budget = MAX_BLOCKS - _FIXED_BLOCKS
    shown = _fitting(lines, budget)
    blocks.extend(sections(lines[:shown]))
    if shown < total:
        more = f"+{total - shown} more: `{escape(command)} incidents` lists every open incident."
        blocks.append(context([more]))
    fallback = "\n".join([title, *lines[: min(shown, 20)]])
    return rendered(fallback, blocks)


def _first(
    entries: Sequence[DigestEntry], *, started: datetime, now: datetime, over: bool
) -> tuple[str, str]:
    total = len(entries)
    threaded = sum(1 for entry in entries if entry.threaded)
    firing = sum(1 for entry in entries if entry.incident.is_open)
    if over:
        title = f"⛅ Alert storm over: {_groups(total)}"
        about = (
            f"From {slack_date(started)} to {slack_date(now, '{time}')} "
            f"({duration(now - started)}): {firing} still firing, {total - firing} resolved. "
            "Each group has its own thread."
        )
    else:
        title = f"⛈️ Alert storm: {_groups(total, new=True)}"
        about = (
            "They arrived faster than Slack lets a channel post (about one message a second), "
            "so they are all listed here at once. Each gets its own thread as the pace allows, "
            f"most severe first: {threaded} of {total} so far."
        )
    return title, about


def _continued(entries: Sequence[DigestEntry], *, over: bool) -> tuple[str, str]:
    total = len(entries)
    if over:
        return (
            f"⛅ Alert storm over, continued: {_groups(total)}",
            "More groups of the storm above. Each group has its own thread.",
        )
    threaded = sum(1 for entry in entries if entry.threaded)
    return (
        f"⛈️ Alert storm, continued: {total} more",
        "More groups of the storm above, listed as they arrived. Each gets its own thread as "
        f"the pace allows: {threaded} of {total} so far.",
    )


def _line(entry: DigestEntry) -> str:
    incident = entry.incident
    parts = [
        f"{'🔴' if incident.is_open else '✅'} *#{escape(incident.id)}*",
        truncate(title_text(incident), MAX_TITLE),
    ]
    head = headline(incident)  # the root's numbers: live when it is, summed over the types
    figures = [f"{number(head.queued)} queued"] if head.queued is not None else []
    if head.wait:
        figures.append(head.wait)
    if figures:
        parts.append(("worst seen: " if head.worst else "") + ", ".join(figures))
    types = list(incident.runner_types)
    if types:
        named = ", ".join(
            f"`{truncate(escape(name), MAX_TYPE_NAME)}`" for name in types[:MAX_TYPES_SHOWN]
        )
        extra = len(types) - MAX_TYPES_SHOWN
        parts.append(f"{named} +{extra}" if extra > 0 else named)
    if entry.link:
        parts.append(link(entry.link, "thread"))
    elif not entry.threaded:
        parts.append("_thread soon_")
    return " · ".join(parts)


def _fitting(lines: list[str], budget: int) -> int:
    """How many leading lines fit in `budget` section blocks, keeping one for "+N more"."""
    count = min(len(lines), MAX_LINES)
    while count and len(sections(lines[:count])) > budget - (1 if count < len(lines) else 0):
        count -= max(1, count // 20)
    return count


def _by_priority(entries: Sequence[DigestEntry]) -> str:
    counts = Counter(
        (severity_rank(e.incident.priority), e.incident.priority or "no priority") for e in entries
    )
    return " · ".join(
        f"{truncate(escape(name), 30)} × {n}" for (_, name), n in sorted(counts.items())
    )


def _groups(total: int, *, new: bool = False) -> str:
    noun = "alert group" if total == 1 else "alert groups"
    return f"{total} new {noun}" if new else f"{total} {noun}"
