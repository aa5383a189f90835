"""The incident: plain state, and its lifecycle as pure functions of (state, event).

Nothing here reads a clock or talks to Redis or Slack; callers pass `now` and persist the result,
so races such as "a resolved notification overtaking a firing one" are table tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from bot.domain.alerts import AlertFacts, Matcher, QueueNumbers, RunnerQueue, Source, max_known
from bot.domain.delivery import Delivery
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics, longest_wait
from bot.domain.judgement import BOOT_MINS, added
from bot.domain.runner_names import runner_key
from bot.domain.trend import Trend

TREND_POINTS = 48
# The root shows the latest responder actions; the timeline keeps them all.
RECENT_ACTIONS = 3
# Alert instances seen resolved, per group: enough for the largest notification we accept.
MAX_RESOLVED_INSTANCES = 1000


class Status(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class Resolution(StrEnum):
    ALERT = "alert"  # the alert source said resolved
    MANUAL = "manual"  # a responder pressed Resolve
    TEST = "test"  # Grafana's Test button: shown once, never followed up
    DRAINED = "drained"  # the live metrics saw the queue drain (no resolved notification needed)


class Change(StrEnum):
    """What a notification did to an incident; decides which thread replies follow."""

    OPENED = "opened"
    UPDATED = "updated"
    ALERTS_CHANGED = "alerts_changed"  # a different set of alerts or runner types is firing
    RESOLVED = "resolved"
    REOPENED = "reopened"
    STALE = "stale"  # older than what the incident already reflects, or a duplicate delivery


class ScaleDone(BaseModel):
    """A scale-up as its event records it, for what counts scale-ups (diagnostics, the capacity
    report) without reading the event's words. `field` as `Undo` names it ("" when the backend
    did not say); `by` names who asked; `at` is when it was made: for an early warning's, taken on
    by its incident, earlier than the event (None when not known)."""

    model_config = ConfigDict(frozen=True)

    runner_type: str
    added: int
    by: str
    at: datetime | None = None
    field: str = ""
    # What the field became ("maxRunners 40 → 60": 60), so a reading that does not show it yet
    # is known to predate it (None: not recorded, by 0.25 and before or the backend).
    after: int | None = None


class Event(BaseModel):
    """One line of the incident's timeline: what happened, when, and who did it."""

    at: datetime
    kind: str  # opened, notified, alerts_changed, status, acknowledged, resolved, reopened, ...
    text: str
    actor: str | None = None  # Slack user ID for people; None for the alert source or the bot
    # How to name the actor without mentioning them (routine replies must not ping anyone).
    actor_name: str = ""
    scale: ScaleDone | None = None  # a scale-up's (kind "scaled")


# Timeline kinds beyond the lifecycle's: a request someone made that was not carried out (not
# allowed, refused by its target or its backend), never an action taken; and the early warning
# the incident took on when its alert fired. Both are on the record for the postmortem.
REFUSED = "refused"
EARLY_WARNING = "early_warning"


def actions_taken(events: Sequence[Event]) -> list[Event]:
    """The events of what people did, oldest first: a refusal is something asked, not done."""
    return [event for event in events if event.actor and event.kind != REFUSED]


class Responder(BaseModel):
    """Someone who acted on the incident (silenced, scaled, diagnosed, …): the root names them,
    never mentions them."""

    user_id: str
    name: str = ""


class Links(BaseModel):
    runbook: str = ""
    alert: str = ""
    silence: str = ""
    dashboard: str = ""
    panel: str = ""
    issue: str = ""  # the alert's GitHub issue, once linked (`bot.status.alert_issue`)


class ActiveSilence(BaseModel):
    """A silence created from Slack and still believed in force (the status tick checks it)."""

    silence_id: str
    backend: str  # "Alertmanager", "Grafana": where it lives, as messages name it
    until: datetime
    by: str
    by_name: str = ""
    at: datetime


