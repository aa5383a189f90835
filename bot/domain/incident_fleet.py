"""An incident's share of the fleet reading: which runner types it shows, whether it drained.

Pure functions of (incident, reading, now). The alert names the runner types that queue; the
reading is matched to them by `runner_key` (the alert's `linux.2xlarge` is ARC's `linux-2xlarge`),
and a type the incident already follows keeps the incident's name for it. An alert that names
none is about the fleet, so the incident shows every type that queues. A followed type the
reading lacks has nothing queued (longer than the source's threshold,
`FleetSnapshot.queued_over_mins`) or is unknown, as the backend that read it says
(`FleetSnapshot.absent_means_empty`); the drain rule takes such an absence as drained only when
that threshold is within its wait limit (`absence_can_drain`). When the reading is missing,
failed or too old, the incident keeps the alert's own numbers and says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.domain.alerts import QueueNumbers, RunnerQueue
from bot.domain.fleet import (
    FleetSnapshot,
    HistoryPoint,
    Reading,
    RunnerTypeMetrics,
    wait_unknown,
    worst_first,
)
from bot.domain.incidents import Incident, Snapshot, with_scale_ups
from bot.domain.judgement import DRAIN_TARGET_MINS, RECENT_READINGS, Judgement, judge
from bot.domain.routes import Routing
from bot.domain.runner_names import runner_key
from bot.domain.units import duration

# An incident keeps its worst types of a reading: its state stays small in a fleet of hundreds.
MAX_VIEW_TYPES = 10
# A reading older than this many intervals no longer describes "now".
STALE_INTERVALS = 3
# A followed type whose absence from the reading means an empty queue (over the source's
# threshold), as it is counted; it is said as such (`FleetSnapshot.absent`).
NOTHING_QUEUED = RunnerTypeMetrics(queued=0)
# "The hours before the incident": baselines average the readings in this window before it.
BASELINE_WINDOW = timedelta(hours=6)
BASELINE_GAP = timedelta(minutes=10)  # the ramp-up just before the alert is not "normal"
ALL_TYPES = ""  # the alert's headline numbers when it names no runner type


@dataclass(frozen=True)
class DrainRule:
    """When a check finds an incident's queue drained: every runner type it shows has at most
    `max_queued` jobs waiting and none waiting longer than `max_wait_mins` (DRAIN_MAX_QUEUED,
    DRAIN_MAX_WAIT_MINUTES)."""

    max_queued: float
    max_wait_mins: float


NO_ROUTING = Routing()


def incident_fleet(
    incident: Incident,
    reading: Reading | None,
    history: Sequence[HistoryPoint] = (),
    *,
    backend: str,
    now: datetime,
    interval: timedelta,
    routing: Routing = NO_ROUTING,
    within_mins: float = DRAIN_TARGET_MINS,
) -> FleetSnapshot:
    """The runner types this incident shows, from the reading or, failing it, from the alert;
    baselines the backend lacks are filled from `history` (`with_baselines`). An alert naming
    no type shows those that queue, but not another team's (`routing`)."""
    if reading is None:
        return alert_fleet(incident, now=now, within_mins=within_mins)
    fleet = reading.fleet
    why = ""
    if reading.error:
        why = reading.error
    elif fleet is None:
        why = f"no reading from {backend} yet"
    elif now - fleet.at > interval * STALE_INTERVALS:
        why = f"{backend}'s latest reading is {duration(now - fleet.at)} old"
    elif not fleet.runner_types and not (fleet.absent_means_empty and _read_before(incident)):
        # No series at all is not "nothing queues": metrics switched off, a wrong query, a
        # target not scraped yet. Taken as drained, it would close every incident. Only from a
        # source that lists every queue, for types this incident has read, is it "all drained".
        why = f"{backend} knows no runner type"
    if why or fleet is None:
        note = f"{why}: these are the alert's numbers"
        return alert_fleet(incident, now=now, note=note, within_mins=within_mins)
    index = _index(fleet)
    ranked, missing, empty, note = _relevant(incident, index, routing)
    kept, cut = dict(ranked[:MAX_VIEW_TYPES]), ranked[MAX_VIEW_TYPES:]
    notes = " · ".join(n for n in (fleet.note, note) if n)
    view = FleetSnapshot(
        at=fleet.at,
        source=fleet.source,
        runner_types=kept,
        note=notes,
        missing=missing,
        queued_over_mins=fleet.queued_over_mins,
        absent=tuple(empty),  # the cut ones too: the drain rule reads them
        hidden=len(cut),
        hidden_queueing=sum(1 for _, m in cut if (m.queued or 0) > 0),
    )
    # The readings' history knows a type by the reading's name, not the incident's.
    read_as = {name: index.by_key.get(runner_key(name), name) for name in kept}
    view = with_scale_ups(view, incident.recent_actions)
    return with_baselines(view, history, started_at=incident.started_at, read_as=read_as)


