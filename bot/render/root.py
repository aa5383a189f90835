"""Block Kit rendering of an incident: the root message here, thread replies in
`bot.render.replies`.

Every message is a pure function of state. The root is the incident's dashboard, re-rendered and
edited in place after every change; `bot.outbound.edits` skips the edit when the rendering is
unchanged, so the root deliberately depends on state only, not on `now` (times are Slack date tokens
that each client renders in its reader's time zone, and stay right without re-rendering).

How the action handlers find the incident: every button's `value` is the incident ID. The silence
select has no value of its own (its option values are durations) and the actions block's ID is
fixed ("incident_actions"), so the ID also rides in the block_id of the context block that shows
it: `incident_id_of(message)` reads it back from the message Slack sends with the action.
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
from bot.domain.incidents import Incident, sums_types
from bot.domain.judgement import DRAIN_TARGET_MINS
from bot.domain.message import Rendered
from bot.domain.units import duration, minutes, number, wait_parts
from bot.render.activity import latest_actions, likely_cause_line, responders_line
from bot.render.mrkdwn import (
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
    section,
    slack_date,
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
    runner_name,
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
MAX_SUMMARY = 1000
MAX_VALUE_NAME = 100
MAX_FALLBACK_TITLE = 200


def render_root(
    incident: Incident,
    *,
    now: datetime,
    mentions: bool = True,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Rendered:
    """The incident's dashboard: title, status, numbers, runner types, facts, links, actions.

    Block Kit has no colours for blocks, so "turning green" on resolve is the ✅ in the header
    and the status line, and the actions disappear. `mentions=False` for the first post, which
    notifies the channel: the owner is named there, mentioned only in later edits.
    `within_mins` is the drain target (`DRAIN_TARGET_MINUTES`) the alert's numbers are judged
    for (a live reading was judged for it when it arrived).
    """
    status = _status_line(incident, mentions=mentions)
    responders = responders_line(incident)
    status = f"{status}\n{responders}" if responders else status
    blocks = [header(_header_text(incident)), section(status)]
    summary = _summary(incident)
    if summary:
        blocks.append(section(summary))
    live = shown_live(incident)
    head = headline(incident)  # a reading without numbers: the alert's
    numbers = (
        _live_fields(incident, head) if head.live is not None else _number_fields(incident, head)
    )
    if numbers:
        block = fields(numbers, more="+{n} more values")
        blocks.append({**block, "text": section(_headline_label(incident, head))["text"]})
    if live is not None:
        blocks.append(section(_live_listing(incident, live)))
    elif incident.runner_types:
        blocks.append(section(_runner_listing(incident, now, within_mins)))
    if live is not None and live.note and incident.is_open:
        blocks.append(context([truncate(source_note(live, source_name(live.source)), 2000)]))
    cause = likely_cause_line(incident)
    if cause:
        blocks.append(section(cause))
    blocks.append(context(_facts(incident), block_id=incident_block_id(incident)))
    links = _links(incident)
    if links:
        blocks.append(context(links))
    if incident.truncated:
        notes = "; ".join(escape(note) for note in incident.truncated[:10])
        blocks.append(context([truncate(f"⚠️ Alert cut to fit: {notes}", 2000)]))
    latest = latest_actions(incident)
    if latest:
        blocks.append(context([latest]))
    if incident.is_open:
        blocks.append(_actions(incident))
    elif incident.silence is not None:
        # The alert is over but the silence made from Slack is not: keep the way to remove it.
        unsilence = _button("Remove silence", "incident_unsilence", incident_ref(incident))
        blocks.append({"type": "actions", "block_id": ACTIONS_BLOCK_ID, "elements": [unsilence]})
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


def _header_text(incident: Incident) -> str:
    return f"{'🔴' if incident.is_open else '✅'} {title_text(incident)}"


def _status_line(incident: Incident, *, mentions: bool) -> str:
    if incident.is_open:
        parts = ["🔴 *Firing*"]
        if incident.firing_count > 1:
            parts.append(f"{incident.firing_count} alerts")
    else:
        resolved = ("✅ *Resolved*", resolved_how(incident, mentions=mentions), _span(incident))
        parts = [" ".join(part for part in resolved if part)]
    if incident.acknowledged_by:
        owner = (
            mention(incident.acknowledged_by)
            if mentions
            else person(incident.acknowledged_by, incident.acknowledged_name)
        )
        parts.append(f"acknowledged by {owner}")
    elif incident.is_open:
        parts.append("not acknowledged")
    if incident.silence is not None:
        silence = incident.silence
        who = mention(silence.by) if mentions else person(silence.by, silence.by_name)
        parts.append(f"🔕 silenced until {slack_date(silence.until)} by {who}")
    if incident.reopened:
        parts.append(f"reopened {incident.reopened}×")
    if incident.is_test:
        parts.append("🧪 Grafana test notification")
    parts.append(f"ID *{escape(incident.id)}*")
    return " · ".join(parts)


def _span(incident: Incident) -> str:
    """How long it lasted, from the alert's own start: the queue hurt before the bot heard of it."""
    if incident.resolved_at is None:
        return ""
    return f"after {duration(incident.resolved_at - incident.started_at)}"


