"""Scale-ups followed to their effect at each new reading: each decided is taken off the
incident in the commit that records its outcome, so however often a reading is looked at, and
whichever leader looks, it is said once."""

from __future__ import annotations

from datetime import datetime

from bot.domain.fleet import FleetSnapshot
from bot.domain.follow_ups import outcome_of, scale_of
from bot.domain.incidents import Event, Incident
from bot.render.follow_ups import outcome_event
from bot.render.replies import render_outcome
from bot.storage.incident_store import BAND_ACTION, Reply, reply_ts


def settled(
    incident: Incident, view: FleetSnapshot, now: datetime
) -> tuple[Incident, tuple[Event, ...], tuple[Reply, ...]]:
    """The incident without the follow-ups `view` decides, and their outcomes' events and
    replies: an edit of the scale-up's own reply while no reply followed it, else a new one."""
    pending, events, replies, came = [], [], [], {}
    for follow in incident.follow_ups:
        scaled = scale_of(incident, follow)
        if scaled is None or scaled.scale is None:
            continue  # gone from the record, with all but the newest actions: nothing to follow
        outcome = outcome_of(follow, scaled.scale, view, now)
        if outcome is None:
            pending.append(follow)
            continue
        came[scaled.at] = outcome.came
        events.append(outcome_event(scaled.scale, outcome, now))
        edit = incident.replies == follow.reply and not replies
        rendered = render_outcome(incident, scaled, follow.detail, outcome, edit=edit)
        edits = reply_ts(follow.reply) if edit else ""
        replies.append(Reply("action", BAND_ACTION, rendered, edits=edits))
    if not events:
        return incident, (), ()
    # What came is kept on the scale-up itself: the pilot declines after one that did not.
    actions = tuple(
        e.model_copy(update={"scale": e.scale.model_copy(update={"came": came[e.at]})})
        if e.scale is not None and e.at in came
        else e
        for e in incident.actions
    )
    decided = {"follow_ups": tuple(pending), "actions": actions}
    return incident.model_copy(update=decided), (*events,), (*replies,)
