"""Thread replies of an incident: periodic status, the closing summary, and one-line events.
Pure functions of state like the root; times are Slack date tokens, each reader's own time zone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import (
    CAPPED,
    DRAINED,
    UNDER,
    ActiveSilence,
    Event,
    Incident,
    Resolution,
    Snapshot,
    actions_taken,
    chart_drawn,
)
from bot.domain.incident.silence_seen import Seen
from bot.domain.message import Rendered
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.scale.put_back_seen import Back, Landed
from bot.domain.scale.scale_ups import Outcome, ScaleUp
from bot.domain.units import duration
from bot.render import mrkdwn as md
from bot.render import numbers
from bot.render.chart import chart_block, incident_chart
from bot.render.cost import cost_lines
from bot.render.follow_ups import OUTCOME_ICONS, back_said, outcome_said, record_said, seen_said

MAX_TIMELINE = 20
NO_NUMBERS = "_No queue numbers in the alert._"
# What a status reply says before the sender renders it (`StatusShown`).
STATUS_FALLBACK = "Status update"

_EVENT_ICONS = {
    "opened": "🚨",
    "updated": "🔁",
    "notified": "🔁",
    "alerts_changed": "🔀",
    "resolved": "✅",
    "alert_cleared": "⏳",
    "reopened": "🔴",
    "acknowledged": "👀",
    "handed_over": "🤝",
    "silenced": "🔕",
    "unsilenced": "🔔",
    "scaled": "⬆️",
    "pilot_dry_run": "🧪",
    "scale_reverted": "↩️",
    "state_lost": "⚠️",
    "diagnosed": "🩺",
    "status": "📊",
    "amended": "📝",
}
# The one reply that may mention someone: taking ownership tells the owner the thread is theirs.
MENTIONING_EVENTS = frozenset({"acknowledged", "handed_over"})
RESOLVED_BY = {
    Resolution.ALERT: "(alert cleared)",
    Resolution.DRAINED: "(queue drained)",
    Resolution.TEST: "(test notification: nothing to follow up)",
}


PILOT_UNDO, PILOT_PAUSE = "pilot_undo", "pilot_pause"


def incident_ref(incident: Incident) -> str:
    """What buttons carry: the short ID people see and the UID that survives a data loss."""
    return f"{incident.id}:{incident.uid}"


def resolved_how(incident: Incident, *, mentions: bool = False) -> str:
    """What follows "Resolved": who (mentioned only in an edited root, which notifies nobody)."""
    if incident.resolved.how is Resolution.MANUAL and incident.resolved.by:
        if mentions:
            return f"by {md.mention(incident.resolved.by)}"
        return f"by {md.person(incident.resolved.by, incident.resolved.by_name)}"
    if followed := followed_how(incident):
        return f"({followed})"
    return RESOLVED_BY.get(incident.resolved.how, "") if incident.resolved.how else ""


_FOLLOW_ENDED = {
    DRAINED: "queue drained {} later",
    UNDER: "queue under its thresholds {} later",
    CAPPED: "jobs still queued when following stopped {} later",
}


def followed_how(incident: Incident) -> str:
    """ "alert cleared, queue drained 4 min later": how a queue followed after its alert ended."""
    follow, ended = incident.drain.follow, incident.resolved.at
    if follow is None or ended is None or follow.ended not in _FOLLOW_ENDED:
        return ""
    later = duration(ended - follow.cleared_at)
    return f"alert cleared, {_FOLLOW_ENDED[follow.ended].format(later)}"


def drained_said(incident: Incident) -> str:
    """The timeline's line for a resolve the readings decided."""
    if followed := followed_how(incident):
        return f"Resolved: {followed}"
    return "The queue drained: resolved automatically"


def following_said(incident: Incident) -> str:
    """What the thread hears when the alert cleared with jobs still queued over its thresholds."""
    if incident.drain.follow is None:
        return ""
    queued = round(incident.drain.follow.queued)
    jobs = f"{md.plural(queued, 'job')} still {'queues' if queued == 1 else 'queue'}"
    return f"The alert cleared; {jobs} over its thresholds: following until the queue drains"


def title_text(incident: Incident) -> str:
    """Priority and title, escaped, marked when Grafana's Test button sent the alert."""
    title = md.escape(incident.title)
    if incident.priority:
        title = f"{md.escape(incident.priority)} · {title}"
    return f"[TEST] {title}" if incident.is_test else title


class StatusShown(BaseModel):
    """A status the tick decided, rendered by the sender when it posts (a waiting status is
    these few bytes, not its blocks)."""

    model_config = ConfigDict(frozen=True)

    current: Snapshot
    previous: Snapshot | None = None
    live: bool = False  # the runner types' lines come from the incident's live view
    drain: tuple[int, int] | None = None
    since: datetime | None = None
    chart: bool = False

    def to_extra(self) -> dict[str, Any]:
        return {"status": self.model_dump(mode="json", exclude_defaults=True, by_alias=True)}

    @classmethod
    def from_extra(cls, extra: dict[str, Any] | None) -> StatusShown:
        return cls.model_validate((extra or {})["status"])


