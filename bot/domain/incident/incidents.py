"""The incident: plain state, and its lifecycle as pure functions of (state, event, now), so
races such as "a resolved notification overtaking a firing one" are table tests."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from bot.domain.alerting.alerts import (
    AlertFacts,
    Matcher,
    QueueNumbers,
    RunnerQueue,
    Source,
    first_known,
    max_known,
)
from bot.domain.alerting.delivery import Delivery
from bot.domain.incident.trend import Trend
from bot.domain.queue_cost.cost import Waited
from bot.domain.queue_cost.jobs import Workflows
from bot.domain.reading.fleet import (
    FleetSnapshot,
    HistoryPoint,
    RunnerTypeMetrics,
    longest_wait,
    of_measure,
    of_type,
)
from bot.domain.reading.judgement import BOOT_MINS, Judgement, added
from bot.domain.reading.runner_names import runner_key
from bot.domain.scale.scale_ups import DryRun, ScaleUp, credited

TREND_POINTS = 48
RECORD_RELEASE = 28  # the release whose records this module writes (`written_by`, kept flat)
RECENT_ACTIONS = 3  # on the root; the timeline keeps them all
# Kept on the record, with each responder's first action: a weeks-long incident stays one read.
MAX_ACTIONS = 200
MAX_RESOLVED_INSTANCES = 1000  # alert instances seen resolved, per group
# Timeline kinds beyond the lifecycle's, on the record for the postmortem.
REFUSED = "refused"
EARLY_WARNING = "early_warning"
POSTMORTEM = "postmortem"
# A change after a postmortem was drafted that makes it say something else: said under it.
AMENDED = "amended"
# A person's first act acknowledged the incident too: part of that act, not another one.
ACKNOWLEDGED_BY_ACTING = "acknowledged_by_acting"
PILOT = "queuepilot (policy)"  # who the timeline says acted: no person's permission is borrowed
# A dry-run pilot's act: said and kept, nothing scaled.
DRY_RUN, DRY_RUN_BY = "pilot_dry_run", "queuepilot (policy, dry run)"


class Status(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


class Resolution(StrEnum):
    ALERT = "alert"
    MANUAL = "manual"
    TEST = "test"  # Grafana's Test button: shown once, never followed up
    DRAINED = "drained"  # the live metrics saw the queue drain


class Change(StrEnum):
    """What a notification did to an incident; decides which thread replies follow."""

    OPENED = "opened"
    UPDATED = "updated"
    ALERTS_CHANGED = "alerts_changed"  # a different set of alerts or runner types is firing
    RESOLVED = "resolved"
    FOLLOWED = "followed"  # the alert cleared while jobs still queue: followed until they drain
    REOPENED = "reopened"
    STALE = "stale"  # older than what the incident already reflects, or a duplicate delivery


class Event(BaseModel):
    at: datetime
    kind: str  # opened, notified, alerts_changed, status, acknowledged, resolved, reopened, ...
    text: str
    actor: str | None = None  # Slack user ID for people; None for the alert source or the bot
    actor_name: str = ""  # routine replies name the actor and must not ping them
    scale: ScaleUp | None = None  # a scale-up's (kind "scaled"), its whole life
    would: DryRun | None = None  # a dry-run pilot's act (kind "pilot_dry_run"): nothing scaled

    @model_validator(mode="after")
    def _made_at(self) -> Event:
        """A scale-up 0.27 recorded may not say when it was made: its event's moment."""
        if self.scale is not None and self.scale.at is None:
            self.scale = self.scale.model_copy(update={"at": self.at})
        return self


def actions_taken(events: Sequence[Event]) -> list[Event]:
    """What responders did to the incident, every surface's count: a refusal is something asked,
    not done; a postmortem is written about the incident, not done to it."""
    not_done = (REFUSED, POSTMORTEM, ACKNOWLEDGED_BY_ACTING)
    return [event for event in events if event.actor and event.kind not in not_done]


def drafted_from(events: Sequence[Event], drafted: Event) -> list[Event]:
    """The events before the write-up `drafted`: its copy drafted later says what Slack's said."""
    events = list(events)
    return events[: events.index(drafted)] if drafted in events else events


class PilotLine(BaseModel):
    """The pilot's latest word on one runner type in the incident: which rule decided (`kind`,
    the record changes where it does), in words, since when."""

    kind: str
    said: str
    at: datetime
    # The reasons it stood aside already on the timeline: each is told there once an incident.
    told: tuple[str, ...] = ()


class Responder(BaseModel):
    user_id: str
    name: str = ""


class Links(BaseModel):
    # Frozen, so hashable: the default is shared, not deep-copied into each new incident.
    model_config = ConfigDict(frozen=True)

    runbook: str = ""
    alert: str = ""
    silence: str = ""
    dashboard: str = ""
    panel: str = ""
    issue: str = ""  # the alert's GitHub issue, once linked


class ActiveSilence(BaseModel):
    """A silence made from Slack and believed in force (the status tick checks it)."""

    silence_id: str
    backend: str  # "Alertmanager", "Grafana", as messages name it
    until: datetime
    by: str
    by_name: str = ""
    at: datetime
    # Ended at the resolve unless its maker chose to keep it (it would hide a re-fire).
    kept: bool = False
    unended: str = ""  # why ending it at the resolve failed for good: it runs out instead

    @property
    def ends_at_resolve(self) -> bool:
        return not self.kept and not self.unended