def _summary(incident: Incident) -> str:
    parts = [incident.summary.strip(), incident.description.strip()]
    if parts[0] == parts[1]:
        parts.pop()
    return "\n".join(truncate(escape(part), MAX_SUMMARY) for part in parts if part)


def _number_fields(incident: Incident, head: Headline) -> list[str]:
    """The headline numbers against their thresholds; other alert values when there are none.

    Queued jobs are the total over the alert's runner types, as a status and the summary say
    them (`headline`); the peak goes beside them only as the same quantity (a total beside a
    total, the alert's own figure beside its own), and alone with its label
    (`peak_queued_label`) when the headline is the worst seen."""
    current, peak = incident.numbers, incident.peak
    time_threshold = _first(current.queue_time_threshold, peak.queue_time_threshold)
    size_threshold = _first(current.queue_size_threshold, peak.queue_size_threshold)
    wait, queued = (None, None) if head.worst else (head.wait_mins, head.queued)
    alike = queued is None or incident.peak_summed == sums_types(incident.runner_types)
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
            _against(
                size_threshold,
                current.queue_size_over,
                number,
                summed=_summed(incident.runner_types.values()),
            ),
            number,
            peak_label=peak_queued_label(incident),
        ),
    ]
    present = [item for item in items if item]
    if present:
        return present
    return [
        f"{truncate(escape(name), MAX_VALUE_NAME)} = *{number(value)}*"
        for name, value in incident.other_values.items()
    ]


def _headline_label(incident: Incident, head: Headline) -> str:
    """Where the headline's numbers come from, and when: one source at a time, so the root never
    shows the alert's 97 minutes over a live line of 114."""
    live = head.live
    if live is not None:
        when = slack_date(live.at, "{time}")
        return f"*Now* · live from {escape(source_name(live.source))} at {when}"
    if head.worst and (head.queued is not None or head.wait_mins is not None):
        return "*Worst seen*"  # the alert's and the readings' worst, not what the alert says
    said = f"*As the alert says* · {SOURCE_NAMES.get(incident.source, escape(incident.source))}"
    if incident.alerted_at is not None:
        said += f" at {slack_date(incident.alerted_at, '{time}')}"
    return said


def _live_fields(incident: Incident, head: Headline) -> list[str]:
    """The headline from the live reading (`headline`): the longest wait of the incident's
    runner types (as measured: "over", a start's time) and the jobs queued in them, against the
    alert's thresholds."""
    current = incident.numbers
    time_threshold = _first(current.queue_time_threshold, incident.peak.queue_time_threshold)
    size_threshold = _first(current.queue_size_threshold, incident.peak.queue_size_threshold)
    missing = head.live.missing if head.live is not None else ()
    items = []
    if head.wait_mins is not None:
        label, amount = wait_parts(
            head.wait_mins, over=head.wait_over, of_starts=head.wait_of_starts
        ) or ("", "")
        against = _against(time_threshold, None, minutes)
        items.append(f"{label.capitalize()}: *{amount}*" + _notes([against] if against else []))
    if head.queued is not None:
        live_types = head.live.runner_types.values() if head.live is not None else ()
        notes = [_against(size_threshold, None, number, summed=_summed(live_types))]
        if missing:  # a sum without them would read as fewer than there are
            notes.append(f"{len(missing)} runner types unread")
        items.append(f"Queued jobs: *{number(head.queued)}*" + _notes([n for n in notes if n]))
    return items


def _against(
    threshold: float | None,
    over: bool | None,
    shown: Callable[[float], str],
    *,
    summed: int = 1,
) -> str | None:
    """The number against its threshold: where it is, or, from a rule that says only whether it
    was crossed, that. A queue `summed` over several runner types is not what the rule holds
    to its threshold (a type's queue is): said so, or 4 + 10 queued against 12 reads crossed."""
    each = " for a runner type" if summed > 1 else ""
    if threshold is not None:
        return f"threshold {shown(threshold)}{each}"
    if over is None:
        return None
    if summed > 1:
        return "a type over the rule's threshold" if over else "no type over the rule's threshold"
    return "over the rule's threshold" if over else "under the rule's threshold"


