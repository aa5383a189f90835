"""A scale-up from Slack followed to its effect: pending (`FollowUp`) until a reading shows its
runners registered or its deadline passes, then decided once from that reading's stored judgement
(never recomputed) and kept as a `scale_outcome` event of the timeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.domain.bought import Reading, bought
from bot.domain.fleet import FleetSnapshot, HistoryPoint, of_type, source_name
from bot.domain.incidents import Event, FollowUp, Incident, ScaleDone
from bot.domain.judgement import Judgement

RAISED_MAXIMUM = "maxRunners"  # the field a scale-up raising ARC's maximum names

SCALE_OUTCOME = "scale_outcome"


@dataclass(frozen=True)
class Outcome:
    """What came of a scale-up: `came` (None: not known, `why` says why), as the reading at
    `read_at` judged it; `why`, when they did not come, is what that reading knows of the cause."""

    came: bool | None
    read_at: datetime
    judged: Judgement | None = None
    baseline: float = 0.0
    why: str = ""


def following(
    incident: Incident, done: ScaleDone, *, at: datetime, verify_s: float, detail: str
) -> FollowUp:
    """The follow-up of the scale-up `done` (its event at `at`), its reply the next in the thread;
    its baseline the type's registered runners as the latest reading showed them."""
    live = incident.live
    metrics = of_type(live.runner_types, done.runner_type) if live and live.is_live else None
    judged = metrics.judged if metrics is not None else None
    return FollowUp(
        at=at,
        due=at + timedelta(seconds=verify_s),
        baseline=judged.registered if judged is not None else None,
        reply=incident.replies + 1,
        detail=detail,
    )


def scale_of(incident: Incident, follow: FollowUp) -> Event | None:
    """The "scaled" event `follow` follows (None: gone from the record)."""
    return next((e for e in incident.actions if e.scale is not None and e.at == follow.at), None)


def outcome_of(
    follow: FollowUp, done: ScaleDone, view: FleetSnapshot | None, now: datetime, said: str = ""
) -> Outcome | None:
    """Came: a reading after the scale-up shows the type's registered runners at the baseline
    plus those added (or the maximum); not by the deadline: did not come, why as the reading's
    pods say it, else as the scaler `said`; a reading that counts no registered runners (`view`
    None: none will come) knows neither. None: not yet."""
    metrics = of_type(view.runner_types, done.runner_type) if view is not None else None
    judged = metrics.judged if metrics is not None else None
    registered = judged.registered if judged is not None else None
    read_at = view.at if view is not None else now
    wanted = None if follow.baseline is None else follow.baseline + done.added
    # No more can come than the maximum lets in: the one the act set where it raised it (a
    # reading after the raise can still show the old one: ARC's listener reports it late), else
    # the reading's (minRunners raised past the room under it).
    bound = done.after if done.field == RAISED_MAXIMUM else judged.maximum if judged else None
    if wanted is not None and bound is not None:
        wanted = min(wanted, bound)
    came = registered is not None and wanted is not None and registered >= wanted
    if judged is not None and came and read_at > follow.at:
        return Outcome(True, read_at, judged, follow.baseline)
    if view is not None and now < follow.due:
        return None
    if judged is None or registered is None:
        source = source_name(view.source) if view is not None else source_name("alert")
        return Outcome(None, read_at, why=f"{source} does not count registered runners")
    if follow.baseline is None:
        why = f"no reading before it counted the registered {done.runner_type} runners"
        return Outcome(None, read_at, why=why)
    if judged.queued == 0 and not (said or judged.causes or judged.cannot_start):
        # Nothing waits and nothing holds them back: an autoscaler starts runners for jobs, and
        # none were left for these; they were not needed, which is no failure to pause on.
        why = "the queue drained before they registered, so no job was left for them"
        return Outcome(None, read_at, judged, follow.baseline, why=why)
    return Outcome(False, read_at, judged, follow.baseline, why=cause_of(judged, said))


def cause_of(judged: Judgement, said: str = "") -> str:
    """Why runners did not come, as the judgement's pod causes say it; else as the scaler
    `said` (an ASG's failed activity, the SQS Lambda's instances); else what it knows."""
    if judged.causes:
        return judged.causes[0].evidence
    if judged.cannot_start:
        return f"{judged.cannot_start} new runner pods cannot start"
    if said:
        return said
    if booting := judged.booting - judged.added_since:
        return f"{booting} still booting; no cause known"
    return "no cause known (no runner pods read as Pending or failing)"


def credited(
    incident: Incident,
    history: Sequence[HistoryPoint],
    now: datetime,
    window: timedelta,
    *,
    final: bool = False,
) -> Incident:
    """The incident with what each scale-up whose runners came bought (`bought`), read once a
    `window` of readings followed them, or at once where the incident ends (`final`): each
    type's drain before and after, between the scale-ups of that type before and after it."""
    made = [e.scale for e in incident.actions if e.scale is not None]
    due = {
        (done.at, done.runner_type): done
        for done in made
        if done.came
        and done.bought is None
        and done.seen_at
        and done.at
        and (final or now >= done.seen_at + window)
    }
    if not due:
        return incident
    credit = {}
    for (at, _), done in due.items():
        same = [d for d in made if d.runner_type == done.runner_type and d.at and d is not done]
        earlier = [d.seen_at for d in same if d.seen_at and d.came and d.at < at]
        later = [d.at for d in same if d.at and d.at > at]
        readings = [
            Reading(point.at, queued, of_type(point.arrival_per_min, done.runner_type))
            for point in history
            if (queued := point.gauges_of(done.runner_type).get("queued")) is not None
        ]
        credit[(at, done.runner_type)] = bought(
            done.seen_at,
            readings,
            after=max(earlier, default=None),
            until=min([*later, now], default=None),
            window=window,
        )
    actions = tuple(
        e.model_copy(update={"scale": e.scale.model_copy(update={"bought": credit[key]})})
        if e.scale is not None
        and (key := (e.scale.at, e.scale.runner_type)) in credit
        and e.scale.bought is None
        else e
        for e in incident.actions
    )
    return incident.model_copy(update={"actions": actions})
