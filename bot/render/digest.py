"""The storm digest: one message listing every new alert group of a storm, edited in place; groups
no edit can add soon get a continuation (`part` 1, 2, …), the first counting the whole storm.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.domain.incident.headline import headline
from bot.domain.incident.incidents import Incident, severity_rank
from bot.domain.message import Rendered
from bot.domain.units import duration
from bot.render import mrkdwn as md
from bot.render.numbers import head_figures
from bot.render.replies import title_text

MAX_LINES = 300
MAX_TYPES_SHOWN = 2
# Header and the two context blocks; the rest of Slack's 50 blocks hold the lines.
_FIXED_BLOCKS = 3


@dataclass(frozen=True)
class DigestEntry:
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
    """Message `part` (0 the first) of the storm, its summary once `over`."""
    counted = entries if part > 0 or storm_entries is None else storm_entries
    total, threaded = len(counted), sum(1 for entry in counted if entry.threaded)
    noun = "alert group" if total == 1 else "alert groups"
    pace = "Each gets its own thread as the pace allows"
    so_far = f"{threaded} of {total} so far."
    if part > 0 and over:
        title = f"⛅ Alert storm over, continued: {total} {noun}"
        about = "More groups of the storm above. Each group has its own thread."
    elif part > 0:
        title = f"⛈️ Alert storm, continued: {total} more"
        about = f"More groups of the storm above, listed as they arrived. {pace}: {so_far}"
    elif over:
        firing = sum(1 for entry in counted if entry.incident.is_open)
        title = f"⛅ Alert storm over: {total} {noun}"
        about = (
            f"From {md.slack_date(started)} to {md.time_of(now)} ({duration(now - started)}): "
            f"{firing} still firing, {total - firing} resolved. Each group has its own thread."
        )
    else:
        title = f"⛈️ Alert storm: {total} new {noun}"
        about = (
            "They arrived faster than Slack lets a channel post (about one message a second), "
            f"so they are all listed here at once. {pace}, most severe first: {so_far}"
        )
        if len(counted) > len(entries):
            about += " Those that came later are listed in the messages below."
    lines = [_line(entry) for entry in entries]
    counts = Counter(
        (severity_rank(e.incident.priority), e.incident.priority or "no priority") for e in counted
    )
    by_priority = " · ".join(f"{md.escaped(p, 30)} × {n}" for (_, p), n in sorted(counts.items()))
    blocks = [md.header(title), md.context([about, by_priority])]
    shown = _fitting(lines, md.MAX_BLOCKS - _FIXED_BLOCKS)
    blocks += md.sections(lines[:shown])
    if shown < len(entries):
        more = f"+{len(entries) - shown} more: `{md.escape(command)} incidents` lists every open "
        blocks.append(md.context([more + "incident."]))
    return md.rendered("\n".join([title, *lines[: min(shown, 20)]]), blocks)


def _line(entry: DigestEntry) -> str:
    incident = entry.incident
    parts = [
        f"{'🔴' if incident.is_open else '✅'} *#{md.escape(incident.id)}*",
        md.truncate(title_text(incident), 120),
    ]
    head = headline(incident)  # the root's numbers: live when it is, summed over the types
    if figures := head_figures(head, queued_first=True):
        parts.append(("worst seen: " if head.worst else "") + ", ".join(figures))
    if types := list(incident.runner_types):
        named = ", ".join(f"`{md.escaped(n, 40)}`" for n in types[:MAX_TYPES_SHOWN])
        extra = len(types) - MAX_TYPES_SHOWN
        parts.append(f"{named} +{extra}" if extra > 0 else named)
    if entry.link:
        parts.append(md.link(entry.link, "thread"))
    elif not entry.threaded:
        parts.append("_thread soon_")
    return " · ".join(parts)


def _fitting(lines: list[str], budget: int) -> int:
    """How many leading lines fit in `budget` section blocks, keeping one for "+N more"."""
    count = min(len(lines), MAX_LINES)
    while count and len(md.sections(lines[:count])) > budget - (1 if count < len(lines) else 0):
        count -= max(1, count // 20)
    return count
