"""An incident's root message: its dashboard, re-rendered and edited in place after every change.

It depends on state only, never on `now` (times are Slack date tokens each client renders), so
`bot.outbound.edits` can skip an edit whose rendering is unchanged. People are named with
`person`, never mentioned, in lines that change on routine edits; only the owner is mentioned.
Every button's value is the incident's reference; the silence select has none of its own, so the
reference also rides in the block_id of the facts' context (`incident_ref_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from bot.domain.alert_issue import issue_number
from bot.domain.alerts import RunnerQueue
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics, source_name, worst_first
from bot.domain.headline import Headline, headline, shown_live
from bot.domain.incident_fleet import alert_fleet
from bot.domain.incidents import RECENT_ACTIONS, Event, Incident, sums_types
from bot.domain.judgement import DRAIN_TARGET_MINS
from bot.domain.message import Rendered
from bot.domain.units import duration, minutes, number, wait_parts
from bot.render.mrkdwn import (
    actions,
    button,
    context,
    escape,
    fields,
    header,
    is_linkable,
    link,
    mention,
    person,
    plain,
    rendered,
    runner_name,
    section,
    shorten,
    slack_date,
    time_of,
    truncate,
)
from bot.render.queue import advice_parts, source_note, type_lines
from bot.render.replies import (
    capped_rows,
    peak_queued_label,
    queue_numbers,
    render_event,
    render_status,
    render_summary,
    resolved_how,
    title_text,
)

__all__ = [
    "ACTIONS_BLOCK_ID",
    "SILENCE_OPTIONS",
    "Rendered",
    "escape",
    "incident_ref",
    "incident_ref_of",
    "link",
    "render_event",
    "render_root",
    "render_status",
    "render_summary",
]

ACTIONS_BLOCK_ID = "incident_actions"
INCIDENT_BLOCK_PREFIX = "incident:"
SILENCE_OPTIONS = (
    (1800, "30 minutes"),
    (3600, "1 hour"),
    (7200, "2 hours"),
    (14400, "4 hours"),
    (28800, "8 hours"),
    (86400, "24 hours"),
)
SOURCE_NAMES = {"grafana": "Grafana", "alertmanager": "Alertmanager"}
MAX_RESPONDERS = 5
ACTION_CHARS = 120  # an action's text, before its time and who did it


def render_root(
    incident: Incident,
    *,
    now: datetime,
    mentions: bool = True,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Rendered:
    """Title, status, numbers, runner types, facts, links, actions. Block Kit has no colours, so
    "turning green" is the ✅ and the actions going away. `mentions=False` for the first post,
    which notifies the channel: the owner is mentioned only in later edits. `within_mins` is the
    drain target the alert's numbers are judged for."""
    live = shown_live(incident)
    head = headline(incident)
    status = "\n".join(filter(None, [_status_line(incident, mentions), _responders(incident)]))
    blocks = [
        header(f"{'🔴' if incident.is_open else '✅'} {title_text(incident)}"),
        section(status),
    ]
    if summary := _summary(incident):
        blocks.append(section(summary))
    if head.live is not None:
        numbers = _live_fields(incident, head, head.live)
    else:
        numbers = _number_fields(incident, head)
    if numbers:
        label = _headline_label(incident, head)
        blocks.append(fields(numbers, more="+{n} more values", text=label))
    if live is not None:
        lines = type_lines(live, incident.trend) or ["_No runner type is queueing._"]
        blocks.append(section("*Runner types* (worst first)\n" + "\n".join(lines)))
        if live.note and incident.is_open:
            note = source_note(live, source_name(live.source))
            blocks.append(context([truncate(note, 2000)]))
    elif incident.runner_types:
        blocks.append(section(_runner_listing(incident, now, within_mins)))
    if incident.likely_cause.strip():
        cause = escape(shorten(incident.likely_cause, 300))
        blocks.append(section(f"🩺 *Likely cause:* {cause}"))
    blocks.append(context(_facts(incident), block_id=incident_block_id(incident)))
    if links := _links(incident):
        blocks.append(context(links))
    if incident.truncated:
        notes = "; ".join(escape(note) for note in incident.truncated[:10])
        blocks.append(context([truncate(f"⚠️ Alert cut to fit: {notes}", 2000)]))
    if recent := incident.recent_actions[-RECENT_ACTIONS:]:
        latest = "\n".join(f"• {_action(event)}" for event in reversed(recent))
        blocks.append(context([f"*Latest*\n{latest}"]))
    if incident.is_open:
        blocks.append(_actions(incident))
    elif incident.silence is not None:
        # The alert is over but the silence made from Slack is not: keep the way to remove it.
        unsilence = button("Remove silence", "incident_unsilence", incident_ref(incident))
        blocks.append(actions([unsilence], ACTIONS_BLOCK_ID))
    return rendered(_fallback(incident), blocks)