class PutBack(BaseModel):
    """A scale-up of the incident's still to go back (`id`: its revert record's), so the summary
    can say what goes back and when; the put-back's own reply takes it off."""

    id: str
    runner_type: str
    field: str
    before: int | None  # None: the field was unset, and is unset again
    after: int
    # After the resolve, what it waits for ("once its queue has stayed drained 30 min").
    when: str = ""
    latest: datetime | None = None  # `SCALE_REVERT_AFTER` after the scale-up, whatever happens


class Snapshot(BaseModel):
    """The queue at one moment: what a status post compares against."""

    at: datetime
    numbers: QueueNumbers = QueueNumbers()
    runner_types: dict[str, RunnerQueue] = Field(default_factory=dict)


class Incident(BaseModel):
    """One alert group's incident. Stored as JSON in Redis; rendered by `bot.render.root`."""

    id: str
    # Random, beside the short ID people type: a button from before a Redis data loss carries
    # the old UID, so it can never act on the new incident that got the same short ID.
    uid: str = ""
    channel: str = ""
    group_key: str
    group_hash: str
    source: Source
    is_test: bool = False
    status: Status = Status.FIRING
    title: str
    priority: str | None = None
    team: str | None = None
    summary: str = ""
    description: str = ""
    links: Links = Links()
    numbers: QueueNumbers = QueueNumbers()
    # The worst the incident showed (`peaks_seen`, the one place it is worked out): the longest
    # wait and the most jobs queued that any notification or reading said; thresholds are the
    # latest alert's.
    peak: QueueNumbers = QueueNumbers()
    # When the peak queue was seen, with each runner type's numbers then (the first such moment;
    # read through `peak_moment`): None before a queue was seen, or in incidents stored by 0.25
    # and before, whose trend stands in.
    peak_snapshot: Snapshot | None = None
    runner_types: dict[str, RunnerQueue] = Field(default_factory=dict)
    other_values: dict[str, float] = Field(default_factory=dict)
    firing_count: int = 0
    silence_matchers: tuple[Matcher, ...] = ()
    started_at: datetime
    opened_at: datetime
    updated_at: datetime
    # When the alert last said its numbers (the latest firing notification, the first included):
    # the root's headline names it when no live reading stands in.
    alerted_at: datetime | None = None
    resolved_at: datetime | None = None
    resolution: Resolution | None = None
    resolved_by: str | None = None
    resolved_by_name: str = ""
    acknowledged_by: str | None = None
    acknowledged_name: str = ""
    acknowledged_at: datetime | None = None
    notifications: int = 0
    reopened: int = 0
    truncated: tuple[str, ...] = ()
    silence: ActiveSilence | None = None
    recent_actions: tuple[Event, ...] = ()
    # People who acted, in order of first action; the owner among them is shown as the owner.
    responders: tuple[Responder, ...] = ()
    # The latest diagnostics' conclusion in one line, plain text (escaped when rendered).
    likely_cause: str = ""
    # When that conclusion is a shortfall against a runner type's maximum: the type and the
    # maximum it was short of. A reading with a higher maximum disproves it (`_still_likely`).
    cause_type: str = ""
    cause_maximum: float | None = None
    last_status: Snapshot | None = None
    trend: Trend = Field(default_factory=Trend)
    # The live metrics backend's view of this incident's runner types at the latest check; None
    # with the `alert` backend (the alert's numbers above are all there is).
    live: FleetSnapshot | None = None
    peak_types: dict[str, RunnerQueue] = Field(default_factory=dict)
    drain_checks: int = 0  # consecutive checks that found the queue drained
    # What the latest *new* status reply showed once quiet statuses (edits in place) followed
    # it; None while the latest status was itself posted, instead of a copy of `last_status`
    # in every incident's state (`posted_status` reads either).
    last_posted: Snapshot | None = None
    status_posts: int = 0  # new status replies so far (edits of a quiet one not counted)
    status_checks: int = 0  # statuses so far, posted or edited in place: the chart's cadence
    # The trend's latest time when a status last drew it, in its blocks and as a picture: the
    # summary leaves out a chart that would draw the same (0: none).
    charted_at: float = 0.0
    pictured_at: float = 0.0
    put_backs: tuple[PutBack, ...] = ()  # scale-ups still to go back, in the order made

    @property
    def posted_status(self) -> Snapshot | None:
        """What the latest new status reply showed (None before the first)."""
        return self.last_posted or self.last_status

    @property
    def is_open(self) -> bool:
        return self.status is Status.FIRING

    @property
    def shown_types(self) -> set[str]:
        """The runner types the incident shows: its peak's and its live view's."""
        return {*self.peak_types, *(self.live.runner_types if self.live else {})}

    @property
    def peak_summed(self) -> bool:
        """Whether the peak queue (`peak.max_queue_size`) is runner types' queues summed at one
        moment (`queued_total`), rather than the alert's own figure (its rule's maximum, often
        one type's), as the numbers that made it were: said with it wherever it is shown."""
        moment = peak_moment(self)
        return sums_types(moment.runner_types if moment else self.peak_types)

    def snapshot(self, at: datetime) -> Snapshot:
        """The alert's numbers at `at`, its queued jobs totalled over its runner types as a
        reading's are (`queued_total`)."""
        queued = queued_total(self.numbers, self.runner_types)
        numbers = replace(self.numbers, max_queue_size=queued)
        return Snapshot(at=at, numbers=numbers, runner_types=dict(self.runner_types))


