"""The App Home (Slack's Home tab) as one view: every open incident across the channels, the early
warnings standing, the fleet now, and how to use the bot. A pure function of what it shows.

One view serves every viewer (nothing on it is personal), so it is rendered once a round and
published to each person who opened it. Slack allows a Home view 100 blocks and 250 kB: the lists
are capped and say what they left out, whatever the number of incidents or runner types. How
long an incident has fired is a Slack date token (`{ago}`), which each client keeps current, so
the view need not be published again as minutes pass (`now` only fills its fallback text).

`digests` says what a viewer would see change, in two parts: the state (which incidents, their
state, owner, worst runner type, links; the warnings) is published at once; the numbers (queues,
waits, busy runners) change with every reading and are published at a slower cadence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.domain.alerts import RunnerQueue
from bot.domain.early_warning import Phase, WarningState
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics, source_name, worst_first
from bot.domain.headline import headline, shown_live
from bot.domain.incidents import Incident
from bot.domain.runner_names import runner_key
from bot.domain.units import duration, number, wait_parts
from bot.render.mrkdwn import (
    context,
    escape,
    header,
    link,
    person,
    section,
    sections,
    slack_date,
    truncate,
)
from bot.render.queue import absent_text, advice_parts, judged_parts, reading_parts

CALLBACK_ID = "queuepilot_home"
MAX_HOME_BLOCKS = 100  # Slack's limit for a Home tab's view
MAX_INCIDENTS = 20
MAX_WARNINGS = 10
MAX_FLEET_TYPES = 15
MAX_TITLE = 150
MAX_NAME = 80
MAX_INCIDENT_TEXT = 1000
MAX_WARNING_TEXT = 600
MAX_FLEET_TEXT = 3000
MAX_LABEL = 200  # a link's label: the link must fit its line whole


@dataclass(frozen=True)
class Listed:
    """An open incident and the permalink of its root, where its thread is ("" while unknown)."""

    incident: Incident
    link: str = ""


@dataclass(frozen=True)
class Standing:
    """An early warning still standing, and the permalink of its message ("" while unknown)."""

    warning: WarningState
    link: str = ""


@dataclass(frozen=True)
class HomeState:
    """What the Home shows. `incidents` are the most recently opened of `open_count`; `fleet` is
    the latest live reading (None: no live backend, or none read yet, `fleet_note` says which);
    `backend` names where the numbers come from; `command` is the slash command."""

    incidents: tuple[Listed, ...] = ()
    open_count: int = 0
    warnings: tuple[Standing, ...] = ()
    fleet: FleetSnapshot | None = None
    fleet_note: str = ""
    backend: str = ""
    command: str = "/queue"


@dataclass(frozen=True)
class Digests:
    """What a viewer would see change: `state` at once, `numbers` at the slower cadence."""

    state: str
    numbers: str


def render_home(home: HomeState, now: datetime) -> dict[str, Any]:
    """The Home tab's view (`views.publish`'s `view`)."""
    blocks: list[dict[str, Any]] = [
        header("queuepilot · CI queues"),
        context(
            [f"Updated {slack_date(now, '{time}')} · refreshed when it opens and as things change"]
        ),
        {"type": "divider"},
        *_incidents(home, now),
        {"type": "divider"},
        *_warnings(home),
        {"type": "divider"},
        *_fleet(home),
        {"type": "divider"},
        section(_how_to(home.command)),
    ]
    return {"type": "home", "callback_id": CALLBACK_ID, "blocks": blocks[:MAX_HOME_BLOCKS]}


def digests(home: HomeState) -> Digests:
    """The view's two digests (see the module docstring): equal digests, the same view but for
    the clock."""
    state = {
        "open": home.open_count,
        "incidents": [_incident_state(listed) for listed in home.incidents],
        "warnings": [
            [s.warning.runner_type, s.warning.channel, s.warning.text, s.warning.held_since, s.link]
            for s in home.warnings
        ],
        "fleet": [home.fleet is not None, home.fleet_note, home.backend],
        "command": home.command,
    }
    numbers = {
        "incidents": [_worst_line(listed.incident, home.fleet) for listed in home.incidents],
        "fleet": _fleet_lines(home.fleet) if home.fleet is not None else [],
    }
    return Digests(_hashed(state), _hashed(numbers))


# -- open incidents --------------------------------------------------------------------------


def _incidents(home: HomeState, now: datetime) -> list[dict[str, Any]]:
    if not home.incidents:
        return [section("*Open incidents*\nNone open: the queues are quiet. ✅")]
    blocks = [section(f"*Open incidents* ({home.open_count}), the most recently opened first")]
    shown = home.incidents[:MAX_INCIDENTS]
    blocks += [section(_incident_text(listed, now, home.fleet)) for listed in shown]
    left = home.open_count - len(shown)
    if left > 0:
        blocks.append(
            context([f"… and {left} more: `{escape(home.command)} incidents` lists them."])
        )
    return blocks


def _incident_text(listed: Listed, now: datetime, fleet: FleetSnapshot | None) -> str:
    incident = listed.incident
    lines = [f"🔴 {_title(listed)}", " · ".join(_incident_facts(incident, now))]
    worst = _worst_line(incident, fleet)
    if worst:
        lines.append(worst)
    return truncate("\n".join(lines), MAX_INCIDENT_TEXT)


def _title(listed: Listed) -> str:
    incident = listed.incident
    priority = f"{incident.priority} · " if incident.priority else ""
    label = f"#{incident.id} · {priority}{incident.title}"
    if len(label) > MAX_LABEL:
        label = label[: MAX_LABEL - 1] + "…"
    if listed.link:
        # No "|" in a link's label: Slack ends the URL at the first, and one more makes the
        # token read two ways.
        return f"*{link(listed.link, label.replace('|', '¦'))}*"
    return f"*{truncate(escape(label), MAX_TITLE)}*"


def _incident_facts(incident: Incident, now: datetime) -> list[str]:
    started = _ago(incident.started_at, now)
    facts = [f"in <#{escape(incident.channel)}>" if incident.channel else "", f"started {started}"]
    if incident.acknowledged_by:
        owner = person(incident.acknowledged_by, incident.acknowledged_name)
        facts.append(f"{owner} is on it")
    else:
        facts.append("⚠️ nobody has acknowledged it")
    if incident.silence is not None:
        facts.append(f"🔕 silenced until {slack_date(incident.silence.until, '{time}')}")
    if incident.reopened:
        facts.append(f"reopened {incident.reopened}×")
    return [fact for fact in facts if fact]


def _ago(moment: datetime, now: datetime) -> str:
    """How long ago, as each Slack client keeps it current; the fallback (clients that cannot
    render the token, the local page among them) as of `now`."""
    return f"<!date^{int(moment.timestamp())}^{{ago}}|{duration(now - moment)} ago>"


def _worst(incident: Incident) -> tuple[str, RunnerQueue | RunnerTypeMetrics] | None:
    """The runner type worst off (longest wait, then most queued): from the live reading the
    root shows, else the alert's."""
    live = shown_live(incident)
    types: dict[str, Any] = dict(live.runner_types if live is not None else incident.runner_types)
    ranked = worst_first(types)
    return ranked[0] if ranked else None