def incident_ref(incident: Incident) -> str:
    """What buttons carry: the short ID people see and the UID that survives a data loss."""
    return f"{incident.id}:{incident.uid}"


def incident_block_id(incident: Incident) -> str:
    return INCIDENT_BLOCK_PREFIX + incident_ref(incident)


def incident_ref_of(message: dict[str, Any]) -> str | None:
    """The incident reference of a root message as Slack echoes it in an action payload."""
    for block in message.get("blocks") or ():
        block_id = block.get("block_id") if isinstance(block, dict) else None
        if isinstance(block_id, str) and block_id.startswith(INCIDENT_BLOCK_PREFIX):
            return block_id[len(INCIDENT_BLOCK_PREFIX) :] or None
    return None


def _status_line(incident: Incident, mentions: bool) -> str:
    def named(user_id: str, name: str) -> str:
        return mention(user_id) if mentions else person(user_id, name)

    if incident.is_open:
        parts = ["🔴 *Firing*"]
        if incident.firing_count > 1:
            parts.append(f"{incident.firing_count} alerts")
    else:
        how = resolved_how(incident, mentions=mentions)
        # How long it lasted, from the alert's own start: the queue hurt before the bot heard.
        took = (
            incident.resolved_at and f"after {duration(incident.resolved_at - incident.started_at)}"
        )
        parts = [" ".join(filter(None, ("✅ *Resolved*", how, took)))]
    if incident.acknowledged_by:
        parts.append(
            f"acknowledged by {named(incident.acknowledged_by, incident.acknowledged_name)}"
        )
    elif incident.is_open:
        parts.append("not acknowledged")
    if (silence := incident.silence) is not None:
        who = named(silence.by, silence.by_name)
        parts.append(f"🔕 silenced until {slack_date(silence.until)} by {who}")
    if incident.reopened:
        parts.append(f"reopened {incident.reopened}×")
    if incident.is_test:
        parts.append("🧪 Grafana test notification")
    parts.append(f"ID *{escape(incident.id)}*")
    return " · ".join(parts)


def _named(user_id: str, name: str) -> str:
    """A display name on one line: a newline in it would break the list."""
    return person(user_id, " ".join(name.split()))


def _responders(incident: Incident) -> str:
    """Who acted, in order of first action, the owner left out (the status line names them)."""
    others = [r for r in incident.responders if r.user_id != incident.acknowledged_by]
    if not others:
        return ""
    names = ", ".join(_named(r.user_id, r.name) for r in others[:MAX_RESPONDERS])
    more = len(others) - MAX_RESPONDERS
    return f"Responders: {names}" + (f" +{more}" if more > 0 else "")


def _action(event: Event) -> str:
    by = f" by {_named(event.actor, event.actor_name)}" if event.actor else ""
    return f"{time_of(event.at)} {escape(shorten(event.text, ACTION_CHARS))}{by}"


def _summary(incident: Incident) -> str:
    parts = [incident.summary.strip(), incident.description.strip()]
    if parts[0] == parts[1]:
        parts.pop()
    return "\n".join(truncate(escape(part), 1000) for part in parts if part)


def _thresholds(incident: Incident) -> tuple[float | None, float | None]:
    """The alert's wait and size thresholds, the peak's where the current numbers have none."""
    current, peak = incident.numbers, incident.peak
    time_threshold = current.queue_time_threshold
    size_threshold = current.queue_size_threshold
    return (
        peak.queue_time_threshold if time_threshold is None else time_threshold,
        peak.queue_size_threshold if size_threshold is None else size_threshold,
    )