class GroupState(BaseModel):
    """What an alert group remembers across its incidents: the order and identity of what it saw.

    Kept even when no incident is open, so a resolved notification handled before an older
    firing one (a delayed or reclaimed entry) still stops that firing from opening an incident.
    """

    incident_id: str | None = None
    last_entry: str = ""  # the newest stream entry applied to this group
    resolved: tuple[str, ...] = ()  # alert instances seen resolved, oldest first


# Priority names alert rules use, by rank (0 is the most severe); "P1", "sev2", "S3" rank by
# their digit. Anything else ranks after all of them.
_SEVERITY_NAMES = {
    "critical": 1,
    "high": 2,
    "major": 2,
    "error": 2,
    "warning": 3,
    "medium": 3,
    "moderate": 3,
    "low": 4,
    "minor": 4,
    "info": 4,
}
_SEVERITY_DIGIT = re.compile(r"(?:p|sev|s)?\s*-?\s*([0-9])", re.IGNORECASE)
UNRANKED = 5


def severity_rank(priority: str | None) -> int:
    """0 (P0) … 4 (P4 and below, low), 5 for no or an unknown priority: in a storm, the order
    in which new groups get their threads."""
    text = (priority or "").strip().lower()
    if text in _SEVERITY_NAMES:
        return _SEVERITY_NAMES[text]
    match = _SEVERITY_DIGIT.fullmatch(text)
    return min(int(match.group(1)), 4) if match else UNRANKED


def entry_order(entry_id: str) -> tuple[int, int]:
    """Redis stream IDs ("<ms>-<seq>") as a sortable pair; "" sorts first."""
    if not entry_id:
        return (-1, -1)
    ms, _, seq = entry_id.partition("-")
    return (int(ms), int(seq or 0))


def is_stale(group: GroupState, delivery: Delivery, entry_id: str) -> bool:
    """Whether a delivery is older than what its group reflects, so it must change nothing.

    Older in stream order than the newest entry applied; or a firing whose alerts were all seen
    resolved already: an Alertmanager HA peer lagging behind or a Grafana retry repeats the old
    startsAt, where a real re-fire carries a new one.
    """
    if entry_order(entry_id) <= entry_order(group.last_entry):
        return True
    if delivery.status == "firing" and delivery.firing:
        seen = set(group.resolved)
        return all(instance in seen for instance in delivery.firing)
    return False


def noted(group: GroupState, delivery: Delivery, entry_id: str) -> GroupState:
    """The group after a delivery that is not stale: its order and what it saw resolved."""
    resolved = list(dict.fromkeys((*group.resolved, *delivery.resolved)))
    return group.model_copy(
        update={"last_entry": entry_id, "resolved": tuple(resolved[-MAX_RESOLVED_INSTANCES:])}
    )


def _accepted_before(entry_id: str, moment: datetime | None) -> bool:
    """Whether the stream accepted this entry before `moment` (its ID starts with Redis's ms)."""
    return moment is not None and entry_order(entry_id)[0] < moment.timestamp() * 1000