@dataclass(frozen=True)
class DrainRule:
    """DRAIN_MAX_QUEUED, DRAIN_MAX_WAIT_MINUTES: drained when every type shown is within both."""

    max_queued: float
    max_wait_mins: float


# How a followed queue stopped being followed (`Follow.ended`).
DRAINED, UNDER, CAPPED = "drained", "under", "capped"


class Follow(BaseModel):
    """The alert cleared with `queued` jobs over its thresholds: open until the queue drains,
    falls under them, or DRAIN_FOLLOW_MAX passes (`ended`)."""

    cleared_at: datetime
    queued: float
    ended: str = ""


class RunnersSeen(BaseModel):
    """A runner type's runners over the incident's live readings, each at its most: what the
    capacity report says of the type where the incident covers it."""

    busy: float | None = None
    registered: float | None = None
    minimum: float | None = None
    maximum: float | None = None


# A type's stored advice: its direction, runners to add, maximum to raise by, nodes short.
Advice = tuple[str, int, int, int]


def kept_apart(numbers: QueueNumbers, types: Mapping[str, RunnerQueue]) -> QueueNumbers:
    """`numbers` with the longest wait and the slowest recent start apart. Until 0.28 the wait
    held whichever was longer: where only a type's start has that number, it was the start."""
    mins = numbers.max_queue_time_mins
    if mins is None or numbers.slowest_start_mins is not None:
        return numbers
    waits, starts = (
        {q.longest_wait_mins for q in of_measure(types.values(), starts=s)} for s in (False, True)
    )
    if mins in waits or mins not in starts:
        return numbers
    return replace(numbers, max_queue_time_mins=None, slowest_start_mins=mins)


class Snapshot(BaseModel):
    at: datetime
    numbers: QueueNumbers = QueueNumbers()
    runner_types: dict[str, RunnerQueue] = Field(default_factory=dict)
    advice: dict[str, Advice] = Field(default_factory=dict)  # a live view's, per runner type


class Peaks(BaseModel):
    """The most the incident showed, each of its own measure: kept, as the record keeps only the
    latest readings. `numbers` has the latest thresholds; `moment`: the first with the most jobs."""

    numbers: QueueNumbers = QueueNumbers()
    moment: Snapshot | None = None
    wait_at: datetime | None = None  # the first reading with the longest wait
    start_at: datetime | None = None  # the first reading with the slowest recent start
    types: dict[str, RunnerQueue] = Field(default_factory=dict)  # each type's, as `numbers`
    runners: dict[str, RunnersSeen] = Field(default_factory=dict)  # over the live readings


class QueueCost(BaseModel):
    """What the queue cost each type's jobs from the alert to `at` (`bot.fleet.cost`), and what
    the dashboards' counters were given of it, by type (job-seconds, jobs delayed)."""

    by_type: dict[str, Waited] = Field(default_factory=dict)
    at: datetime | None = None
    unknown: str = ""  # why no source tells the cost
    counted: dict[str, tuple[float, int]] = Field(default_factory=dict)


class Drain(BaseModel):
    """`checks`: consecutive checks that found the queue drained; `read_at`: the reading the last
    counted (one reading is one check however often it is looked at); `follow`: after the alert."""

    checks: int = 0
    read_at: datetime | None = None
    follow: Follow | None = None


class Shown(BaseModel):
    """What the thread shows, held still for people. `status`: what the latest new status reply
    showed (before any, the opening numbers); `replied_since`: another reply followed it (an edit
    would show numbers newer than the reply below); `charted_at`, `pictured_at`: the trend's end
    when a status last drew it, as a picture (0: never), which the summary leaves out."""

    status: Snapshot | None = None
    statuses: int = 0
    replied_since: bool = False
    charted_at: float = 0.0
    pictured_at: float = 0.0


class Cause(BaseModel):
    """The latest diagnostics' conclusion (`said`): a shortfall against `runner_type`'s `maximum`,
    or its new pods cannot start (`pods`); a reading that disproves it clears it."""

    said: str = ""
    runner_type: str = ""
    maximum: float | None = None
    pods: bool = False


class Acknowledged(BaseModel):
    by: str | None = None  # a Slack user ID
    name: str = ""


class Resolved(BaseModel):
    """How the incident resolved (`at` None: it has not, or it fired again since); `by`: who,
    where a person resolved it."""

    at: datetime | None = None
    how: Resolution | None = None
    by: str | None = None
    by_name: str = ""


class Notified(BaseModel):
    """The notifications of its alert group it took in, and when the latest firing one came."""

    count: int = 0
    at: datetime | None = None


# Each group's fields as the record keeps them, flat, as 0.27 wrote and reads them (in the group's
# order): a rollback to it reads this release's records, and this release reads its. From 0.29 the
# groups are kept.
_KEPT_FLAT = {
    group: dict(zip(model.model_fields, flat.split(), strict=True))
    for group, model, flat in (
        ("peaks", Peaks, "peak peak_snapshot peak_wait_at peak_start_at peak_types peak_runners"),
        ("queue_cost", QueueCost, "cost cost_at cost_unknown cost_counted"),
        ("drain", Drain, "drain_checks drain_read_at follow"),
        ("shown", Shown, "posted_status status_posts replied_since_status charted_at pictured_at"),
        ("cause", Cause, "likely_cause cause_type cause_maximum cause_pods"),
        ("acknowledged", Acknowledged, "acknowledged_by acknowledged_name"),
        ("resolved", Resolved, "resolved_at resolution resolved_by resolved_by_name"),
        ("notified", Notified, "notifications alerted_at"),
    )
}