def _number_fields(incident: Incident, head: Headline) -> list[str]:
    """The alert's headline numbers against their thresholds, other alert values when there are
    none. Queued jobs are the total over the runner types (`headline`); the peak goes beside them
    only as the same quantity, and alone with its label when the headline is the worst seen."""
    current, peak = incident.numbers, incident.peak
    time_threshold, size_threshold = _thresholds(incident)
    wait, queued = (None, None) if head.worst else (head.wait_mins, head.queued)
    alike = queued is None or incident.peak_summed == sums_types(incident.runner_types)
    summed = _summed(incident.runner_types.values())
    items = [
        _metric(
            "Longest wait",
            wait,
            peak.max_queue_time_mins,
            _against(time_threshold, current.queue_time_over, minutes),
            minutes,
        ),
        _metric(
            "Queued jobs",
            queued,
            peak.max_queue_size if alike else None,
            _against(size_threshold, current.queue_size_over, number, summed=summed),
            number,
            peak_label=peak_queued_label(incident),
        ),
    ]
    return [item for item in items if item] or [
        f"{truncate(escape(name), 100)} = *{number(value)}*"
        for name, value in incident.other_values.items()
    ]


def _headline_label(incident: Incident, head: Headline) -> str:
    """Where the headline's numbers come from, and when: one source at a time, so the root never
    shows the alert's 97 minutes over a live line of 114."""
    if head.live is not None:
        return (
            f"*Now* · live from {escape(source_name(head.live.source))} at {time_of(head.live.at)}"
        )
    if head.worst and (head.queued is not None or head.wait_mins is not None):
        return "*Worst seen*"  # the alert's and the readings' worst, not what the alert says
    said = f"*As the alert says* · {SOURCE_NAMES.get(incident.source, escape(incident.source))}"
    if incident.alerted_at is not None:
        said += f" at {time_of(incident.alerted_at)}"
    return said


def _live_fields(incident: Incident, head: Headline, live: FleetSnapshot) -> list[str]:
    """The headline from the live reading: the longest wait of the incident's runner types (as
    measured) and the jobs queued in them, against the alert's thresholds."""
    time_threshold, size_threshold = _thresholds(incident)
    items = []
    if head.wait_mins is not None:
        label, amount = wait_parts(
            head.wait_mins, over=head.wait_over, of_starts=head.wait_of_starts
        ) or ("", "")
        notes = [_against(time_threshold, None, minutes)]
        items.append(f"{label.capitalize()}: *{amount}*" + _notes(notes))
    if head.queued is not None:
        summed = _summed(live.runner_types.values())
        notes = [_against(size_threshold, None, number, summed=summed)]
        if live.missing:  # a sum without them would read as fewer than there are
            notes.append(f"{len(live.missing)} runner types unread")
        items.append(f"Queued jobs: *{number(head.queued)}*" + _notes(notes))
    return items


def _against(
    threshold: float | None,
    over: bool | None,
    shown: Callable[[float], str],
    *,
    summed: int = 1,
) -> str | None:
    """The number against its threshold, or, from a rule that says only whether it was crossed,
    that. A queue `summed` over several types is not what the rule holds to its threshold (a
    type's queue is): said so, or 4 + 10 queued against 12 reads crossed."""
    if threshold is not None:
        return f"threshold {shown(threshold)}" + (" for a runner type" if summed > 1 else "")
    if over is None:
        return None
    if summed > 1:
        return "a type over the rule's threshold" if over else "no type over the rule's threshold"
    return "over the rule's threshold" if over else "under the rule's threshold"


def _summed(types: Iterable[RunnerQueue | RunnerTypeMetrics]) -> int:
    return sum(1 for queue in types if queue.queued is not None)


def _metric(
    label: str,
    current: float | None,
    peak: float | None,
    against: str | None,
    shown: Callable[[float], str],
    *,
    peak_label: str = "",
) -> str:
    notes = [against]
    if current is None:
        if peak is None:
            return ""
        return f"{peak_label or 'Peak ' + label.lower()}: *{shown(peak)}*" + _notes(notes)
    if peak is not None and shown(peak) != shown(current):
        notes.append(f"peak {shown(peak)}")
    return f"{label}: *{shown(current)}*" + _notes(notes)


