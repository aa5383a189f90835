"""Scale-ups followed to their effect at each new reading: each decided is taken off the
incident in the commit that records its outcome, so however often a reading is looked at, and
whichever leader looks, it is said once."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from bot.domain.fleet import FleetSnapshot
from bot.domain.follow_ups import outcome_of, scale_of
from bot.domain.incidents import Event, Incident
from bot.render.follow_ups import outcome_event
from bot.render.replies import render_outcome
from bot.storage.incident_store import BAND_ACTION, Reply, reply_ts


def not_come(incident: Incident, view: FleetSnapshot, now: datetime) -> dict[str, datetime]:
    """The runner types whose scale-ups `view` decides did not come, each with its first ask:
    what their scaler says of them is read once, before `settled` says it."""
    asked: dict[str, datetime] = {}
    for follow in incident.follow_ups:
        scaled = scale_of(incident, follow)
        done = scaled.scale if scaled is not None else None
        outcome = outcome_of(follow, done, view, now) if done is not None else None
        if done is not None and outcome is not None and outcome.came is False:
            asked[done.runner_type] = min(asked.get(done.runner_type, follow.at), follow.at)
    return asked


def settled(
    incident: Incident, view: FleetSnapshot, now: datetime, said: Mapping[str, str] | None = None
) -> tuple[Incident, tuple[Event, ...], tuple[Reply, ...]]:
    """The incident without the follow-ups `view` decides, and their outcomes' events and
    replies: an edit of the scale-up's own reply while no reply followed it, else a new one;
    what each runner type's scaler `said` of scale-ups that did not come is their cause."""
    pending, events, replies, came = [], [], [], {}
    for follow in incident.follow_ups:
        scaled = scale_of(incident, follow)
        if scaled is None or scaled.scale is None:
            continue  # gone from the record, with all but the newest actions: nothing to follow
        why = (said or {}).get(scaled.scale.runner_type, "")
        outcome = outcome_of(follow, scaled.scale, view, now, why)
        if outcome is None:
            pending.append(follow)
            continue
        came[scaled.at] = {"came": outcome.came, "seen_at": outcome.read_at}
        events.append(outcome_event(scaled.scale, outcome, now))
        edit = incident.replies == follow.reply and not replies
        rendered = render_outcome(incident, scaled, follow.detail, outcome, edit=edit)
        edits = reply_ts(follow.reply) if edit else ""
        replies.append(Reply("action", BAND_ACTION, rendered, edits=edits))
    if not events:
        return incident, (), ()
    # What came is kept on the scale-up itself: the pilot declines after one that did not.
    actions = tuple(
        e.model_copy(update={"scale": e.scale.model_copy(update=came[e.at])})
        if e.scale is not None and e.at in came
        else e
        for e in incident.actions
    )
    decided = {"follow_ups": tuple(pending), "actions": actions}
    return incident.model_copy(update=decided), (*events,), (*replies,)
