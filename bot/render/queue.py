"""Live queues as people read them, one line per runner type, worst first, shared by the root,
status replies, `/queue`, diagnostics and the App Home. Each line renders the reading's judgement
(`bot.domain.judgement`) and computes none of its own: `• linux.2xlarge: *43* queued · longest
wait *10 min* · busy 120/120, 8 booting · ▂▄▆█ · ▲ rising +3.0 jobs/min · +6 runners …`.
Then `/queue`'s overview: those lines under a live reading, and the open incidents.
"""

from __future__ import annotations

from datetime import timedelta

from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics, source_name, worst_first
from bot.domain.headline import Headline, headline, shown_live
from bot.domain.incidents import Incident
from bot.domain.judgement import Judgement
from bot.domain.routes import Routing
from bot.domain.runner_names import runner_key
from bot.domain.trend import SPARK_POINTS, Trend, sparkline
from bot.domain.units import minutes, number, wait_parts, wait_said
from bot.render import mrkdwn as md

TOP_TYPES = 5  # the root and status show the worst few; `/queue` shows more
LIVE_TYPES = 10  # the worst runner types `/queue` lists from the live backend
OVERVIEW_TYPES = 5  # an incident's runner types in its `/queue` line
# An ephemeral answer is one section-sized text: the overview says how many it left out.
MAX_ANSWER = 2900
MAX_LINES = 20
EMPTY = Trend()


def absent_text(view: FleetSnapshot) -> str:
    """What a source that lists no job of a type said of it: nothing queued, or, from one that
    counts only jobs queued longer than a threshold, nothing queued longer than that."""
    over = view.queued_over_mins
    return f"none queued over {minutes(over)}" if over else "none queued"


def judged_parts(j: Judgement) -> list[str]:
    """A judgement's numbers, in the order every surface shows them."""
    parts = []
    if j.queued is not None:
        parts.append(f"*{number(j.queued)}* queued")
    if said := wait_part(j):
        parts.append(said)
    if j.busy is not None and j.registered is not None:
        runners = f"busy {number(j.busy)}/{number(max(j.registered, j.busy))}"
        parts.append(runners + (f", {j.booting} booting" if j.booting else ""))
    return parts


def wait_part(j: Judgement, *, bold: bool = True) -> str:
    """ "longest wait *12 min*", with "as the alert said at 14:02" where the alert's stands in
    for the reading's, or a plain "longest wait not known: …" while jobs queue; "" otherwise."""
    if not j.wait:
        return md.escape(j.not_known)
    when = f" as the alert said at {md.time_of(j.wait_alert_at)}" if j.wait_alert_at else ""
    return f"{j.wait_label} {f'*{j.wait}*' if bold else j.wait}{when}"


def advice_parts(j: Judgement) -> list[str]:
    return [part for part in (j.heading, j.advice) if part]


def type_parts(metrics: RunnerTypeMetrics | None, absent: str = "") -> tuple[list[str], list[str]]:
    """A type's numbers and advice: its judgement's; `absent` where the source did not list it (no
    count was read: not "0 queued"); a reading judged nothing of: its numbers alone."""
    if absent or metrics is None:
        return [absent] if absent else [], []
    if (j := metrics.judged) is not None:
        return judged_parts(j), advice_parts(j)
    parts = [f"*{number(metrics.queued)}* queued"] if metrics.queued is not None else []
    wait = wait_parts(
        metrics.longest_wait_mins, over=metrics.wait_over, of_starts=metrics.wait_of_starts
    )
    return [*parts, f"{wait[0]} *{wait[1]}*"] if wait is not None else parts, []


def head_figures(head: Headline) -> list[str]:
    """The headline's longest wait and queued jobs, as every one-line surface says them."""
    queued = f"{number(head.queued)} queued" if head.queued is not None else ""
    return [figure for figure in (head.wait, queued) if figure]


def type_lines(
    view: FleetSnapshot, trend: Trend = EMPTY, *, top: int = TOP_TYPES, home: bool = False
) -> list[str]:
    """The worst `top` types, then how many more were left out; on the App Home (`home`), the
    names as code and each type's maximum."""
    ranked = worst_first(view.runner_types)
    absent = absent_text(view)
    lines = []
    for name, metrics in ranked[:top]:
        here = absent if name in view.absent else ""
        parts, advice = type_parts(metrics, here)
        if spark := sparkline(trend.queued_of(name, SPARK_POINTS)):
            parts.append(spark)  # plain: Slack draws inline code red on grey; bars need no escape
        label = md.runner_name(name) if name else "all runner types"
        if home:
            label = f"`{md.runner_name(name)}`"
            parts += [] if here else _maximum(metrics)
        lines.append(f"• {label}: {' · '.join(parts + advice) or 'no numbers'}")
    if more := max(len(ranked) - top, 0) + view.hidden:
        lines.append(f"+{more} more runner types (`/queue` lists them)")
    return lines