def _notes(notes: list[str | None]) -> str:
    said = [note for note in notes if note]
    return f" ({', '.join(said)})" if said else ""


def _runner_listing(incident: Incident, now: datetime, within_mins: float) -> str:
    """The alert's runner types, and while it fires the judgement of its numbers (the one the
    form and diagnostics give for them)."""
    judged = alert_fleet(incident, now=now, within_mins=within_mins).runner_types
    rows = []
    for name, queue in worst_first(incident.runner_types):
        row = f"• {runner_name(name)}: {queue_numbers(queue) or 'no numbers'}"
        verdict = judged[name].judged if name in judged else None
        if verdict is not None and incident.is_open:
            row += "".join(f" · {part}" for part in advice_parts(verdict))
        rows.append(row)
    return "*Runner types* (worst first)\n" + "\n".join(capped_rows(rows))


def _facts(incident: Incident) -> list[str]:
    facts = [
        f"Incident *{escape(incident.id)}*",
        # {ago} is rendered by the reader's client, so the age stays true without edits.
        f"Started {slack_date(incident.started_at, '{date_short_pretty} {time} ({ago})')}",
    ]
    if incident.team:
        facts.append(f"Team: {truncate(escape(incident.team), 200)}")
    facts.append(f"Source: {SOURCE_NAMES.get(incident.source, escape(incident.source))}")
    noun = "notification" if incident.notifications == 1 else "notifications"
    return [*facts, f"{incident.notifications} {noun}"]


def _links(incident: Incident) -> list[str]:
    """One context element per link, so a long Grafana silence URL cannot crowd out the others.
    The silence link is Grafana's form; when the incident was silenced elsewhere, it says so."""
    links = incident.links
    made = incident.silence.backend if incident.silence else ""
    silence = "🔕 Silence in Grafana"
    if made and made != "Grafana":
        silence = f"🔕 Grafana's silence form (this incident is silenced in {made})"
    issue = issue_number(links.issue)
    labelled = [
        (links.runbook, "📖 Runbook"),
        (links.alert, "🔔 View alert"),
        (links.silence, silence),
        (links.dashboard, "📈 Dashboard"),
        (links.panel, "📊 Panel"),
        (links.issue, "🐙 GitHub issue" + (f" #{issue}" if issue is not None else "")),
    ]
    return [
        link(url, label)
        if is_linkable(url)
        else f"{escape(label)}: {truncate(escape(url.strip()), 300)}"
        for url, label in labelled
        if url.strip()
    ]


def _actions(incident: Incident) -> dict[str, Any]:
    ref = incident_ref(incident)
    if incident.acknowledged_by:
        elements = [button("Take over", "incident_ack", ref)]
    else:
        elements = [button("Acknowledge", "incident_ack", ref, "primary")]
    if incident.silence is not None:
        elements.append(button("Remove silence", "incident_unsilence", ref))
    else:
        options = [{"text": plain(label), "value": str(s)} for s, label in SILENCE_OPTIONS]
        elements.append(
            {
                "type": "static_select",
                "action_id": "incident_silence",
                "placeholder": plain("Silence…"),
                "options": options,
            }
        )
    confirm = {
        "title": plain(f"Resolve incident {incident.id}?", 100),
        "text": plain(
            "This closes the incident and stops its status updates. "
            "If the alert fires again, it reopens.",
            300,
        ),
        "confirm": plain("Resolve", 30),
        "deny": plain("Cancel", 30),
        "style": "danger",
    }
    elements += [
        button("Scale up…", "incident_scale", ref),
        button("Run diagnostics", "incident_diagnose", ref),
        button("Resolve", "incident_resolve", ref, "danger") | {"confirm": confirm},
    ]
    return actions(elements, ACTIONS_BLOCK_ID)


def _fallback(incident: Incident) -> str:
    """Notification text: short, escaped, pinging nobody; its numbers are the headline's."""
    title = truncate(title_text(incident), 200)
    if not incident.is_open:
        return f"✅ Resolved: {title}"
    head = headline(incident)
    details = [head.wait, f"{number(head.queued)} queued" if head.queued is not None else ""]
    shown = ", ".join(detail for detail in details if detail)
    return f"🔴 {title}: {shown}" if shown else f"🔴 {title}"