def _worst_line(incident: Incident, fleet: FleetSnapshot | None) -> str:
    """The incident's worst runner type; its numbers from the reading the page shows under
    "The fleet now" when that reading has the type (one reading on the page), else the root's."""
    worst = _worst(incident)
    head = headline(incident)
    if worst is None:
        figures = [head.wait, f"{number(head.queued)} queued" if head.queued is not None else ""]
        said = " · ".join(f for f in figures if f)
        return f"Worst: {said}" if said else ""
    name, queue = worst
    parts = [f"`{truncate(escape(name), MAX_NAME)}`"]
    key = runner_key(name)
    now = fleet.runner_types if fleet is not None else {}
    judged = next((m.judged for n, m in now.items() if runner_key(n) == key), None)
    if judged is not None:
        parts += [*judged_parts(judged), *advice_parts(judged)]
        return "Worst runner type: " + " · ".join(parts)
    if queue.queued is not None:
        parts.append(f"{number(queue.queued)} queued")
    wait = wait_parts(queue.longest_wait_mins, over=queue.wait_over)
    if wait is not None:
        parts.append(f"{wait[0]} {wait[1]}")
    return "Worst runner type: " + " · ".join(parts)


def _incident_state(listed: Listed) -> list[Any]:
    incident = listed.incident
    worst = _worst(incident)
    silence = incident.silence.until.isoformat() if incident.silence is not None else ""
    return [
        incident.id,
        incident.uid,
        incident.status.value,
        incident.title,
        incident.priority or "",
        incident.channel,
        incident.started_at.isoformat(),
        incident.acknowledged_by or "",
        incident.acknowledged_name,
        silence,
        incident.reopened,
        worst[0] if worst is not None else "",
        listed.link,
    ]


# -- early warnings --------------------------------------------------------------------------


