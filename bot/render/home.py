"""The App Home as one view, the same for everyone: open incidents, early warnings, pilots, the
fleet now, how to use the bot. `digests` tell a change of state, published at once, from a change
of numbers, published at a slower cadence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.domain.incident.headline import headline, shown_live
from bot.domain.incident.incidents import Incident
from bot.domain.reading.early_warning import Phase, WarningState
from bot.domain.reading.fleet import FleetSnapshot, of_type, source_name, worst_first
from bot.domain.scale.pilot import PilotState
from bot.domain.units import duration
from bot.render import mrkdwn as md
from bot.render.numbers import head_figures, read_at, type_lines, type_parts
from bot.render.pilot import render_pilot

CALLBACK_ID = "queuepilot_home"
MAX_HOME_BLOCKS = 100  # Slack's limit for a Home tab's view
MAX_INCIDENTS = 20
MAX_WARNINGS = 10
MAX_FLEET_TYPES = 15
MAX_LABEL = 200  # a link's label: the link must fit its line whole
DIVIDER = {"type": "divider"}
HOW_TO = (
    "*New to queuepilot?*\n"
    "• When a CI queue's alert fires, queuepilot opens an *incident*: one message in the "
    "team's channel, kept up to date, and a thread with status updates and everything "
    "people did.\n"
    "• On that message, *Acknowledge* says you are on it; *Silence*, *Scale up…*, "
    "*Diagnose* and *Resolve* do what they say, and the thread records it.\n"
    "• An *early warning* comes before the alert when a queue keeps building: scale up "
    "from it, or dismiss it.\n"
    "• `{cmd}` shows the queues now, `{cmd} incidents` the recent incidents, "
    "`{cmd} help` every command."
)


# The state a viewer sees of an incident: a change in any is published at once.
_SHOWN = {"id", "uid", "title", "priority", "channel", "started_at", "reopened"}
_SHOWN |= {"acknowledged", "silence"}


@dataclass(frozen=True)
class Listed:
    incident: Incident
    link: str = ""  # its root's permalink, "" while unknown


@dataclass(frozen=True)
class Standing:
    warning: WarningState
    link: str = ""  # its message's permalink, "" while unknown


@dataclass(frozen=True)
class StateLost:
    at: datetime
    found: int  # threads found again in Slack
    above: int  # new incidents are numbered above it


@dataclass(frozen=True)
class HomeState:
    """`incidents`: the latest opened of `open_count`; `fleet` None: `fleet_note` says why."""

    incidents: tuple[Listed, ...] = ()
    open_count: int = 0
    warnings: tuple[Standing, ...] = ()
    fleet: FleetSnapshot | None = None
    fleet_note: str = ""
    backend: str = ""
    command: str = "/queue"
    lost: StateLost | None = None  # Redis lost the state lately: said at the top
    pilots: tuple[PilotState, ...] = ()  # the types SCALER_TARGETS gives a pilot


@dataclass(frozen=True)
class Digests:
    state: str
    numbers: str


def render_home(home: HomeState, now: datetime) -> dict[str, Any]:
    updated = f"Updated {md.time_of(now)} · refreshed when it opens and as things change"
    blocks = [
        md.header("queuepilot · CI queues"),
        md.context([updated]),
        *_lost(home.lost),
        DIVIDER,
        *_incidents(home, now),
        DIVIDER,
        *_warnings(home),
        DIVIDER,
        *([md.section(render_pilot(home.pilots, home.command)), DIVIDER] if home.pilots else []),
        *_fleet(home),
        DIVIDER,
        md.section(HOW_TO.format(cmd=md.escape(home.command))),
    ]
    return {"type": "home", "callback_id": CALLBACK_ID, "blocks": blocks[:MAX_HOME_BLOCKS]}


def digests(home: HomeState) -> Digests:
    """Equal digests, the same view but for the clock."""
    state = {
        "open": home.open_count,
        "incidents": [
            [
                listed.incident.model_dump(mode="json", include=_SHOWN),
                (_worst(listed.incident) or [""])[0],
                listed.link,
            ]
            for listed in home.incidents
        ],
        "warnings": [
            [s.warning.runner_type, s.warning.channel, s.warning.text, s.warning.held_since, s.link]
            for s in home.warnings
        ],
        "fleet": [home.fleet is not None, home.fleet_note, home.backend],
        "command": home.command,
        "lost": home.lost.at.timestamp() if home.lost is not None else None,
        "pilots": [
            [p.runner_type, p.enabled, repr(p.paused), p.piloted.last, p.piloted.outcome]
            for p in home.pilots
        ],
    }
    fleet = type_lines(home.fleet, top=MAX_FLEET_TYPES, home=True) if home.fleet is not None else []
    numbers = {
        "incidents": [_worst_line(listed.incident, home.fleet) for listed in home.incidents],
        "fleet": fleet,
        "pilots": [p.piloted.why for p in home.pilots],  # what it is doing moves every reading
    }
    return Digests(_hashed(state), _hashed(numbers))


def _lost(lost: StateLost | None) -> list[dict[str, Any]]:
    if lost is None:
        return []
    at = md.time_of(lost.at)
    text = (
        f"⚠️ *queuepilot lost its state at {at}*: its Redis was emptied (a failover to an empty "
        "replica, a restart without persistence). Incidents from before, who acknowledged them "
        f"and their silences are forgotten; {lost.found} thread(s) found in Slack go on when "
        f"their alert notifies again, and new incidents are numbered above {lost.above}. "
        "Operators: turn on Redis persistence (the operations guide, *Backup and restore*)."
    )
    return [md.section(text)]


def _incidents(home: HomeState, now: datetime) -> list[dict[str, Any]]:
    if not home.incidents:
        return [md.section("*Open incidents*\nNone open: the queues are quiet. ✅")]
    blocks = [md.section(f"*Open incidents* ({home.open_count}), the most recently opened first")]
    shown = home.incidents[:MAX_INCIDENTS]
    blocks += [md.section(_incident_text(listed, now, home.fleet)) for listed in shown]
    if (left := home.open_count - len(shown)) > 0:
        more = f"… and {left} more: `{md.escape(home.command)} incidents` lists them."
        blocks.append(md.context([more]))
    return blocks


def _incident_text(listed: Listed, now: datetime, fleet: FleetSnapshot | None) -> str:
    incident = listed.incident
    priority = f"{incident.priority} · " if incident.priority else ""
    title = md.truncate(f"#{incident.id} · {priority}{incident.title}", MAX_LABEL)
    title = md.link(listed.link, md.link_label(title)) if listed.link else md.escaped(title, 150)
    started = f"<!date^{int(incident.started_at.timestamp())}^{{ago}}|"
    started += f"{duration(now - incident.started_at)} ago>"
    facts = [f"in <#{md.escape(incident.channel)}>"] if incident.channel else []
    facts.append(f"started {started}")
    if incident.acknowledged.by:
        facts.append(f"{md.person(incident.acknowledged.by, incident.acknowledged.name)} is on it")
    else:
        facts.append("⚠️ nobody has acknowledged it")
    if incident.silence is not None:
        facts.append(f"🔕 silenced until {md.time_of(incident.silence.until)}")
    if incident.reopened:
        facts.append(f"reopened {incident.reopened}×")
    lines = [f"🔴 *{title}*", " · ".join(facts), _worst_line(incident, fleet)]
    return md.truncate("\n".join(filter(None, lines)), 1000)


def _worst(incident: Incident) -> tuple[str, Any] | None:
    """The runner type worst off: from the live reading the root shows, else the alert's."""
    live = shown_live(incident)
    ranked = worst_first(dict(live.runner_types if live is not None else incident.runner_types))
    return ranked[0] if ranked else None