def is_reopenable(incident: Incident, now: datetime, window: timedelta) -> bool:
    """A resolved incident takes its group back when it fires again within the window."""
    return incident.resolved_at is not None and now - incident.resolved_at <= window


def open_incident(
    delivery: Delivery, *, incident_id: str, uid: str, channel: str, now: datetime
) -> Incident:
    """A new incident from the first firing notification of a group."""
    incident = Incident(
        id=incident_id,
        uid=uid,
        channel=channel,
        group_key=delivery.group_key,
        group_hash=delivery.group_hash,
        source=delivery.source,
        is_test=delivery.is_test,
        title=delivery.facts.title,
        started_at=delivery.started_at or now,
        opened_at=now,
        updated_at=now,
    )
    incident = _with_facts(incident, delivery.facts, now=now)
    incident = incident.model_copy(update={"last_status": incident.snapshot(now)})
    if incident.is_test:
        # Grafana never resolves a test notification; left open it would post status forever.
        update = {"status": Status.RESOLVED, "resolution": Resolution.TEST, "resolved_at": now}
        return incident.model_copy(update=update)
    return incident


def apply_notification(
    incident: Incident, delivery: Delivery, *, entry_id: str, now: datetime
) -> tuple[Incident, Change]:
    """Fold a later notification of the same group into its incident (staleness is checked
    against the group first, see `is_stale`)."""
    if delivery.status == "resolved":
        if not incident.is_open:
            return incident, Change.STALE
        # When we learned of it, not the alert's endsAt: the reopen window and the summary's
        # duration are about this incident, and endsAt can be far off (a replayed payload).
        resolved = incident.model_copy(
            update={
                "status": Status.RESOLVED,
                "resolution": Resolution.ALERT,
                "resolved_at": now,
                "resolved_by": None,
                "numbers": QueueNumbers(),
                "runner_types": {},
                "firing_count": 0,
                "notifications": incident.notifications + 1,
                "updated_at": now,
            }
        )
        return resolved, Change.RESOLVED
    if incident.resolution is Resolution.MANUAL and _accepted_before(
        entry_id, incident.resolved_at
    ):
        # Fired before someone resolved it by hand, processed after: not a new firing.
        return incident, Change.STALE
    updated = _with_facts(incident, delivery.facts, now=now)
    if not incident.is_open:
        return _reopened(updated), Change.REOPENED
    changed = incident.firing_count != updated.firing_count or set(incident.runner_types) != set(
        updated.runner_types
    )
    return updated, Change.ALERTS_CHANGED if changed else Change.UPDATED


def repeated(incident: Incident, *, now: datetime) -> Incident:
    """The incident after the delivery it was just UPDATED with arrives again (a retry, a flood
    of one body): its facts are the incident's already and the peaks hold them, so only the count
    moves. The same as `apply_notification` gives, without working the facts out again."""
    return incident.model_copy(
        update={"notifications": incident.notifications + 1, "updated_at": now, "alerted_at": now}
    )


def resolve_manually(incident: Incident, *, by: str, name: str, now: datetime) -> Incident:
    return incident.model_copy(
        update={
            "status": Status.RESOLVED,
            "resolution": Resolution.MANUAL,
            "resolved_by": by,
            "resolved_by_name": name,
            "resolved_at": now,
            "updated_at": now,
        }
    )


def acknowledge(incident: Incident, *, by: str, name: str, now: datetime) -> Incident:
    return incident.model_copy(
        update={
            "acknowledged_by": by,
            "acknowledged_name": name,
            "acknowledged_at": now,
            "updated_at": now,
        }
    )


def with_action(incident: Incident, event: Event) -> Incident:
    """Remember a responder's action for the root (the timeline has them all), and the person
    who acted as one of its responders; a scale-up counts in the judgement the root shows."""
    recent = (*incident.recent_actions, event)[-RECENT_ACTIONS:]
    update: dict[str, object] = {"recent_actions": recent, "updated_at": event.at}
    if event.scale is not None and incident.live is not None:
        update["live"] = with_scale_ups(incident.live, recent)
    if event.actor and all(r.user_id != event.actor for r in incident.responders):
        responder = Responder(user_id=event.actor, name=event.actor_name)
        update["responders"] = (*incident.responders, responder)
    return incident.model_copy(update=update)