def _warnings(home: HomeState) -> list[dict[str, Any]]:
    if not home.warnings:
        return [context(["No early warning stands: no queue is building toward its alert."])]
    blocks = [section(f"*Early warnings* ({len(home.warnings)}): queues building toward an alert")]
    shown = home.warnings[:MAX_WARNINGS]
    blocks += [section(_warning_text(standing)) for standing in shown]
    left = len(home.warnings) - len(shown)
    if left > 0:
        blocks.append(context([f"… and {left} more, each in its channel."]))
    return blocks


def _warning_text(standing: Standing) -> str:
    warning = standing.warning
    name = warning.runner_type
    label = (name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…").replace("|", "¦")
    label = label.strip() or "(unnamed runner type)"
    shown = link(standing.link, label) if standing.link else f"`{escape(label)}`"
    where = f" in <#{escape(warning.channel)}>" if warning.channel else ""
    hold = " (on hold: no fresh reading)" if warning.held_since else ""
    text = truncate(escape(warning.text), MAX_WARNING_TEXT - 200)
    return truncate(f"⏳ {shown}{where}{hold}: {text}", MAX_WARNING_TEXT)


# -- the fleet now ---------------------------------------------------------------------------


def _fleet(home: HomeState) -> list[dict[str, Any]]:
    fleet = home.fleet
    if fleet is None:
        note = home.fleet_note or "no live metrics backend: the incidents' numbers are the alerts'"
        return [section(f"*The fleet now*\n_{escape(note)}_")]
    source = escape(home.backend or source_name(fleet.source))
    head = f"*The fleet now* · live from {source} at {slack_date(fleet.at, '{time}')}"
    if home.fleet_note:
        head += f"\n⚠️ {truncate(escape(home.fleet_note), 300)}"
    lines = _fleet_lines(fleet) or ["_No runner type is known._"]
    return sections([head, *lines])[:2]


def _fleet_lines(fleet: FleetSnapshot) -> list[str]:
    """Per runner type, worst first: queued, longest wait, busy / max (or registered)."""
    ranked = worst_first(fleet.runner_types)
    absent, said = set(fleet.absent), absent_text(fleet)
    lines = [
        _fleet_line(name, metrics, said if name in absent else "")
        for name, metrics in ranked[:MAX_FLEET_TYPES]
    ]
    more = len(ranked) - len(lines) + fleet.hidden
    if more > 0:
        lines.append(f"+{more} more runner types (`/queue` lists them)")
    return lines


def _fleet_line(name: str, metrics: RunnerTypeMetrics, absent: str) -> str:
    """The reading's judgement of the type, as the root's line says it, and its maximum."""
    judged = metrics.judged
    if absent:
        parts = [absent]
    elif judged is None:  # a reading a 0.25 replica stored: it judges none
        parts = reading_parts(metrics)
        if metrics.busy is not None and metrics.maximum is not None:
            parts.append(f"busy {number(metrics.busy)} / max {number(metrics.maximum)}")
        elif metrics.busy is not None and metrics.registered is not None:
            parts.append(f"busy {number(metrics.busy)} / {number(metrics.registered)} registered")
    else:
        parts = judged_parts(judged)
        if judged.maximum is not None:
            parts.append(f"max {number(judged.maximum)}")
        parts += advice_parts(judged)
    label = truncate(escape(name), MAX_NAME)
    return f"• `{label}`: {' · '.join(parts) or 'no numbers'}"


# -- for someone new -------------------------------------------------------------------------


def _how_to(command: str) -> str:
    cmd = escape(command)
    return "\n".join(
        [
            "*New to queuepilot?*",
            "• When a CI queue's alert fires, queuepilot opens an *incident*: one message in the "
            "team's channel, kept up to date, and a thread with status updates and everything "
            "people did.",
            "• On that message, *Acknowledge* says you are on it; *Silence*, *Scale up…*, "
            "*Diagnose* and *Resolve* do what they say, and the thread records it.",
            "• An *early warning* comes before the alert when a queue keeps building: scale up "
            "from it, or dismiss it.",
            f"• `{cmd}` shows the queues now, `{cmd} incidents` the recent incidents, "
            f"`{cmd} help` every command.",
        ]
    )


def _hashed(value: Any) -> str:
    raw = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def standing_warnings(warnings: Iterable[WarningState]) -> list[WarningState]:
    """The warnings a Home lists: those still standing (a forecast crossing soon), newest first."""
    active = [w for w in warnings if w.phase is Phase.ACTIVE]
    return sorted(active, key=lambda w: (-w.warned_at, w.runner_type))