def _worst_line(incident: Incident, fleet: FleetSnapshot | None) -> str:
    """The incident's worst runner type, its numbers from "The fleet now" where it has the type."""
    worst = _worst(incident)
    if worst is None:
        said = " · ".join(head_figures(headline(incident)))
        return f"Worst: {said}" if said else ""
    name, queue = worst
    found = of_type(fleet.runner_types, name) if fleet is not None else None
    judged = found if found is not None and found.judged is not None else None
    parts, advice = type_parts(judged) if judged else type_parts(queue, bold=False)
    return " · ".join([f"Worst runner type: `{md.runner_name(name)}`", *parts, *advice])


def _warnings(home: HomeState) -> list[dict[str, Any]]:
    if not home.warnings:
        return [md.context(["No early warning stands: no queue is building toward its alert."])]
    blocks = [
        md.section(f"*Early warnings* ({len(home.warnings)}): queues building toward an alert")
    ]
    blocks += [md.section(_warning_text(standing)) for standing in home.warnings[:MAX_WARNINGS]]
    if (left := len(home.warnings) - MAX_WARNINGS) > 0:
        blocks.append(md.context([f"… and {left} more, each in its channel."]))
    return blocks


def _warning_text(standing: Standing) -> str:
    warning = standing.warning
    name = md.link_label(md.truncate(warning.runner_type, 80)).strip() or "(unnamed runner type)"
    shown = md.link(standing.link, name) if standing.link else f"`{md.escape(name)}`"
    where = f" in <#{md.escape(warning.channel)}>" if warning.channel else ""
    hold = " (on hold: no fresh reading)" if warning.held_since else ""
    text = md.escaped(warning.text, 400)
    return md.truncate(f"⏳ {shown}{where}{hold}: {text}", 600)


def _fleet(home: HomeState) -> list[dict[str, Any]]:
    fleet = home.fleet
    if fleet is None:
        note = home.fleet_note or "no live metrics backend: the incidents' numbers are the alerts'"
        return [md.section(f"*The fleet now*\n_{md.escape(note)}_")]
    source = md.escape(home.backend or source_name(fleet.source))
    head = f"*The fleet now* · live from {source} {read_at(fleet)}"
    if home.fleet_note:
        head += f"\n⚠️ {md.escaped(home.fleet_note, 300)}"
    lines = type_lines(fleet, top=MAX_FLEET_TYPES, home=True) or ["_No runner type is known._"]
    return md.sections([head, *lines])[:2]


def _hashed(value: Any) -> str:
    raw = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def standing_warnings(warnings: Iterable[WarningState]) -> list[WarningState]:
    """The warnings a Home lists: those still standing, newest first."""
    active = [w for w in warnings if w.phase is Phase.ACTIVE]
    return sorted(active, key=lambda w: (-w.warned_at, w.runner_type))