def with_scale_ups(view: FleetSnapshot, actions: Sequence[Event]) -> FleetSnapshot:
    """`view` with each type's judgement counting the runners added from Slack after its
    reading was taken (`bot.domain.judgement.added`): a reading that has the autoscaler's
    desired runners counts them itself from then on; one without (an Auto Scaling group read
    through the HUD, the alert's numbers) cannot see them until they register, so for a boot's
    time before it they count too, as they do where the reading still shows the scale set's
    bounds as they were before it (ARC's listener restarts on a new spec, and Prometheus scrapes
    it later still)."""
    done = [(d, d.at or e.at) for e in actions if (d := e.scale) is not None]
    types = {}
    for name, metrics in view.runner_types.items():
        judged = metrics.judged
        if judged is not None:
            key = runner_key(name)
            booting = judged.at - timedelta(minutes=BOOT_MINS)
            mine = [
                d
                for d, at in done
                if runner_key(d.runner_type) == key
                and (at > judged.at or (at > booting and not _reads(metrics, d)))
            ]
            runners = sum(d.added for d in mine)
            raised = sum(d.added for d in mine if "max" in d.field.lower())
            metrics = metrics.model_copy(
                update={"judged": added(judged, runners, maximum_by=raised)}
            )
        types[name] = metrics
    return view.model_copy(update={"runner_types": types})


def _reads(metrics: RunnerTypeMetrics, done: ScaleDone) -> bool:
    """Whether a reading shows a scale-up made before it: the bound it raised, where the
    backend reads it, else the autoscaler's desired runners, which count what is booting."""
    field = done.field.lower()
    bound = metrics.maximum if "max" in field else metrics.minimum if "min" in field else None
    if done.after is not None and bound is not None:
        return bound >= done.after
    return metrics.desired is not None


def with_put_back(incident: Incident, put_back: PutBack) -> Incident:
    """The incident with a scale-up to go back; one of the same record (the same runner type and
    field, scaled again) is replaced: the record keeps the value first put back."""
    kept = tuple(p for p in incident.put_backs if p.id != put_back.id)
    return incident.model_copy(update={"put_backs": (*kept, put_back)})


def without_put_backs(incident: Incident, ids: set[str]) -> Incident:
    """The incident once those scale-ups went back, or were left or dropped."""
    kept = tuple(p for p in incident.put_backs if p.id not in ids)
    return incident.model_copy(update={"put_backs": kept})


def trend_end(incident: Incident) -> float:
    """The time of the trend's latest point (0: no point): what a chart drawn now ends on."""
    times = incident.trend.times()
    return times[-1] if times else 0.0


def chart_drawn(incident: Incident, drawn_at: float) -> bool:
    """Whether a chart drawn when the trend ended at `drawn_at` shows the same as one drawn now:
    the trend only moves when a status is recorded."""
    return drawn_at > 0 and drawn_at == trend_end(incident)


def diagnosed(
    incident: Incident, likely_cause: str, *, short_of: tuple[str, float] | None = None
) -> Incident:
    """The incident with its latest diagnostics' conclusion (a newer one replaces it);
    `short_of`: the runner type and the maximum the conclusion says it is short of."""
    kind, maximum = short_of if short_of is not None else ("", None)
    update = {"likely_cause": likely_cause, "cause_type": kind, "cause_maximum": maximum}
    return incident.model_copy(update=update)


def _still_likely(incident: Incident, live: FleetSnapshot) -> dict[str, object]:
    """The conclusion's fields cleared when `live` disproves it: the maximum it was short of
    has been raised since, or the type's judgement needs no higher one ({} otherwise)."""
    if incident.cause_maximum is None or not live.is_live:
        return {}  # the alert's numbers, standing in for a failed reading, prove nothing
    key = runner_key(incident.cause_type)
    found = next((m for n, m in live.runner_types.items() if runner_key(n) == key), None)
    judged = found.judged if found is not None else None
    if judged is None or judged.maximum is None:
        return {}
    raised = judged.maximum is not None and judged.maximum > incident.cause_maximum
    if raised or not judged.raise_maximum_by:
        return {"likely_cause": "", "cause_type": "", "cause_maximum": None}
    return {}