def render_shown(incident: Incident, shown: StatusShown, *, now: datetime) -> Rendered:
    """A status reply from the live view as it is when posted (one reply never shows two
    readings); its title and age stay the tick's."""
    view = incident.live if shown.live else None
    said = {name: value for name, value in shown if name != "live"}
    if view is not None and view.is_live and view.at != shown.current.at:
        # What was decided of the older reading (drained so far, quiet since) is not said of it.
        said |= {"current": as_snapshot(incident, view, view.at), "drain": None, "since": None}
    return render_status(incident, now=now, view=view, at=shown.current.at, **said)


def render_status(
    incident: Incident,
    *,
    previous: Snapshot | None,
    current: Snapshot,
    now: datetime,
    view: FleetSnapshot | None = None,
    drain: tuple[int, int] | None = None,
    since: datetime | None = None,
    chart: bool = False,
    at: datetime | None = None,
) -> Rendered:
    """The numbers now and their change since the previous status. `drain` is (checks that found
    it drained, checks needed); `since` marks a quiet status edited in place."""
    live = view if view is not None and view.is_live else None
    at = at or current.at
    age = _age_line(incident, at, now)
    blocks = [md.section(f"*📊 Status update · {md.time_of(at)}*\n{age}")]
    headline, said = numbers.status_figures(current, previous)
    if headline:
        blocks.append(md.fields(headline))
    elif not current.runner_types and live is None:
        blocks.append(md.section(NO_NUMBERS))
    if live is not None:
        lines = numbers.type_lines(live, incident.trend)
        lines += numbers.gone_lines(previous, live.runner_types)[:5]
        blocks.append(md.section("*By runner type*\n" + "\n".join(lines or ["_Nothing queues._"])))
    elif rows := numbers.type_changes(current, previous):
        blocks.append(md.section("*By runner type*\n" + "\n".join(rows)))
    notes = [numbers.source_note(view)] if view is not None else []
    if drain is not None and drain[0] > 0:
        notes.append(f"✅ The queue looks drained: check {drain[0]} of {drain[1]}")
    if since is not None:
        notes.append(f"No material change since {md.time_of(since)}: updated in place")
    blocks += _chart(incident) if chart else []
    if notes:
        blocks.append(md.context([md.truncate(n, 2000) for n in notes]))
    return md.rendered(f"Status update: {said or 'no queue numbers'}", blocks)


def _age_line(incident: Incident, at: datetime, now: datetime) -> str:
    if incident.is_open and incident.drain.follow is not None:
        cleared = _age(at - incident.drain.follow.cleared_at)
        line = f"⏳ Alert cleared *{cleared}* ago: following until the queue drains"
    elif incident.is_open:
        line = f"Firing for *{_age(at - incident.started_at)}*"
    else:
        took = duration((incident.resolved.at or now) - incident.started_at)
        line = " ".join(filter(None, ("✅ Resolved", resolved_how(incident), f"after *{took}*")))
    if incident.silence is not None:
        line += f" · 🔕 silenced until {md.time_of(incident.silence.until)}"
    if incident.acknowledged.by:
        owner = md.person(incident.acknowledged.by, incident.acknowledged.name)
        return f"{line} · acknowledged by {owner}"
    return f"{line} · not acknowledged" if incident.is_open else line


def _age(span: timedelta) -> str:
    """To the minute however long: statuses a minute apart never say the same age."""
    said, mins = duration(span), int(span.total_seconds()) // 60 % 60
    return f"{said} {mins} min" if span >= timedelta(days=1) and mins else said