def alert_fleet(
    incident: Incident, *, now: datetime, note: str = "", within_mins: float = DRAIN_TARGET_MINS
) -> FleetSnapshot:
    """Queued jobs and the longest wait per runner type: all an alert carries."""
    types = {
        name: RunnerTypeMetrics.from_alert(queue) for name, queue in incident.runner_types.items()
    }
    numbers = incident.numbers
    if not types and (numbers.max_queue_size is not None or numbers.max_queue_time_mins):
        types[ALL_TYPES] = RunnerTypeMetrics(
            queued=numbers.max_queue_size, longest_wait_mins=numbers.max_queue_time_mins
        )
    judged = {name: _judged_alert(incident, name, m, within_mins) for name, m in types.items()}
    view = FleetSnapshot(at=now, source="alert", runner_types=judged, note=note)
    return with_scale_ups(view, incident.recent_actions)


def _judged_alert(
    incident: Incident, name: str, metrics: RunnerTypeMetrics, within_mins: float
) -> RunnerTypeMetrics:
    """The alert's numbers judged as a reading's are, as of when the alert said them (the same
    numbers are the same judgement whenever they are read), the direction from the incident's
    trend before then (the alert's numbers at each status)."""
    said = incident.alerted_at or incident.opened_at
    trend = incident.trend
    queued = trend.totals() if name == ALL_TYPES else trend.queued_of(name)
    observed = [
        (at, q)
        for at, q in zip(trend.times(), queued, strict=True)
        if q is not None and at < said.timestamp()
    ][-(RECENT_READINGS - 1) :]
    why = wait_unknown("alert")
    verdict = judge(metrics, observed, at=said, within_mins=within_mins, wait_unknown=why)
    return metrics.model_copy(update={"judged": verdict})


def judgement_of(
    incident: Incident, runner_type: str, *, now: datetime, within_mins: float = DRAIN_TARGET_MINS
) -> Judgement | None:
    """The judgement the incident shows of `runner_type`: its live reading's, as the root and
    its latest status render it, else the alert's numbers judged; None when it shows no such
    type. An alert about the whole fleet (no runner type) speaks for any type."""
    live = incident.live
    view = live if live is not None and live.is_live else None
    if view is None:
        view = alert_fleet(incident, now=now, within_mins=within_mins)
    key = runner_key(runner_type)
    found = next((m for n, m in view.runner_types.items() if runner_key(n) == key), None)
    if found is None and set(view.runner_types) == {ALL_TYPES}:
        found = view.runner_types[ALL_TYPES]
    return found.judged if found is not None else None


@dataclass(frozen=True)
class _FleetIndex:
    fleet: FleetSnapshot
    by_key: dict[str, str]  # runner_key -> the reading's name
    ranked: list[tuple[str, str, RunnerTypeMetrics]]  # (runner_key, name, metrics), worst first


_latest: _FleetIndex | None = None


def _index(fleet: FleetSnapshot) -> _FleetIndex:
    """The reading's names and ranking: every incident of a status tick shares one reading, so
    it is indexed once per reading instead of once per incident."""
    global _latest
    latest = _latest
    if latest is None or latest.fleet is not fleet:
        ranked = [(runner_key(n), n, m) for n, m in worst_first(fleet.runner_types)]
        by_key = {key: name for key, name, _ in ranked}
        latest = _latest = _FleetIndex(fleet, by_key, ranked)
    return latest


