"""An incident's root message: its dashboard, re-rendered and edited in place after every change.
Its times are Slack date tokens each client renders, so an unchanged rendering skips the edit.
The silence select has no value of its own: the incident's reference rides in a block_id too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.domain.alerting.alert_issue import issue_number
from bot.domain.incident.headline import Headline, StillLive, headline, shown_live, still_live
from bot.domain.incident.incident_fleet import alert_fleet
from bot.domain.incident.incidents import Event, Incident
from bot.domain.message import Rendered
from bot.domain.reading.fleet import source_name
from bot.domain.reading.judgement import DRAIN_TARGET_MINS
from bot.domain.shortened import one_line
from bot.domain.units import duration
from bot.render import mrkdwn as md
from bot.render import numbers, replies
from bot.render.pilot import pilot_lines

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
KEEP_SILENCE = ":keep"  # the select's value for a silence that outlives the resolve
ALERT_SOURCES = {"grafana": "Grafana", "alertmanager": "Alertmanager"}
MAX_RESPONDERS = 5
ACTION_CHARS = 120  # an action's text, before its time and who did it


def render_root(
    incident: Incident,
    *,
    now: datetime,
    mentions: bool = True,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Rendered:
    """The first post (`mentions=False`) notifies the channel: later edits mention the owner."""
    live = shown_live(incident)
    head = headline(incident)
    status = "\n".join(filter(None, [_status_line(incident, mentions), _responders(incident)]))
    blocks = [
        md.header(f"{'🔴' if incident.is_open else '✅'} {replies.title_text(incident)}"),
        md.section(status),
    ]
    summary = dict.fromkeys([incident.summary.strip(), incident.description.strip()])
    if summary := [md.escaped(part, 1000) for part in summary if part]:
        blocks.append(md.section("\n".join(summary)))
    if figures := numbers.root_figures(incident, head):
        label = _headline_label(incident, head)
        blocks.append(md.fields(figures, more="+{n} more values", text=label))
    if live is not None:
        lines = numbers.type_lines(live, incident.trend) or ["_No runner type is queueing._"]
        blocks.append(md.section("*Runner types* (worst first)\n" + "\n".join(lines)))
    elif not incident.is_open and (peaks := numbers.peak_rows(incident)):
        # The summary's record, not the alert's last numbers beside the peaks above.
        blocks.append(md.section("*Peak by runner type*\n" + "\n".join(peaks)))
    elif incident.runner_types:
        blocks.append(md.section(_runner_listing(incident, now, within_mins)))
    # The reading's word on its numbers, or why the live numbers stopped (GitHub's quota is spent).
    noted = live if live is not None else incident.live
    paced = live is not None and live.paced_s
    if incident.is_open and noted is not None and (noted.note or paced):
        blocks.append(md.context([md.truncate(numbers.source_note(noted), 2000)]))
    if incident.cause.said.strip():
        said = md.escape(one_line(incident.cause.said))
        cause = md.truncate(md.in_zone(said, incident.updated_at), 600)
        blocks.append(md.section(f"🩺 *Likely cause:* {cause}"))
    ref = replies.incident_ref(incident)
    blocks.append(md.context(_facts(incident), block_id=INCIDENT_BLOCK_PREFIX + ref))
    if links := _links(incident):
        blocks.append(md.context(links))
    if incident.truncated:
        notes = "; ".join(md.escape(note) for note in incident.truncated[:10])
        blocks.append(md.context([md.truncate(f"⚠️ Alert cut to fit: {notes}", 2000)]))
    if incident.is_open and (said := pilot_lines(incident)):
        blocks.append(md.context([md.truncate("\n".join(said), 2000)]))
    if recent := incident.recent_actions:
        latest = "\n".join(f"• {_action(event)}" for event in reversed(recent))
        blocks.append(md.context([f"*Latest*\n{latest}"]))
    if incident.is_open:
        blocks.append(_actions(incident, ref))
    elif incident.silence is not None:
        # The alert is over but the silence made from Slack is not: keep the way to remove it.
        unsilence = md.button("Remove silence", "incident_unsilence", ref)
        blocks.append(md.actions([unsilence], ACTIONS_BLOCK_ID))
    return md.rendered(_fallback(incident, head), blocks)


def incident_ref_of(message: dict[str, Any]) -> str | None:
    for block in message.get("blocks") or ():
        block_id = block.get("block_id") if isinstance(block, dict) else None
        if isinstance(block_id, str) and block_id.startswith(INCIDENT_BLOCK_PREFIX):
            return block_id[len(INCIDENT_BLOCK_PREFIX) :] or None
    return None


def _status_line(incident: Incident, mentions: bool) -> str:
    def named(user_id: str, name: str) -> str:
        return md.mention(user_id) if mentions else md.person(user_id, name)

    if incident.drain.follow is not None and incident.is_open:
        parts = ["⏳ *Alert cleared*: followed until the queue drains"]
    elif incident.is_open:
        parts = ["🔴 *Firing*"]
        if incident.firing_count > 1:
            parts.append(f"{incident.firing_count} alerts")
    else:
        # How long it lasted, from the alert's own start: the queue hurt before the bot heard.
        ended = incident.resolved.at
        took = ended and f"after {duration(ended - incident.started_at)}"
        resolved = ("✅ *Resolved*", replies.resolved_how(incident, mentions=mentions), took)
        parts = [" ".join(filter(None, resolved))]
    if incident.acknowledged.by:
        owner = named(incident.acknowledged.by, incident.acknowledged.name)
        parts.append(f"acknowledged by {owner}")
    elif incident.is_open:
        parts.append("not acknowledged")
    if (silence := incident.silence) is not None:
        who = named(silence.by, silence.by_name)
        kept = ", kept after the resolve" if silence.kept else ""
        parts.append(f"🔕 silenced until {md.slack_date(silence.until)} by {who}{kept}")
    if incident.reopened:
        parts.append(f"reopened {incident.reopened}×")
    if incident.is_test:
        parts.append("🧪 Grafana test notification")
    parts.append(f"ID *{md.escape(incident.id)}*")
    return " · ".join(parts)


def _action(event: Event) -> str:
    by = f" by {md.person(event.actor, event.actor_name)}" if event.actor else ""
    said = md.in_zone(md.escape(md.truncate(one_line(event.text), ACTION_CHARS)), event.at)
    return f"{md.time_of(event.at)} {said}{by}"


def _responders(incident: Incident) -> str:
    """Who acted, in order of first action, the owner left out (the status line names them)."""
    others = [r for r in incident.responders if r.user_id != incident.acknowledged.by]
    if not others:
        return ""
    names = ", ".join(md.person(r.user_id, r.name) for r in others[:MAX_RESPONDERS])
    more = len(others) - MAX_RESPONDERS
    return f"Responders: {names}" + (f" +{more}" if more > 0 else "")


def _headline_label(incident: Incident, head: Headline) -> str:
    """Where the headline's numbers come from, and when: one source at a time."""
    if head.live is not None:
        source = md.escape(source_name(head.live.source))
        return f"*Now* · live from {source} at {md.time_of(head.live.at)}"
    if head.worst and (head.queued is not None or head.wait.longest_wait_mins is not None):
        # The alert's and the readings' worst, each at its own moment: the summary's peaks.
        return "*Worst seen*"
    said = f"*As the alert says* · {_source(incident)}"
    if incident.notified.at is not None:
        said += f" at {md.time_of(incident.notified.at)}"
    return said