def silenced(incident: Incident, silence: ActiveSilence) -> Incident:
    return incident.model_copy(update={"silence": silence, "updated_at": silence.at})


def unsilenced(incident: Incident, *, now: datetime) -> Incident:
    return incident.model_copy(update={"silence": None, "updated_at": now})


def record_status(
    incident: Incident,
    snapshot: Snapshot,
    *,
    live: FleetSnapshot | None = None,
    drain_checks: int = 0,
    posted: bool = True,
) -> Incident:
    """Remember what the latest status showed, so the next one reports the change; `posted`
    when it is a new reply (not an edit of a quiet one)."""
    update: dict[str, object] = {
        "last_status": snapshot,
        "trend": with_status(incident.trend, snapshot),
        "drain_checks": drain_checks,
        "status_checks": incident.status_checks + 1,
    }
    if posted:
        update["last_posted"] = None  # it is `last_status` now
        update["status_posts"] = incident.status_posts + 1
    else:
        update["last_posted"] = incident.posted_status
    return with_live(incident.model_copy(update=update), live, snapshot)


def with_live(incident: Incident, live: FleetSnapshot | None, seen: Snapshot) -> Incident:
    """The incident once it shows what was just read: `live`, the backend's view, which the root
    shows until the next one (None: the alert's numbers stand, as they are), and `seen`, its
    compact form, counted in the peaks. Every reading goes through here, a status's or one
    taken between statuses (diagnostics'), as every number a surface showed is one the summary
    may be asked about (the trend stays the statuses')."""
    update = peaks_seen(incident, seen)
    if live is not None:
        update["live"] = live
        update |= _still_likely(incident, live)
    return incident.model_copy(update=update)


def with_status(trend: Trend, snapshot: Snapshot) -> Trend:
    """The trend with one more status's snapshot, keeping the latest TREND_POINTS."""
    return trend.appended(
        snapshot.at, snapshot.numbers.max_queue_size, snapshot.runner_types, limit=TREND_POINTS
    )


def resolve_drained(incident: Incident, *, now: datetime) -> Incident:
    """The live metrics saw the queue drained for long enough: resolved without an alert."""
    return incident.model_copy(
        update={
            "status": Status.RESOLVED,
            "resolution": Resolution.DRAINED,
            "resolved_at": now,
            "resolved_by": None,
            "updated_at": now,
        }
    )


def peak_types_of(
    peak: dict[str, RunnerQueue], current: dict[str, RunnerQueue]
) -> dict[str, RunnerQueue]:
    """The worst queue seen per runner type."""
    merged = dict(peak)
    for name, queue in current.items():
        before = merged.get(name)
        if before is None:
            merged[name] = queue
            continue
        queued = max_known(before.queued, queue.queued)
        # The wait keeps what it was measured as ("over", a start's time) with its number; a
        # tie keeps the one seen first.
        wait = longest_wait((before, queue)) or before
        peak = RunnerQueue(queued, wait.longest_wait_mins, wait.wait_over, wait.wait_of_starts)
        if peak != before:
            merged[name] = peak
    return merged


def _reopened(incident: Incident) -> Incident:
    return incident.model_copy(
        update={
            "status": Status.FIRING,
            "resolution": None,
            "resolved_at": None,
            "resolved_by": None,
            "resolved_by_name": "",
            "acknowledged_by": None,
            "acknowledged_name": "",
            "acknowledged_at": None,
            "reopened": incident.reopened + 1,
        }
    )