def render_summary(
    incident: Incident, events: Sequence[Event], *, now: datetime, chart: bool = False
) -> Rendered:
    """How long, how bad, how it ended, who did what; its chart unless the last status drew it."""
    took = duration((incident.resolved.at or now) - incident.started_at)
    incident_id = md.escape(incident.id)
    if incident.is_open:
        head = f"🔴 *Incident {incident_id} still firing*"
    else:
        head = " ".join(
            filter(None, (f"✅ *Incident {incident_id} resolved*", resolved_how(incident)))
        )
    blocks = [
        md.section(f"{head}\n{md.truncate(title_text(incident), 500)}"),
        md.fields(_summary_fields(incident, took, events)),
    ]
    if peaks := numbers.peak_rows(incident):
        blocks.append(md.section("*Peak by runner type*\n" + "\n".join(peaks)))
    if cost := cost_lines(incident, md.escape, md.time_of):
        blocks.append(md.section("\n".join(f"💸 {line}" for line in cost)))
    if incident.silence is not None:
        blocks.append(md.section(_silence_said(incident, incident.silence)))
    elif _ended_at_resolve(incident, events):  # told anew after the silence watch ended it
        blocks.append(md.section(SILENCE_ENDED))
    if incident.put_backs:
        lines = [f"↩️ {put_back_said(p, md.runner_name, md.time_of)}" for p in incident.put_backs]
        blocks.append(md.section("\n".join(lines)))
    if scaled := record_said(incident, md.escape, md.time_of):
        blocks.append(md.section("\n".join(scaled)))
    if chart or not chart_drawn(incident, incident.shown.charted_at):  # the last status shows it
        blocks += _chart(incident)
    if shown := events[-MAX_TIMELINE:]:
        lines = ["*What was done*"]
        if len(events) > len(shown):
            lines.append(f"_{len(events) - len(shown)} earlier events not shown_")
        for event in shown:
            line = f"{md.time_of(event.at)} · {md.in_zone(md.escaped(event.text, 200), event.at)}"
            by = f" · by {md.person(event.actor, event.actor_name)}" if event.actor else ""
            lines.append(line + by)
        blocks += md.sections(lines)
    postmortem = md.button("Postmortem", "incident_postmortem", incident_ref(incident))
    blocks.append(md.actions([postmortem], "summary_actions"))
    state = "still firing" if incident.is_open else "resolved"
    said = f"Incident {incident_id} {state} after {took}"
    return md.rendered(f"{said}: {md.truncate(title_text(incident), 200)}", blocks)


# Said the same before the silence watch ended it and after: no edit changes the sentence.
SILENCE_ENDED = "🔕 Its silence was ended at resolve: if the alert fires again, it notifies."


def _ended_at_resolve(incident: Incident, events: Sequence[Event]) -> bool:
    ended = incident.resolved.at
    return ended is not None and any(
        e.kind == "unsilenced" and e.actor is None and e.at >= ended for e in events
    )


def _silence_said(incident: Incident, silence: ActiveSilence) -> str:
    """The silence made from Slack: ended with the incident, or still in force, and why."""
    which = f"{md.escape(silence.backend)} silence `{md.escaped(silence.silence_id, 80)}`"
    removes = f"`/queue unsilence {md.escape(incident.id)}` removes it."
    until = md.slack_date(silence.until)
    if incident.is_open:
        return f"🔕 A silence made from Slack is still in force until {until} ({which}): {removes}"
    if silence.kept:
        chose = md.person(silence.by, silence.by_name)
        return f"🔕 Its silence stays until {until}, as {chose} chose ({which}): {removes}"
    if silence.unended:
        reason = md.escaped(silence.unended, 300)
        return (
            f"⚠️ Its silence could not be ended at resolve ({reason}): it stays until {until} "
            f"({which}). {removes}"
        )
    return SILENCE_ENDED


def summaries(
    incident: Incident, events: Sequence[Event], *, now: datetime
) -> tuple[Rendered, Rendered | None]:
    """The summary, and, where it leaves out the chart the last status drew, the summary with it
    (for when that status gave way to it before it was posted)."""
    summary = render_summary(incident, events, now=now)
    if not chart_drawn(incident, incident.shown.charted_at):
        return summary, None
    return summary, render_summary(incident, events, now=now, chart=True)


def _chart(incident: Incident) -> list[dict[str, Any]]:
    """The trend drawn by Slack; the sender takes it out for a workspace that refuses it."""
    block = chart_block(incident_chart(incident))
    return [block] if block is not None else []


def put_back_said(up: ScaleUp, escaped: Callable[[str], str], at: Callable[[datetime], str]) -> str:
    """ "linux.2xlarge maxRunners 30 goes back to 20 once … (at the latest 14:05)"."""
    before = "unset" if up.back_to is None else str(up.back_to)
    line = f"{escaped(up.runner_type)} {escaped(up.field)} {up.back_from} "
    line += f"goes back to {before}" + (f" {escaped(up.back_when)}" if up.back_when else "")
    return line + (f" (at the latest {at(up.back_by)})" if up.back_by is not None else "")


def _summary_fields(incident: Incident, took: str, events: Sequence[Event]) -> list[str]:
    peaks, ended = numbers.impact_figures(incident, md.time_of)
    items = [f"Duration: *{took}*", *(peaks or [NO_NUMBERS]), *ended]
    if incident.acknowledged.by:
        owner = md.person(incident.acknowledged.by, incident.acknowledged.name)
        items.append(f"Acknowledged by {owner}")
    if taken := actions_taken(events):
        people = list(dict.fromkeys(md.person(e.actor, e.actor_name) for e in taken))
        shown = ", ".join(people[:5]) + (f" and {len(people) - 5} more" if len(people) > 5 else "")
        items.append(f"Actions taken: *{len(taken)}*, by {shown}")
    items.append(f"Notifications: *{incident.notified.count}*")
    if incident.reopened:
        items.append(f"Reopened: *{incident.reopened}×*")
    return items