def _runner_listing(incident: Incident, now: datetime, within_mins: float) -> str:
    view = alert_fleet(incident, now=now, within_mins=within_mins)
    if not incident.is_open:  # resolved: nothing to advise
        unjudged = {n: m.model_copy(update={"judged": None}) for n, m in view.runner_types.items()}
        view = view.model_copy(update={"runner_types": unjudged})
    lines = numbers.type_lines(view, incident.trend, top=numbers.MAX_RUNNER_ROWS)
    return "*Runner types* (worst first)\n" + "\n".join(lines)


def _facts(incident: Incident) -> list[str]:
    # {ago} is rendered by the reader's client, so the age stays true without edits.
    started = md.slack_date(incident.started_at, "{date_short_pretty} {time} ({ago})")
    team = [f"Team: {md.escaped(incident.team, 200)}"] if incident.team else []
    source = f"Source: {_source(incident)}"
    said = [f"Incident *{md.escape(incident.id)}*", f"Started {started}", *team, source]
    return [*said, md.plural(incident.notified.count, "notification")]


def _source(incident: Incident) -> str:
    return ALERT_SOURCES.get(incident.source, md.escape(incident.source))


def _links(incident: Incident) -> list[str]:
    """One context element per link, so a long Grafana silence URL cannot crowd out the others."""
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
        md.link(url, label)
        if md.is_linkable(url)
        else f"{md.escape(label)}: {md.escaped(url.strip(), 300)}"
        for url, label in labelled
        if url.strip()
    ]