def _relevant(
    incident: Incident, index: _FleetIndex, routing: Routing
) -> tuple[list[tuple[str, RunnerTypeMetrics]], tuple[str, ...], list[str], str]:
    """The types to show (worst first), the followed types the reading cannot speak for, those
    shown from their absence, and a note for the reader.

    Shown: the alert's types found in the reading, else every type that queues (but those a
    route on runner types sends to another channel: that team's alerts speak for them); and
    every type the incident showed before, so one that drained reads "0 queued" instead of
    vanishing. A followed type is shown under the incident's name for it (the alert's), so its
    peaks and trend stay one type. A followed type the reading lacks is shown with nothing
    queued when its absence means that (`_absent_as_empty`; said "none queued over N min");
    otherwise it is missing, and while it is, the drain cannot be decided.
    """
    fleet, by_key = index.fleet, index.by_key
    # Followed: every type the incident has shown or its alert named (peaks keep both), by key;
    # the alert's name wins over a reading's.
    followed = {runner_key(n): n for n in (*incident.peak_types, *incident.runner_types) if n}
    absent = sorted(name for key, name in followed.items() if key not in by_key)
    empty = _absent_as_empty(incident, fleet, absent)
    named = {runner_key(name) for name in incident.runner_types if name}
    matched = named & {*by_key, *(runner_key(n) for n in empty)}
    note = ""
    if matched:
        chosen = {key for key in matched if key in by_key}
    else:
        chosen = {
            key
            for key, n, m in index.ranked
            if (m.queued or 0) > 0 and routing.owns(incident.channel, n)
        }
        if named:
            note = "none of the alert's runner types is in the reading: showing all that queue"
    chosen |= {key for key in followed if key in by_key}
    ranked = [(followed.get(key, n), m) for key, n, m in index.ranked if key in chosen]
    # Nothing queued and no wait known: the least bad, so last, as `worst_first` puts them.
    ranked += [(name, NOTHING_QUEUED) for name in empty]
    missing = tuple(n for n in absent if n not in empty)
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        note = "; ".join(n for n in (note, f"no numbers for {shown} in this reading") if n)
    return ranked, missing, empty, note


def _absent_as_empty(incident: Incident, fleet: FleetSnapshot, absent: list[str]) -> list[str]:
    """The followed types the reading lacks that have nothing queued: none unless the backend
    says absence means that (`FleetSnapshot.absent_means_empty`), and then only types this
    incident has read before. A type its alert names but the source has never listed is more
    likely spelt differently there (`linux.4xlarge` against `lf.linux.4xlarge`) than drained:
    read as drained it would close the incident at once, whatever its queue.

    With the HUD's queries, "nothing queued" means nothing queued longer than their threshold
    (`FleetSnapshot.queued_over_mins`: `queuedThresholdMinutes`, 5 by default; 5 minutes for
    `queued_jobs_by_label`): its numbers count no younger job, present or absent. Whether that
    is drained is the drain rule's to say (`absence_can_drain`); here it is only shown so.
    """
    if not fleet.absent_means_empty:
        return []
    read = _read_before(incident)
    return [name for name in absent if runner_key(name) in read]


def _read_before(incident: Incident) -> set[str]:
    """The runner types (by `runner_key`) a live reading has shown this incident: those of its
    last live view, and its peaks the alert never named (only a reading adds those)."""
    named = {runner_key(name) for name in incident.runner_types}
    read = {runner_key(n) for n in incident.peak_types} - named
    if incident.live is not None and incident.live.is_live:
        read |= {runner_key(n) for n in incident.live.runner_types}
    return read


def can_decide_drain(incident: Incident, view: FleetSnapshot) -> bool:
    """Only a live view of the incident's own runner types can say it drained: a reading that
    does not know the alert's types (a misconfigured label) must never close it."""
    if not view.is_live or view.missing:
        return False
    if view.hidden_queueing:
        return False
    named = {runner_key(name) for name in incident.runner_types if name}
    return not named or any(runner_key(n) in named for n in view.runner_types)