def render_event(incident: Incident, event: Event, *, detail: str = "") -> Rendered:
    """A one-line reply for an event; `detail`: mrkdwn already made safe, after the text."""
    said = md.in_zone(md.escaped(event.text, 2000), event.at)
    line = f"{_EVENT_ICONS.get(event.kind, '•')} {said}"
    line += f" {detail}" if detail else ""
    if event.actor:
        mentioned = event.kind in MENTIONING_EVENTS
        who = md.mention(event.actor) if mentioned else md.person(event.actor, event.actor_name)
        line = f"{line} · by {who}"
    text = f"Incident {md.escape(incident.id)}: {md.escape(event.text)}"
    blocks = [md.section(line)]
    up = event.scale
    if event.kind == "scaled" and up is not None and up.pilot and not up.undone:
        # Block Kit has no disabled button: once its record ended (`fate`), a line says why not.
        ended = md.context([f"↩️ {md.in_zone(md.escaped(up.fate, 500), event.at)}"])
        blocks.append(ended if up.fate else pilot_buttons(incident_ref(incident), up, event.at))
    return md.rendered(text, blocks)


def render_act(incident: Incident, scaled: Event) -> Rendered:
    """A scale-up's own reply as it stands, what came of its runners below its line."""
    up = scaled.scale
    assert up is not None, "a scale-up's event"
    if not up.came_said:
        return render_event(incident, scaled, detail=up.detail)
    came = md.in_zone(md.escaped(up.came_said, 2000), up.seen_at or scaled.at)
    return _followed(incident, scaled, [came], detail=up.detail)


def pilot_buttons(ref: str, done: ScaleUp, at: datetime) -> dict[str, Any]:
    """Undo and Pause pilot under its act; their value names where it was made (`ref`), its time
    and its runner type (last: any text)."""
    value = f"{ref}|{at.isoformat()}|{done.runner_type}"[: md.MAX_BUTTON_VALUE]
    back = f": {done.field} back to {done.before}" if done.field and done.before is not None else ""
    then = (
        f"Put the pilot's +{done.added} on {done.runner_type} back now{back}, and pause its pilot"
    )
    asked = md.confirm(
        "Undo the pilot's act?", f"{then} until someone resumes it.", "Undo", "Keep it"
    )
    undo = md.button("Undo", PILOT_UNDO, value) | {"confirm": asked}
    return md.actions([undo, md.button("Pause pilot", PILOT_PAUSE, value)])


def render_outcome(
    incident: Incident, scaled: Event, detail: str, outcome: Outcome, *, edit: bool
) -> Rendered:
    """The outcome under the scale-up's own reply (`edit`), else a reply of its own."""
    assert scaled.scale is not None, "a scale-up's event"
    said = outcome_said(scaled.scale, outcome, md.escape, md.time_of)
    alone = None if edit else outcome_said(scaled.scale, outcome)
    return _followed(
        incident, scaled, [f"{OUTCOME_ICONS[outcome.came]} {said}"], detail=detail, alone=alone
    )


def render_seen(incident: Incident, silenced: Event, detail: str, seen: Seen) -> Rendered:
    line = f"{OUTCOME_ICONS[seen.holds]} {seen_said(seen, md.escape, md.time_of)}"
    return _followed(incident, silenced, [line], detail=detail)


def render_back_seen(
    incident: Incident, put_back: Event, seen: list[tuple[Back, Landed]], spares: str, *, edit: bool
) -> Rendered:
    """Where the runners of a put-back went, under its own reply (`edit`), else a reply alone."""
    lines = [
        f"{OUTCOME_ICONS[landed.back]} "
        + back_said(back, landed, put_back.at, spares, md.escape, md.time_of)
        for back, landed in seen
    ]
    alone = "; ".join(back_said(b, landed, put_back.at, spares) for b, landed in seen)
    return _followed(incident, put_back, lines, alone=None if edit else alone)


def _followed(
    incident: Incident,
    event: Event,
    lines: list[str],
    *,
    detail: str = "",
    alone: str | None = None,
) -> Rendered:
    """`lines` under the event's reply, above its buttons or the line that took their place (the
    pilot's Undo, or why it is gone, stays last); with `alone`, a reply of their own saying it."""
    if alone is not None:
        text = f"Incident {md.escape(incident.id)}: {md.escape(alone)}"
        return md.rendered(text, [md.section(line) for line in lines])
    before, last = render_event(incident, event, detail=detail), ("actions", "context")
    said = [b for b in before.blocks if b.get("type") not in last]
    buttons = [b for b in before.blocks if b.get("type") in last]
    return md.rendered(before.text, [*said, *(md.section(line) for line in lines), *buttons])