def _summed(types: Iterable[RunnerQueue | RunnerTypeMetrics]) -> int:
    """How many runner types' queues a headline total adds up."""
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
    notes = [against] if against is not None else []
    if current is None:
        if peak is None:
            return ""
        return f"{peak_label or 'Peak ' + label.lower()}: *{shown(peak)}*" + _notes(notes)
    if peak is not None and shown(peak) != shown(current):
        notes.append(f"peak {shown(peak)}")
    return f"{label}: *{shown(current)}*" + _notes(notes)


def _notes(notes: list[str]) -> str:
    return f" ({', '.join(notes)})" if notes else ""


def _first(*values: float | None) -> float | None:
    return next((value for value in values if value is not None), None)


def _live_listing(incident: Incident, live: FleetSnapshot) -> str:
    head = "*Runner types* (worst first)"  # live, as the headline above says
    lines = type_lines(live, incident.trend)
    return head + "\n" + "\n".join(lines or ["_No runner type is queueing._"])


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
    facts.append(f"{incident.notifications} {noun}")
    return facts


def _links(incident: Incident) -> list[str]:
    """One context element per link: a long Grafana silence URL cannot crowd out the others.

    The silence link is the alert's own (Grafana's `silenceURL`): it opens Grafana's silence
    form. When the incident was silenced from Slack in another place (Alertmanager), the label
    says so, lest a responder look in Grafana for a silence that lives elsewhere."""
    links = incident.links
    made = incident.silence.backend if incident.silence else ""
    silence = "🔕 Silence in Grafana"
    if made and made != "Grafana":
        silence = f"🔕 Grafana's silence form (this incident is silenced in {made})"
    labelled = [
        (links.runbook, "📖 Runbook"),
        (links.alert, "🔔 View alert"),
        (links.silence, silence),
        (links.dashboard, "📈 Dashboard"),
        (links.panel, "📊 Panel"),
        (links.issue, _issue_label(links.issue)),
    ]
    shown = []
    for url, label in labelled:
        if not url.strip():
            continue
        if is_linkable(url):
            shown.append(link(url, label))
        else:
            shown.append(f"{escape(label)}: {truncate(escape(url.strip()), 300)}")
    return shown


def _issue_label(url: str) -> str:
    number = issue_number(url)
    return f"🐙 GitHub issue #{number}" if number is not None else "🐙 GitHub issue"


def _actions(incident: Incident) -> dict[str, Any]:
    """The responder's buttons; every value is the incident's reference (state lives in Redis)."""
    ref = incident_ref(incident)
    elements: list[dict[str, Any]] = []
    if incident.acknowledged_by:
        elements.append(_button("Take over", "incident_ack", ref))
    else:
        elements.append(_button("Acknowledge", "incident_ack", ref, style="primary"))
    if incident.silence is not None:
        elements.append(_button("Remove silence", "incident_unsilence", ref))
    else:
        elements.append(
            {
                "type": "static_select",
                "action_id": "incident_silence",
                "placeholder": plain("Silence…"),
                "options": [
                    {"text": plain(label), "value": str(seconds)}
                    for seconds, label in SILENCE_OPTIONS
                ],
            }
        )
    elements += [
        _button("Scale up…", "incident_scale", ref),
        _button("Run diagnostics", "incident_diagnose", ref),
        _button("Resolve", "incident_resolve", ref, style="danger")
        | {"confirm": _confirm(incident)},
    ]
    return {"type": "actions", "block_id": ACTIONS_BLOCK_ID, "elements": elements}


def _button(text: str, action_id: str, value: str, *, style: str | None = None) -> dict[str, Any]:
    button = {"type": "button", "text": plain(text), "action_id": action_id, "value": value}
    if style:
        button["style"] = style
    return button


def _confirm(incident: Incident) -> dict[str, Any]:
    return {
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


def _fallback(incident: Incident) -> str:
    """Notification text: short, escaped, and without mentions (it pings nobody); its numbers
    are the headline's."""
    title = truncate(title_text(incident), MAX_FALLBACK_TITLE)
    if not incident.is_open:
        return f"✅ Resolved: {title}"
    head = headline(incident)  # the blocks' numbers, live or the alert's
    details = [head.wait, f"{number(head.queued)} queued" if head.queued is not None else ""]
    shown = ", ".join(detail for detail in details if detail)
    return f"🔴 {title}: {shown}" if shown else f"🔴 {title}"
