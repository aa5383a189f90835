"""Scale-ups followed to their effect at each new reading: each decided stops being followed in
the commit that records its outcome, so however often a reading is looked at, and whichever
leader looks, it is said once."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from bot.domain.incident.incidents import Event, Incident, with_scale_ups
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.scale.scale_ups import Outcome, ScaleUp, decided, outcome_of
from bot.render.follow_ups import OUTCOME_ICONS, outcome_event, outcome_said
from bot.render.replies import render_outcome
from bot.storage.incident_store import BAND_ACTION, Reply, reply_ts


def not_come(incident: Incident, view: FleetSnapshot, now: datetime) -> dict[str, datetime]:
    """The runner types whose scale-ups `view` decides did not come, each with its first ask:
    what their scaler says of them is read once, before `settled` says it."""
    asked: dict[str, datetime] = {}
    for _, up in _followed(incident):
        outcome = outcome_of(up, view, now)
        if outcome is not None and outcome.came is False and up.at is not None:
            asked[up.runner_type] = min(asked.get(up.runner_type, up.at), up.at)
    return asked


def settled(
    incident: Incident, view: FleetSnapshot, now: datetime, said: Mapping[str, str] | None = None
) -> tuple[Incident, tuple[Event, ...], tuple[Reply, ...]]:
    """The incident with the scale-ups `view` decides no longer followed, and their outcomes'
    events and replies: an edit of the scale-up's own reply while no reply followed it, else a
    new one; what each runner type's scaler `said` of scale-ups that did not come is their cause."""
    events, replies, changed = [], [], {}
    for scaled, up in _followed(incident):
        outcome = outcome_of(up, view, now, (said or {}).get(up.runner_type, ""))
        if outcome is None:
            continue
        changed[scaled.at] = said_decided(up, outcome)
        events.append(outcome_event(up, outcome, now))
        edit = incident.replies == up.reply and not replies
        rendered = render_outcome(incident, scaled, up.detail, outcome, edit=edit)
        edits = reply_ts(up.reply) if edit else ""
        replies.append(Reply("action", BAND_ACTION, rendered, edits=edits))
    if not events:
        return incident, (), ()
    return with_scale_ups(incident, changed), (*events,), (*replies,)


def said_decided(up: ScaleUp, outcome: Outcome, end: str = "") -> ScaleUp:
    """`up` decided, with what came of it kept in words too: a later edit of its reply (its
    put-back, or the warning's message) keeps them."""
    said = f"{OUTCOME_ICONS[outcome.came]} {outcome_said(up, outcome)}{end}"
    return decided(up, outcome).model_copy(update={"came_said": said})


def _followed(incident: Incident) -> list[tuple[Event, ScaleUp]]:
    return [(e, e.scale) for e in incident.actions if e.scale is not None and e.scale.followed]