def _with_facts(incident: Incident, facts: AlertFacts, *, now: datetime) -> Incident:
    """The incident showing a notification's facts; its numbers count in the peaks as a
    reading's do (`with_live`), since the root shows them."""
    updated = incident.model_copy(
        update={
            "title": facts.title,
            "priority": facts.priority,
            "team": facts.team,
            "summary": facts.summary,
            "description": facts.description,
            "links": Links(
                runbook=facts.runbook_url,
                alert=facts.alert_url,
                silence=facts.silence_url,
                dashboard=facts.dashboard_url,
                panel=facts.panel_url,
                issue=incident.links.issue,  # ours, not the alert's: kept
            ),
            "numbers": facts.numbers,
            "runner_types": dict(facts.runner_types),
            "other_values": dict(facts.other_values),
            "firing_count": facts.firing_count,
            "silence_matchers": facts.silence_matchers,
            "truncated": facts.truncated,
            "notifications": incident.notifications + 1,
            "updated_at": now,
            "alerted_at": now,
        }
    )
    return with_live(updated, None, updated.snapshot(now))


def queued_total(numbers: QueueNumbers, types: Mapping[str, RunnerQueue]) -> float | None:
    """Jobs queued across the runner types at one moment: the sum of the types' queues where
    the numbers name them (a reading's, or an alert's that labels each type), else the alert's
    own figure (`max_queue_size`: its rule's, over the rule's window; often the largest type's
    queue, not all of them)."""
    queued = [queue.queued for queue in types.values() if queue.queued is not None]
    return sum(queued) if queued else numbers.max_queue_size


def sums_types(types: Mapping[str, RunnerQueue]) -> bool:
    """Whether `queued_total` of these types is their sum (a type's queue is known), not the
    alert's own figure."""
    return any(queue.queued is not None for queue in types.values())


def peaks_seen(incident: Incident, seen: Snapshot) -> dict[str, object]:
    """The incident's peaks once it has shown `seen` (an alert's numbers at a notification, or a
    reading): the update of `peak`, `peak_types` and `peak_snapshot`, made together in this one
    place (`with_live`).

    A peak is the most any surface showed: the peak queue the most jobs queued that a snapshot
    said (`queued_total`: its types' queues summed where it names them, else the alert's own
    figure, as the root says either), `peak_snapshot` the first moment it was said, with its
    types' numbers; each type's peak the most it showed; the longest wait the longest shown.
    The peak queue is at least each type's, as every snapshot's total is at least its types'."""
    queued = queued_total(seen.numbers, seen.runner_types)
    before = incident.peak.max_queue_size
    update: dict[str, object] = {
        "peak": _peak_of(incident.peak, seen.numbers, max_known(before, queued)),
        "peak_types": peak_types_of(incident.peak_types, dict(seen.runner_types)),
    }
    if queued is not None and (before is None or queued > before):
        numbers = replace(seen.numbers, max_queue_size=queued)
        update["peak_snapshot"] = seen.model_copy(update={"numbers": numbers})
    return update


def peak_moment(incident: Incident) -> Snapshot | None:
    """When the peak queue was seen, with each runner type's numbers then; for an incident
    stored without it (by 0.25), the trend's status with the most jobs queued (None without
    one)."""
    if incident.peak_snapshot is not None:
        return incident.peak_snapshot
    at = incident.trend.peak_at()
    if at is None:
        return None
    return trend_snapshot(incident.trend, at)


def trend_snapshot(trend: Trend, at: datetime) -> Snapshot:
    """The trend's status at `at` (one of its times) as a snapshot: its total, and each runner
    type it showed."""
    stamp = at.timestamp()
    types = {
        name: RunnerQueue(queued=queued, longest_wait_mins=wait)
        for name in trend.names()
        for when, queued, wait in trend.points(name)
        if when == stamp
    }
    total = trend.totals()[trend.times().index(stamp)]
    return Snapshot(at=at, numbers=QueueNumbers(max_queue_size=total), runner_types=types)


def _peak_of(peak: QueueNumbers, current: QueueNumbers, size: float | None) -> QueueNumbers:
    """The worst numbers seen so far, the peak queue `size`; thresholds follow the latest
    alert."""
    return QueueNumbers(
        max_queue_time_mins=max_known(peak.max_queue_time_mins, current.max_queue_time_mins),
        max_queue_size=size,
        queue_time_threshold=current.queue_time_threshold,
        queue_size_threshold=current.queue_size_threshold,
        queue_time_over=current.queue_time_over,
        queue_size_over=current.queue_size_over,
    )