def _maximum(metrics: RunnerTypeMetrics) -> list[str]:
    j, busy = metrics.judged, metrics.busy
    if j is not None:
        return [f"max {number(j.maximum)}"] if j.maximum is not None else []
    if busy is None:
        return []
    if metrics.maximum is not None:
        return [f"busy {number(busy)} / max {number(metrics.maximum)}"]
    registered = metrics.registered
    return (
        [f"busy {number(busy)} / {number(registered)} registered"] if registered is not None else []
    )


def source_note(view: FleetSnapshot) -> str:
    """Where the numbers come from, when a paced reading was made, and what went wrong if they
    are the alert's instead."""
    if view.note and not view.is_live:
        return f"⚠️ {md.escape(view.note)}"
    head = f"Live from {md.escape(source_name(view.source))}" if view.is_live else "From the alert"
    if view.is_live and view.paced_s:
        head += f", read {read_at(view)}"
    return f"{head} · ⚠️ {md.escape(view.note)}" if view.note else head


def read_at(fleet: FleetSnapshot) -> str:
    """When the reading was made, and when the next comes where its source paces it to a quota
    (GitHub's): a reading that stands for minutes says its age. Ordinary pacing, no warning."""
    when = f"at {md.time_of(fleet.at)}"
    if fleet.paced_s:
        when += f", next at {md.time_of(fleet.at + timedelta(seconds=fleet.paced_s))}"
    return when


def live_queue(
    source: str,
    fleet: FleetSnapshot | None,
    error: str,
    incidents: list[Incident],
    routing: Routing,
    channel: str,
) -> str:
    """`/queue`'s live queue by runner type from `source`'s latest reading (`error`: why the
    latest read failed): in a team's channel the types it owns, with the sparklines of the open
    incident that shows most of them."""
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
        head += f"\n⚠️ {md.escape(fleet.note)}"
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
    """The trend of the open incident that shows most of these runner types, for the sparklines
    its root shows (none open: the reading alone)."""
    listed = {runner_key(name) for name in fleet.runner_types}

    def shared(incident: Incident) -> int:
        return len(listed & {runner_key(name) for name in incident.shown_types})

    best = max(incidents, key=shared, default=None)
    return best.trend if best is not None and shared(best) else EMPTY


def open_incidents(
    head: str, here: list[Incident], elsewhere: list[Incident], *, numbers: bool = True
) -> str:
    """The open incidents of this channel under `head`, and a line for those in other channels;
    without `numbers` when `head` is a live reading (an older one beside it would disagree)."""
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
    """`head` and as many lines as fit MAX_LINES and MAX_ANSWER, then how many of `total` were
    left out (room reserved for it)."""
    kept = [head] if head else []
    size = len(head) + 100
    for line in lines[:MAX_LINES]:
        if size + len(line) + 1 > MAX_ANSWER:
            break
        kept.append(line)
        size += len(line) + 1
    shown = len(kept) - (1 if head else 0)
    if total > shown:
        more = md.escape("`/queue <command> <ID>` acts on one of them.")
        kept.append(f"… and {total - shown} more: {more}")
    return "\n".join(kept)


def _channels(channels: set[str]) -> str:
    return ", ".join(f"<#{md.escape(c)}>" for c in sorted(channels)[:5])


def overview_line(incident: Incident, *, numbers: bool = True) -> str:
    """The incident with its root's numbers and runner types, from the same source as its root
    (the live reading, else the alert; resolved, the worst seen)."""
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
        types = incident.peak_types or types
    for name, queue in sorted(types.items())[:OVERVIEW_TYPES]:
        said = [f"{number(queue.queued)} queued"] if queue.queued is not None else []
        if isinstance(queue, RunnerTypeMetrics) and queue.judged is not None:
            said.append(wait_part(queue.judged, bold=False))
        else:
            wait = (queue.longest_wait_mins, queue.wait_over, queue.wait_of_starts)
            said.append(
                wait_said(wait[0], over=wait[1], of_starts=wait[2])
                or ("longest wait not known" if queue.queued else "")
            )
        line += f"\n    • `{md.runner_name(name)}`: {', '.join(filter(None, said)) or 'no numbers'}"
    if (more := len(types) - OVERVIEW_TYPES) > 0:
        line += f"\n    • +{more} more runner types"
    return line