class Incident(BaseModel):
    id: str
    # Beside the short ID people type: a button from before a Redis data loss carries the old
    # UID, so it never acts on a new incident that got the same short ID.
    uid: str = ""
    channel: str = ""
    group_key: str
    group_hash: str
    source: Source
    is_test: bool = False
    title: str
    priority: str | None = None
    team: str | None = None
    rule: str = ""  # as pytorch/alerting-infra titles its issue
    pipeline_key: str = ""  # alerting-infra's key for the alert (`alert_issue.pipeline_key`)
    summary: str = ""
    description: str = ""
    links: Links = Links()
    numbers: QueueNumbers = QueueNumbers()
    peaks: Peaks = Field(default_factory=Peaks)
    runner_types: dict[str, RunnerQueue] = Field(default_factory=dict)
    other_values: dict[str, float] = Field(default_factory=dict)
    firing_count: int = 0
    silence_matchers: tuple[Matcher, ...] = ()
    started_at: datetime
    opened_at: datetime
    updated_at: datetime
    notified: Notified = Field(default_factory=Notified)
    resolved: Resolved = Field(default_factory=Resolved)
    acknowledged: Acknowledged = Field(default_factory=Acknowledged)
    reopened: int = 0
    truncated: tuple[str, ...] = ()
    silence: ActiveSilence | None = None
    actions: tuple[Event, ...] = ()  # what people did, and the scale-ups taken on (`with_action`)
    cause: Cause = Field(default_factory=Cause)
    shown: Shown = Field(default_factory=Shown)
    trend: Trend = Field(default_factory=Trend)  # the readings: the latest statuses'
    # The reading: the live backend's latest, counting the scale-ups since; None with `alert`.
    live: FleetSnapshot | None = None
    queue_cost: QueueCost = Field(default_factory=QueueCost)
    drain: Drain = Field(default_factory=Drain)
    replies: int = 0  # replies committed to the thread (`IncidentStore` counts them)
    workflows: Workflows | None = None  # as its latest postmortem read them
    # The pilot's word per runner type it acts on here: the root and its thread line say it.
    pilot: dict[str, PilotLine] = Field(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _read(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Incident:
        """The groups from their fields kept flat; `status` follows `resolved`. A record written
        before `RECORD_RELEASE` (0.27's, or one a rolled-back 0.27 rewrote: it drops what it does
        not know, `written_by` too) is read `_apart`."""
        if not isinstance(data, dict):
            return handler(data)
        data = dict(data)
        written = data.pop("written_by", 0)
        data.pop("status", None)
        for group, fields in _KEPT_FLAT.items():
            if kept := {name: data.pop(flat) for name, flat in fields.items() if flat in data}:
                data[group] = kept
        put_backs = data.pop("put_backs", None)
        incident = handler(data)
        kept = [_put_back_kept(up) for up in incident.put_backs]
        if isinstance(put_backs, list) and put_backs != kept:
            incident = _going_back(incident, put_backs)  # a rolled-back 0.27 changed them
        return incident if written >= RECORD_RELEASE else _apart(incident)

    @model_serializer(mode="wrap")
    def _kept_flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for group, fields in _KEPT_FLAT.items():
            held = data.pop(group, None)
            if isinstance(held, dict):
                data |= {fields[name]: value for name, value in held.items()}
        put_backs = [_put_back_kept(up) for up in self.put_backs]
        return data | {
            "status": self.status.value,
            "put_backs": put_backs,
            "written_by": RECORD_RELEASE,
        }

    @property
    def recent_actions(self) -> tuple[Event, ...]:
        return self.actions[-RECENT_ACTIONS:]

    @property
    def responders(self) -> tuple[Responder, ...]:
        """In order of first action."""
        named: dict[str, str] = {}
        for event in self.actions:
            if event.actor:
                named.setdefault(event.actor, event.actor_name)
        return tuple(Responder(user_id=user, name=name) for user, name in named.items())

    @property
    def put_backs(self) -> tuple[ScaleUp, ...]:
        """Its scale-ups still to go back, in the order made: one a record, the latest of it."""
        return tuple(up for e in self.actions if (up := e.scale) is not None and up.back)

    @property
    def status(self) -> Status:
        return Status.FIRING if self.resolved.at is None else Status.RESOLVED

    @property
    def is_open(self) -> bool:
        return self.resolved.at is None

    @property
    def shown_types(self) -> set[str]:
        return {*self.peaks.types, *(self.live.runner_types if self.live else {})}

    @property
    def peak_summed(self) -> bool:
        """Whether the peak queue is the types' queues summed, not the alert's own figure."""
        moment = self.peaks.moment
        return sums_types(moment.runner_types if moment else self.peaks.types)

    def snapshot(self, at: datetime) -> Snapshot:
        queued = queued_total(self.numbers, self.runner_types)
        numbers = replace(self.numbers, max_queue_size=queued)
        return Snapshot(at=at, numbers=numbers, runner_types=dict(self.runner_types))


def _apart(incident: Incident) -> Incident:
    """0.27 kept the slowest recent start as the longest wait where it was the longer (its type
    said which): its statuses' and its peak's two measures set apart."""
    shown, peaks = incident.shown, incident.peaks
    for group, name in ((shown, "status"), (peaks, "moment")):
        if (moment := getattr(group, name)) is not None:
            numbers = kept_apart(moment.numbers, moment.runner_types)
            setattr(group, name, moment.model_copy(update={"numbers": numbers}))
    peak = kept_apart(peaks.numbers, peaks.types)
    if peak != peaks.numbers and peaks.start_at is None:
        peaks.numbers, peaks.start_at, peaks.wait_at = peak, peaks.wait_at, None
    return incident


# 0.27 kept the scale-ups still to go back as a list of their own, and reads only that: it is
# written for a rolled-back 0.27 and read back, whoever wrote it, onto the scale-ups it names.
_PUT_BACK_KEPT = {"id": "back", "before": "back_to", "when": "back_when", "latest": "back_by"}


_NOT_BACK: dict[str, Any] = {"back": "", "back_to": None, "back_when": "", "back_by": None}


def _put_back_kept(up: ScaleUp) -> dict[str, Any]:
    kept = {name: getattr(up, field) for name, field in _PUT_BACK_KEPT.items()}
    kept["latest"] = up.back_by.isoformat() if up.back_by else None
    return kept | {"runner_type": up.runner_type, "field": up.field, "after": up.back_from}


def _going_back(incident: Incident, put_backs: list[Any]) -> Incident:
    """The scale-ups `put_backs` names (the latest of its type and field, the one it goes back
    from where one is) marked to go back, no others; an entry not of 0.27's shape passed over."""
    ups = {e.at: e.scale.model_copy(update=_NOT_BACK) for e in incident.actions if e.scale}
    for kept in put_backs:
        if not isinstance(kept, dict):
            continue
        of = (kept.get("runner_type"), kept.get("field"))
        mine = [at for at, up in ups.items() if (up.runner_type, up.field) == of]
        landed = [at for at in mine if ups[at].back_from == kept.get("after")] or [
            at for at in mine if not ups[at].undone
        ]
        if not landed:
            continue
        fields = {f: kept.get(name) for name, f in _PUT_BACK_KEPT.items()}
        with suppress(ValidationError):
            ups[landed[-1]] = ScaleUp.model_validate(ups[landed[-1]].model_dump() | fields)
    return with_scale_ups(incident, ups)


class GroupState(BaseModel):
    """Kept with no incident open, so a resolved notification handled before an older firing
    one still stops that firing from opening one."""

    incident_id: str | None = None
    last_entry: str = ""  # the newest stream entry applied to this group
    resolved: tuple[str, ...] = ()  # alert instances seen resolved, oldest first


# Priority names by rank (0 is the most severe); "P1", "sev2", "S3" rank by their digit.
_RANKED = ("", "critical", "high major error", "warning medium moderate", "low minor info")
_SEVERITY_NAMES = {name: rank for rank, names in enumerate(_RANKED) for name in names.split()}
_SEVERITY_DIGIT = re.compile(r"(?:p|sev|s)?\s*-?\s*([0-9])", re.IGNORECASE)
UNRANKED = 5


def severity_rank(priority: str | None) -> int:
    """In a storm, the order new groups get threads."""
    text = (priority or "").strip().lower()
    if text in _SEVERITY_NAMES:
        return _SEVERITY_NAMES[text]
    match = _SEVERITY_DIGIT.fullmatch(text)
    return min(int(match.group(1)), 4) if match else UNRANKED


def entry_order(entry_id: str) -> tuple[int, int]:
    if not entry_id:
        return (-1, -1)
    ms, _, seq = entry_id.partition("-")
    return (int(ms), int(seq or 0))


def is_stale(group: GroupState, delivery: Delivery, entry_id: str) -> bool:
    """Older in stream order than the newest entry applied, or a firing whose alerts were all
    seen resolved (a lagging HA peer repeats the old startsAt; a re-fire has a new one)."""
    older = entry_order(entry_id) <= entry_order(group.last_entry)
    refired = delivery.status == "firing" and bool(delivery.firing)
    return older or (refired and set(group.resolved).issuperset(delivery.firing))


def noted(group: GroupState, delivery: Delivery, entry_id: str) -> GroupState:
    resolved = tuple(dict.fromkeys((*group.resolved, *delivery.resolved)))[-MAX_RESOLVED_INSTANCES:]
    return group.model_copy(update={"last_entry": entry_id, "resolved": resolved})


def is_reopenable(incident: Incident, now: datetime, window: timedelta) -> bool:
    at = incident.resolved.at
    return at is not None and now - at <= window


def open_incident(
    delivery: Delivery, *, incident_id: str, uid: str, channel: str, now: datetime
) -> Incident:
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
    # The trend starts with the alert's reading, so that a chart covers the incident from it.
    first = incident.snapshot(now)
    incident = incident.model_copy(update={"shown": Shown(status=first), "trend": _trended(first)})
    if incident.is_test:
        # Grafana never resolves a test notification; left open it would post status forever.
        return _resolved(incident, Resolved(at=now, how=Resolution.TEST))
    return incident


def apply_notification(
    incident: Incident,
    delivery: Delivery,
    *,
    entry_id: str,
    now: datetime,
    still_queued: float | None = None,
) -> tuple[Incident, Change]:
    """A later notification of the group folded into its incident. `still_queued`: jobs the live
    reading sees over the alert's thresholds, which a resolve leaves followed, not resolved."""
    if delivery.status == "resolved":
        if not incident.is_open or incident.drain.follow is not None:
            return incident, Change.STALE
        # `now`, not the alert's endsAt: the reopen window and the duration are this incident's.
        count = incident.notified.count + 1
        update = {"numbers": QueueNumbers(), "runner_types": {}, "firing_count": 0}
        update["notified"] = incident.notified.model_copy(update={"count": count})
        if still_queued:
            return _followed(incident, still_queued, now, update), Change.FOLLOWED
        cleared = _resolved(incident, Resolved(at=now, how=Resolution.ALERT), **update)
        return cleared, Change.RESOLVED
    resolved = incident.resolved
    resolved_ms = resolved.at.timestamp() * 1000 if resolved.at else 0.0
    if resolved.how is Resolution.MANUAL and entry_order(entry_id)[0] < resolved_ms:
        return incident, Change.STALE  # fired before someone resolved it by hand
    updated = _with_facts(incident, delivery.facts, now=now)
    if not incident.is_open:
        update = {"resolved": Resolved(), "acknowledged": Acknowledged()}
        update |= {"drain": _following(incident, None), "reopened": incident.reopened + 1}
        if incident.silence is not None:  # what failed was that resolve's end: the next tries
            update["silence"] = incident.silence.model_copy(update={"unended": ""})
        return updated.model_copy(update=update), Change.REOPENED
    if incident.drain.follow is not None:  # it never resolved: firing again, as the thread hears
        followed = updated.model_copy(update={"drain": _following(updated, None)})
        return followed, Change.ALERTS_CHANGED
    before, after = ((i.firing_count, set(i.runner_types)) for i in (incident, updated))
    return updated, Change.ALERTS_CHANGED if before != after else Change.UPDATED


def _followed(
    incident: Incident, queued: float, now: datetime, update: dict[str, object]
) -> Incident:
    """The alert's numbers cleared, but not the thresholds the queue is followed against, nor
    the names of its types (read live, they stay this incident's, not every type that queues)."""
    size, time = thresholds(incident)
    update |= {
        "numbers": QueueNumbers(queue_size_threshold=size, queue_time_threshold=time),
        "runner_types": dict.fromkeys(incident.runner_types, RunnerQueue()),
        "drain": _following(incident, Follow(cleared_at=now, queued=queued)),
        "updated_at": now,
    }
    return incident.model_copy(update=update)


def _following(incident: Incident, follow: Follow | None) -> Drain:
    return incident.drain.model_copy(update={"follow": follow})


def thresholds(incident: Incident) -> tuple[float | None, float | None]:
    """The alert rule's size and time thresholds: its latest numbers', else the peak's (kept when
    a resolve cleared the numbers)."""
    numbers, peak = incident.numbers, incident.peaks.numbers
    return (
        first_known(numbers.queue_size_threshold, peak.queue_size_threshold),
        first_known(numbers.queue_time_threshold, peak.queue_time_threshold),
    )


def repeated(incident: Incident, *, now: datetime) -> Incident:
    """The delivery the incident was just UPDATED with, again: only the count moves."""
    notified = Notified(count=incident.notified.count + 1, at=now)
    return incident.model_copy(update={"notified": notified, "updated_at": now})


def _resolved(incident: Incident, resolved: Resolved, **update: object) -> Incident:
    return incident.model_copy(update={"resolved": resolved, "updated_at": resolved.at, **update})


def resolve_manually(incident: Incident, *, by: str, name: str, now: datetime) -> Incident:
    return _resolved(incident, Resolved(at=now, how=Resolution.MANUAL, by=by, by_name=name))


def resolve_drained(incident: Incident, *, now: datetime, ended: str = DRAINED) -> Incident:
    """Drained, or a followed queue no longer followed (`ended`: why)."""
    if (follow := incident.drain.follow) is None:
        return _resolved(incident, Resolved(at=now, how=Resolution.DRAINED))
    how = Resolution.ALERT if ended == CAPPED else Resolution.DRAINED
    drain = _following(incident, follow.model_copy(update={"ended": ended}))
    return _resolved(incident, Resolved(at=now, how=how), drain=drain)


def acknowledge(incident: Incident, *, by: str, name: str, now: datetime) -> Incident:
    update = {"acknowledged": Acknowledged(by=by, name=name), "updated_at": now}
    return incident.model_copy(update=update)


def would_said(runner_type: str, runners: int, at: datetime) -> str:
    """A dry-run pilot's act in words, wherever it is said."""
    return f"would have scaled {runner_type} by +{runners} at {at:%H:%M} UTC"


def would_event(runner_type: str, runners: int, at: datetime, why: str) -> Event:
    """A dry-run pilot's act as the timeline keeps it: nothing was scaled."""
    text = f"{DRY_RUN_BY} {would_said(runner_type, runners, at)}: {why}"
    would = DryRun(runner_type=runner_type, runners=runners)
    return Event(at=at, kind=DRY_RUN, text=text, actor_name=PILOT, would=would)


def with_action(incident: Incident, event: Event) -> Incident:
    """A scale-up counts in the judgement the root shows."""
    actions = kept_actions((*incident.actions, event))
    acted = incident.model_copy(update={"actions": actions, "updated_at": event.at})
    if event.scale is None or acted.live is None:
        return acted
    return acted.model_copy(update={"live": counting_scale_ups(acted.live, acted.actions)})


def kept_actions(actions: tuple[Event, ...]) -> tuple[Event, ...]:
    """The newest `MAX_ACTIONS`, and before them each responder's first (the responders stay
    whole) and each scale-up still to go back (its summary says so). A scale-up that many actions
    back is long past any reading's window (`counting_scale_ups`)."""
    older, newest = actions[:-MAX_ACTIONS], actions[-MAX_ACTIONS:]
    seen: set[str] = set()
    kept = []
    for event in older:
        first = bool(event.actor) and event.actor not in seen
        seen.add(event.actor or "")
        if first or (event.scale is not None and event.scale.back):
            kept.append(event)
    return (*kept, *newest)


def counting_scale_ups(view: FleetSnapshot, actions: Sequence[Event]) -> FleetSnapshot:
    """Each type's judgement counting the runners added after its reading, and for a boot's time
    before it, those the reading cannot show yet; only a scale-up's moment decides."""
    made = [d.model_copy(update={"at": d.at or e.at}) for e in actions if (d := e.scale)]
    return counting(view, made)


def counting(view: FleetSnapshot, made: Sequence[ScaleUp]) -> FleetSnapshot:
    """`counting_scale_ups` of scale-ups kept elsewhere (an early warning's), each with its time."""
    done = [(d, d.at) for d in made if d.at is not None and not d.undone]
    types = dict(view.runner_types)
    for name, metrics in view.runner_types.items():
        if (judged := metrics.judged) is None:
            continue
        booting = judged.at - timedelta(minutes=BOOT_MINS)
        mine = [
            d
            for d, at in done
            if runner_key(d.runner_type) == runner_key(name)
            and (at > judged.at or (at > booting and not _reads(metrics, d)))
        ]
        raised = sum(d.added for d in mine if "max" in d.field.lower())
        judged = added(judged, sum(d.added for d in mine), maximum_by=raised)
        types[name] = metrics.model_copy(update={"judged": judged})
    return view.model_copy(update={"runner_types": types})


def _reads(metrics: RunnerTypeMetrics, done: ScaleUp) -> bool:
    """The bound it raised, where read, else the autoscaler's desired runners (which count what
    is booting)."""
    field = done.field.lower()
    bound = metrics.maximum if "max" in field else metrics.minimum if "min" in field else None
    if done.after is not None and bound is not None:
        return bound >= done.after
    return metrics.desired is not None


def made_scale_ups(incident: Incident) -> list[ScaleUp]:
    """Its scale-ups, in the order made."""
    return [e.scale for e in incident.actions if e.scale is not None]


def with_scale_ups(incident: Incident, changed: Mapping[datetime, ScaleUp]) -> Incident:
    """The incident with the scale-ups of its "scaled" events at these moments `changed`."""
    actions = tuple(
        e.model_copy(update={"scale": changed[e.at]}) if e.scale and e.at in changed else e
        for e in incident.actions
    )
    return incident.model_copy(update={"actions": actions})


def with_bought(
    incident: Incident,
    history: Sequence[HistoryPoint],
    now: datetime,
    window: timedelta,
    *,
    final: bool = False,
) -> Incident:
    """The incident with what each scale-up whose runners came bought (`credited`)."""
    made = {e.at: e.scale for e in incident.actions if e.scale is not None}
    credit = credited(list(made.values()), history, now, window, final=final)
    changed = {at: up for (at, was), up in zip(made.items(), credit, strict=True) if up != was}
    return with_scale_ups(incident, changed) if changed else incident


def without_put_backs(incident: Incident, ids: set[str]) -> Incident:
    """Nothing on the incident puts back the records `ids` any more (gone, or handed on)."""
    gone = {
        e.at: e.scale.model_copy(update=_NOT_BACK)
        for e in incident.actions
        if e.scale is not None and e.scale.back in ids
    }
    return with_scale_ups(incident, gone)


def shown_now(incident: Incident, **changed: object) -> Incident:
    """The incident with what its thread shows `changed` (`Shown`'s fields)."""
    return incident.model_copy(update={"shown": incident.shown.model_copy(update=changed)})


def trend_end(incident: Incident) -> float:
    """What a chart drawn now ends on (0: nothing)."""
    return (incident.trend.times() or [0.0])[-1]


def chart_drawn(incident: Incident, drawn_at: float) -> bool:
    """Whether the chart drawn ending at `drawn_at` shows what one drawn now would: no status
    since, and no peak since (a chart draws the peak's reading, a status or not)."""
    peak = incident.peaks.moment
    if peak is not None and int(peak.at.timestamp()) > drawn_at:
        return False
    return drawn_at > 0 and drawn_at == trend_end(incident)


def diagnosed(
    incident: Incident,
    likely_cause: str,
    *,
    short_of: tuple[str, float] | None = None,
    pods_of: str = "",
) -> Incident:
    """`short_of`: the runner type and the maximum the conclusion says it is short of;
    `pods_of`: the runner type whose new pods the conclusion says cannot start."""
    kind, maximum = short_of or (pods_of, None)
    pods = bool(pods_of) and short_of is None
    cause = Cause(said=likely_cause, runner_type=kind, maximum=maximum, pods=pods)
    return incident.model_copy(update={"cause": cause})


def _disproved(cause: Cause, live: FleetSnapshot) -> bool:
    """Whether a live reading disproves the conclusion: the maximum it was short of was raised, or
    the type needs no higher one; the pods that could not start now can."""
    if not live.is_live or (cause.maximum is None and not cause.pods):
        return False
    found = of_type(live.runner_types, cause.runner_type)
    if found is None or found.judged is None:
        return False
    if cause.pods:
        # Read without the pods (their sources gone), the reading says nothing of them.
        return found.pods is not None and not found.judged.cannot_start
    maximum = found.judged.maximum
    return maximum is not None and (maximum > cause.maximum or not found.judged.raise_maximum_by)


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
    """`posted`: a new reply (not an edit of the previous one, nor nothing said). A drain check
    counted (more than before) counts `live`'s reading."""
    drain, shown = incident.drain, incident.shown
    counted = live is not None and drain_checks > drain.checks
    read_at = live.at if counted and live is not None else drain.read_at
    seen: dict[str, object] = {"statuses": shown.statuses + posted}
    if posted:
        seen |= {"status": snapshot, "replied_since": False}
    update = {
        # Keeps the point `chart_moved` compares with.
        "trend": _trended(snapshot, incident.trend, keep={shown.charted_at}),
        "drain": drain.model_copy(update={"checks": drain_checks, "read_at": read_at}),
        "shown": shown.model_copy(update=seen),
    }
    return with_live(incident.model_copy(update=update), live, snapshot)


def _trended(seen: Snapshot, trend: Trend | None = None, keep: Collection[float] = ()) -> Trend:
    """`trend` (None: a new one) with `seen` appended."""
    queued, trend = seen.numbers.max_queue_size, Trend() if trend is None else trend
    return trend.appended(seen.at, queued, seen.runner_types, limit=TREND_POINTS, keep=keep)


# A status reply is posted only when what a responder acts on changed (the root keeps the numbers
# current): a threshold counts as crossed once clear of it by both a step and a ratio, so a queue
# wobbling around it does not cross it at every reading; the chart, once the queue moved as much.
QUEUED_STEP, QUEUED_RATIO = 3.0, 0.25
WAIT_STEP_MINS, WAIT_RATIO = 10.0, 0.25
# Two status replies never carry the same minute (their titles, their "Firing for").
STATUS_SPACING = timedelta(minutes=1)


def moved(before: float | None, now: float | None, step: float, ratio: float) -> bool:
    """Known on one side only, or changed by both `step` and `ratio` of the larger."""
    if before is None or now is None:
        return (before is None) != (now is None)
    delta = abs(now - before)
    return delta >= step and delta >= ratio * max(abs(before), abs(now))


def advice_of(judged: Judgement) -> Advice:
    direction = judged.direction.value if judged.direction is not None else ""
    return (direction, judged.runners, judged.raise_maximum_by, judged.nodes_short)


def is_material(posted: Snapshot | None, current: Snapshot, drain: DrainRule) -> bool:
    """Worth a new status reply since the `posted` one: a runner type's advice changed, or the
    queue or the wait crossed the alert's threshold or the drain rule's."""
    if posted is None:
        return True
    # A status stored without its advice knows none to compare: not news by itself.
    if posted.advice and posted.advice != current.advice:
        return True
    before, now = posted.numbers, current.numbers
    queued = (before.max_queue_size, now.max_queue_size, now.queue_size_threshold)
    waited = (before.max_queue_time_mins, now.max_queue_time_mins, now.queue_time_threshold)
    started = (before.slowest_start_mins, now.slowest_start_mins, now.queue_time_threshold)
    # Out of the drain rule by more than a step: a queue back after it looked drained is news.
    # Looking drained is not: the root says it at once.
    beyond = (drain.max_queued + QUEUED_STEP, drain.max_wait_mins + WAIT_STEP_MINS)
    was = _drained(posted, drain.max_queued, drain.max_wait_mins)
    return (
        _crossed(*queued, QUEUED_STEP, QUEUED_RATIO)
        or _crossed(*waited, WAIT_STEP_MINS, WAIT_RATIO)
        or _crossed(*started, WAIT_STEP_MINS, WAIT_RATIO)
        or (was and not _drained(current, *beyond))
    )


def _crossed(
    before: float | None, now: float | None, threshold: float | None, step: float, ratio: float
) -> bool:
    """From one side of `threshold` to beyond the other by more than its margin."""
    if before is None or now is None or threshold is None:
        return False
    margin = max(step, ratio * threshold)
    return now > threshold + margin if before < threshold else now < threshold - margin


def _drained(snapshot: Snapshot, max_queued: float, max_wait_mins: float) -> bool:
    """Each type's queue within the rule, or the alert's numbers where it names no type."""
    queues = list(snapshot.runner_types.values()) or [
        RunnerQueue(snapshot.numbers.max_queue_size, snapshot.numbers.max_queue_time_mins)
    ]
    return all(
        (q.queued or 0) <= max_queued and (q.longest_wait_mins or 0) <= max_wait_mins
        for q in queues
    )


def status_spaced(posted: Snapshot | None, current: Snapshot) -> bool:
    """Whether a new status reply may follow the last one: a minute on, so never in its minute."""
    return posted is None or current.at - posted.at >= STATUS_SPACING


def chart_moved(incident: Incident) -> bool:
    """Whether a chart drawn now shows what the last one drawn did not: none drawn yet (or its
    end left the trend), or the queue moved by a step and a ratio since."""
    times, totals = incident.trend.times(), incident.trend.totals()
    if incident.shown.charted_at not in times:
        # Two statuses since the first point (the alert's dot): a line of the incident's own.
        return len(times) > 2
    at = times.index(incident.shown.charted_at)
    return moved(totals[at], totals[-1], QUEUED_STEP, QUEUED_RATIO)


def with_live(incident: Incident, live: FleetSnapshot | None, seen: Snapshot) -> Incident:
    """The incident once it shows a reading (`live` None: the alert's numbers stand), `seen`
    counted in the peaks: every number a surface showed is one the summary may be asked about."""
    peaks = peaks_seen(incident.peaks, seen)
    if live is None:
        return incident.model_copy(update={"peaks": peaks})
    update: dict[str, object] = {"live": live}
    if _disproved(incident.cause, live):
        update["cause"] = Cause()
    if live.is_live:
        runners = dict(peaks.runners)
        for name, metrics in live.runner_types.items():
            runners[name] = most_runners(runners.get(name, RunnersSeen()), metrics)
        peaks = peaks.model_copy(update={"runners": runners})
        if len(incident.trend) == 1 and not incident.trend.names():
            # The first reading by type, not the alert's dot, starts the chart.
            update["trend"] = _trended(seen)
    return incident.model_copy(update={**update, "peaks": peaks})


def most_runners(seen: RunnersSeen, more: RunnersSeen | RunnerTypeMetrics | None) -> RunnersSeen:
    """Each of `seen`'s numbers at its most with `more`'s."""
    if more is None:
        return seen
    fields = RunnersSeen.model_fields
    return RunnersSeen(**{f: max_known(getattr(seen, f), getattr(more, f)) for f in fields})


def peak_types_of(
    peak: dict[str, RunnerQueue], current: dict[str, RunnerQueue]
) -> dict[str, RunnerQueue]:
    """The worst queue seen per runner type; the wait the longest of one measure (the oldest job's
    age once one was read, before that the slowest recent start), the first on a tie."""
    merged = dict(peak)
    for name, queue in current.items():
        before = merged.get(name, queue)
        known = [q for q in (before, queue) if q.longest_wait_mins is not None]
        wait = longest_wait(of_measure(known, starts=False) or known) or before
        merged[name] = replace(wait, queued=max_known(before.queued, queue.queued))
    return merged


def _with_facts(incident: Incident, facts: AlertFacts, *, now: datetime) -> Incident:
    """Counted in the peaks as a reading's are."""
    kept = (
        "title priority team rule pipeline_key summary description numbers firing_count "
        "silence_matchers truncated"
    )
    update: dict[str, object] = {name: getattr(facts, name) for name in kept.split()}
    links = {name: getattr(facts, f"{name}_url") for name in Links.model_fields if name != "issue"}
    update |= {
        "links": Links(**links, issue=incident.links.issue),  # the issue is ours, not the alert's
        "runner_types": dict(facts.runner_types),
        "other_values": dict(facts.other_values),
    }
    updated = repeated(incident, now=now).model_copy(update=update)
    return with_live(updated, None, updated.snapshot(now))


def queued_total(numbers: QueueNumbers, types: Mapping[str, RunnerQueue]) -> float | None:
    """The types' queues summed where the numbers name them, else the alert's own figure (its
    rule's, often the largest type's queue)."""
    queued = [queue.queued for queue in types.values() if queue.queued is not None]
    return sum(queued) if queued else numbers.max_queue_size


def sums_types(types: Mapping[str, RunnerQueue]) -> bool:
    """Whether `queued_total` of these types is their sum, not the alert's own figure."""
    return any(queue.queued is not None for queue in types.values())


def peaks_seen(peaks: Peaks, seen: Snapshot) -> Peaks:
    """The most jobs any snapshot said (`moment`: first said), each type's most, and the longest
    wait and the slowest recent start each of its own measure, and when first."""
    queued, waited = queued_total(seen.numbers, seen.runner_types), seen.numbers.max_queue_time_mins
    started, start = seen.numbers.slowest_start_mins, peaks.numbers.slowest_start_mins
    before, wait = peaks.numbers.max_queue_size, peaks.numbers.max_queue_time_mins
    update: dict[str, object] = {
        "numbers": replace(  # thresholds follow the latest alert
            seen.numbers,
            max_queue_time_mins=max_known(wait, waited),
            slowest_start_mins=max_known(start, started),
            max_queue_size=max_known(before, queued),
        ),
        "types": peak_types_of(peaks.types, dict(seen.runner_types)),
    }
    if queued is not None and (before is None or queued > before):
        numbers = replace(seen.numbers, max_queue_size=queued)
        update["moment"] = seen.model_copy(update={"numbers": numbers})
    if waited is not None and (wait is None or waited > wait):
        update["wait_at"] = seen.at
    if started is not None and (start is None or started > start):
        update["start_at"] = seen.at
    return peaks.model_copy(update=update)