def _actions(incident: Incident, ref: str) -> dict[str, Any]:
    if incident.acknowledged.by:
        elements = [md.button("Take over", "incident_ack", ref)]
    else:
        elements = [md.button("Acknowledge", "incident_ack", ref, "primary")]
    if incident.silence is not None:
        elements.append(md.button("Remove silence", "incident_unsilence", ref))
    else:
        # Durations in seconds, as the handler reads them, then whether it outlives the resolve.
        groups = [("Ends when it resolves", ""), ("Kept after it resolves", KEEP_SILENCE)]
        select = {
            "type": "static_select",
            "action_id": "incident_silence",
            "placeholder": md.plain("Silence…"),
            "option_groups": [
                {
                    "label": md.plain(label),
                    "options": [md.option(said, f"{s}{suffix}") for s, said in SILENCE_OPTIONS],
                }
                for label, suffix in groups
            ],
        }
        elements.append(select)
    elements += [
        md.button("Scale up…", "incident_scale", ref),
        md.button("Run diagnostics", "incident_diagnose", ref),
        md.button("Resolve", "incident_resolve", ref, "danger") | {"confirm": _confirm(incident)},
    ]
    return md.actions(elements, ACTIONS_BLOCK_ID)


def _confirm(incident: Incident) -> dict[str, Any]:
    closes = "closes the incident and stops its status updates. " + (
        "Its alert cleared already: nothing reopens it."
        if incident.drain.follow is not None
        else "If the alert fires again, it reopens."
    )
    text, confirm = f"This {closes}", "Resolve"
    if (live := still_live(incident)) is not None:
        said = f"Still live: {numbers.still_live_said(live)}, and the alert is still firing."
        text, confirm = f"{said} Resolving anyway {closes}", "Resolve anyway"
    asked = md.confirm(f"Resolve incident {incident.id}?", text, confirm, "Cancel")
    return asked | {"style": "danger"}


def render_still_live(incident: Incident, live: StillLive) -> Rendered:
    """A Resolve's answer while the queue is still live: a button, and the command to type."""
    incident_id, still = md.escape(incident.id), numbers.still_live_said(live)
    text = (
        f"Incident {incident_id} is still live: {still} and the alert is still "
        f"firing. Resolve it anyway? The button below, or `/queue resolve {incident_id} anyway`."
    )
    ref = replies.incident_ref(incident)
    resolve = md.button("Resolve anyway", "incident_resolve_anyway", ref, "danger")
    return md.rendered(text, [md.section(text), md.actions([resolve])])


def _fallback(incident: Incident, head: Headline) -> str:
    """Notification text: short, escaped, pinging nobody; its numbers are the headline's."""
    title = md.truncate(replies.title_text(incident), 200)
    if not incident.is_open:
        return f"✅ Resolved: {title}"
    shown = ", ".join(numbers.head_figures(head))
    return f"🔴 {title}: {shown}" if shown else f"🔴 {title}"