def absence_can_drain(queued_over_mins: float | None, max_wait_mins: float) -> bool:
    """Whether "the source lists no job of this type" can read as drained: only when the source
    lists every job waiting longer than the drain rule's wait limit. A source that counts only
    jobs queued over 30 minutes says nothing of one that has waited 29 minutes, which a wait
    limit of 5 calls queueing."""
    return (queued_over_mins or 0) <= max_wait_mins


def is_drained(view: FleetSnapshot, rule: DrainRule) -> bool:
    """Every runner type shown is at or below both thresholds (an unknown wait does not count)."""
    return all(
        (m.queued or 0) <= rule.max_queued
        # A wait "over" a number is not known to be under any limit.
        and (
            m.longest_wait_mins is None
            or (m.longest_wait_mins <= rule.max_wait_mins and not m.wait_over)
        )
        for m in view.runner_types.values()
    )


def type_drained(view: FleetSnapshot, runner_type: str, rule: DrainRule) -> bool | None:
    """Whether one runner type's queue is drained in a live reading: None when the reading
    cannot tell (the alert's numbers, or the type missing from a source where absence is not
    emptiness)."""
    if not view.is_live:
        return None
    key = runner_key(runner_type)  # as the incident's own view matches a reading's types
    found = next(((n, m) for n, m in view.runner_types.items() if runner_key(n) == key), None)
    if found is None:
        empty = view.absent_means_empty and absence_can_drain(
            view.queued_over_mins, rule.max_wait_mins
        )
        return True if empty else None
    return is_drained(view.model_copy(update={"runner_types": dict([found])}), rule)


def drain_checks(incident: Incident, view: FleetSnapshot, rule: DrainRule) -> int:
    """Consecutive drained checks including this one: 0 when it queues or the numbers are the
    alert's; unchanged while a live reading cannot tell (a followed type missing from it, or
    shown from its absence by a source blind to waits within the limit)."""
    blind = bool(view.absent) and not absence_can_drain(view.queued_over_mins, rule.max_wait_mins)
    if blind or not can_decide_drain(incident, view):
        return incident.drain_checks if view.is_live else 0
    return incident.drain_checks + 1 if is_drained(view, rule) else 0


def as_snapshot(incident: Incident, view: FleetSnapshot, now: datetime) -> Snapshot:
    """The compact form kept in the trend: queued and longest wait per type, and the totals."""
    if not view.is_live:
        return incident.snapshot(now)
    types = {
        name: RunnerQueue(m.queued, m.longest_wait_mins, m.wait_over, m.wait_of_starts)
        for name, m in view.runner_types.items()
    }
    waits = [q.longest_wait_mins for q in types.values() if q.longest_wait_mins is not None]
    queued = [q.queued for q in types.values() if q.queued is not None]
    numbers = QueueNumbers(
        max_queue_time_mins=max(waits) if waits else None,
        max_queue_size=sum(queued) if queued else None,
        queue_time_threshold=incident.numbers.queue_time_threshold,
        queue_size_threshold=incident.numbers.queue_size_threshold,
    )
    return Snapshot(at=view.at, numbers=numbers, runner_types=types)


def with_baselines(
    view: FleetSnapshot,
    history: Sequence[HistoryPoint],
    *,
    started_at: datetime,
    read_as: Mapping[str, str] | None = None,
) -> FleetSnapshot:
    """Fill the baselines the backend could not give from the readings in the hours before the
    incident started (the backend's own "same hour yesterday" wins when it has one). `read_as`:
    a shown type's name in the readings, where the incident names it otherwise."""
    before = [
        p for p in history if started_at - BASELINE_WINDOW <= p.at <= started_at - BASELINE_GAP
    ]
    if not before:
        return view
    types = {}
    for name, m in view.runner_types.items():
        update: dict[str, float] = {}
        read = (read_as or {}).get(name, name)
        if m.arrival_baseline_per_min is None:
            values = [p.arrival_per_min[read] for p in before if read in p.arrival_per_min]
            if values:
                update["arrival_baseline_per_min"] = sum(values) / len(values)
        if m.duration_baseline_mins is None:
            values = [p.job_duration_mins[read] for p in before if read in p.job_duration_mins]
            if values:
                update["duration_baseline_mins"] = sum(values) / len(values)
        types[name] = m.model_copy(update=update) if update else m
    return view.model_copy(update={"runner_types": types})
