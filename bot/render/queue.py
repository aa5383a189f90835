"""`/queue`'s overview: the live queue by runner type, and the open incidents with their roots'
numbers."""

from __future__ import annotations

from bot.domain.alerting.routes import Routing
from bot.domain.incident.headline import headline, shown_live
from bot.domain.incident.incidents import Incident
from bot.domain.incident.trend import Trend
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.reading.runner_names import runner_key
from bot.render import mrkdwn as md
from bot.render.numbers import EMPTY, head_figures, queued_said, read_at, type_lines, wait_known

LIVE_TYPES = 10  # the worst runner types `/queue` lists from the live backend
OVERVIEW_TYPES = 5  # an incident's runner types in its `/queue` line
# An ephemeral answer is one section-sized text: the overview says how many it left out.
MAX_ANSWER = 2900
MAX_LINES = 20


def live_queue(
    source: str,
    fleet: FleetSnapshot | None,
    error: str,
    incidents: list[Incident],
    routing: Routing,
    channel: str,
) -> str:
    """`source`'s latest reading by runner type (`error`: why the latest read failed); in a
    team's channel, the types it owns."""
    if fleet is None:
        why = md.escape(error or "no reading yet")
        return md.truncate(f"⚠️ No live numbers from {md.escape(source)}: {why}", MAX_ANSWER // 2)
    head = f"*Queue by runner type* · live from {md.escape(source)} {read_at(fleet)}"
    owned = routing.types_of(channel, fleet.runner_types)
    others = [n for n in fleet.runner_types if owned is not None and n not in owned]
    if others:
        head += " · the types this channel owns"
        names = set(owned or ())
        types = {n: m for n, m in fleet.runner_types.items() if n in names}
        absent = tuple(n for n in fleet.absent if n in names)
        fleet = fleet.model_copy(update={"runner_types": types, "absent": absent})
    if error:
        head += f"\n⚠️ The latest read failed ({md.escape(error)}): these are older"
    elif fleet.note:  # the reading's own word on its numbers
        head += f"\n⚠️ {md.in_zone(md.escape(fleet.note), fleet.at)}"
    none = "_None of this channel's runner types is known._" if others else ""
    lines = type_lines(fleet, _trend_of(fleet, incidents), top=LIVE_TYPES)
    lines = lines or [none or "_No runner type is known._"]
    if others:  # where they are answered for: their channels, or a DM for the whole fleet
        shown = _channels({routing.channel_of_type(n) for n in others})
        lines.append(
            f"_+{md.plural(len(others), 'runner type')} of other channels ({shown}): `/queue` "
            "there lists them, and in a DM with the app every type._"
        )
    return md.truncate("\n".join([head, *lines]), MAX_ANSWER // 2)


def _trend_of(fleet: FleetSnapshot, incidents: list[Incident]) -> Trend:
    """The open incident's trend that shows most of these types: the sparklines its root shows."""
    listed = {runner_key(name) for name in fleet.runner_types}

    def shared(incident: Incident) -> int:
        return len(listed & {runner_key(name) for name in incident.shown_types})

    best = max(incidents, key=shared, default=None)
    return best.trend if best is not None and shared(best) else EMPTY


def open_incidents(
    head: str, here: list[Incident], elsewhere: list[Incident], *, numbers: bool = True
) -> str:
    """The open incidents of this channel under `head`, and a line for those in other channels;
    without `numbers` under a live reading (an older one beside it would disagree)."""
    others = ""
    if elsewhere:
        shown = _channels({i.channel for i in elsewhere if i.channel})
        others = f"\n_{len(elsewhere)} open in other channels: {shown}_"
    if not here:
        # Under the live queue the numbers speak for themselves; alone, say what it means.
        quiet = "No open incidents" + (
            " here." if elsewhere else ("." if head else ": the queues are quiet.")
        )
        return (f"{head}\n\n" if head else "") + quiet + others
    title = f"{head}\n\n*Open incidents*" if head else ""
    return capped(title, [overview_line(i, numbers=numbers) for i in here], len(here)) + others


def say_which(verb: str, incidents: list[Incident], total: int, channel: str) -> str:
    """Which of `total` open incidents a command is for, asked with the first `incidents`."""
    where = "open" if total != 1 else "open in another channel"
    head = (
        f"{total} incident{'s are' if total != 1 else ' is'} {where}: say which, e.g. "
        f"`/queue {verb} {md.escape(incidents[0].id)}`."
    )
    lines = [
        f"• *#{md.escape(i.id)}* {md.escaped(i.title, 150)}"
        + (f" in <#{md.escape(i.channel)}>" if i.channel and i.channel != channel else "")
        for i in incidents
    ]
    return capped(head, lines, total)


def capped(head: str, lines: list[str], total: int) -> str:
    """`head`, the lines that fit, then how many of `total` were left out (room kept for it)."""
    kept = md.fit_lines(lines[:MAX_LINES], MAX_ANSWER - len(head) - 101)
    if total > len(kept):
        more = md.escape("`/queue <command> <ID>` acts on one of them.")
        kept.append(f"… and {total - len(kept)} more: {more}")
    return "\n".join([head, *kept] if head else kept)


def _channels(channels: set[str]) -> str:
    return ", ".join(f"<#{md.escape(c)}>" for c in sorted(channels)[:5])


def overview_line(incident: Incident, *, numbers: bool = True) -> str:
    """The incident with its root's numbers and runner types, from its root's source."""
    state = "firing" if incident.is_open else "resolved"
    line = f"*#{md.escape(incident.id)}* {md.escaped(incident.title, 150)} — {state}"
    if not numbers:
        return line
    head = headline(incident)
    if figures := head_figures(head):
        line += (", worst seen: " if head.worst else ", ") + ", ".join(figures)
    live = shown_live(incident)
    types = live.runner_types if live is not None else incident.runner_types
    if head.worst:
        types = incident.peaks.types or types
    for name, queue in sorted(types.items())[:OVERVIEW_TYPES]:
        said = [queued_said(queue.queued), wait_known(queue)]
        line += f"\n    • `{md.runner_name(name)}`: {', '.join(filter(None, said)) or 'no numbers'}"
    if (more := len(types) - OVERVIEW_TYPES) > 0:
        line += f"\n    • +{more} more runner types"
    return line
