"""An incident's share of the fleet reading: which runner types it shows, whether it drained.
Matched to the alert's types by `runner_key`; without a fresh reading the alert's numbers stand in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.alerting.routes import Routing
from bot.domain.incident.incidents import (
    CAPPED,
    DRAINED,
    UNDER,
    DrainRule,
    Incident,
    Snapshot,
    advice_of,
    counting_scale_ups,
    thresholds,
)
from bot.domain.reading.fleet import (
    FleetSnapshot,
    HistoryPoint,
    Reading,
    RunnerTypeMetrics,
    longest_wait,
    of_measure,
    of_type,
    worst_first,
)
from bot.domain.reading.judgement import DRAIN_TARGET_MINS, RECENT_READINGS, Judgement
from bot.domain.reading.judging import judge
from bot.domain.reading.runner_names import runner_key
from bot.domain.units import duration

MAX_VIEW_TYPES = 10  # an incident keeps its worst types: its state stays small
STALE_INTERVALS = 3  # a reading older than this many intervals no longer describes "now"
NOTHING_QUEUED = RunnerTypeMetrics(queued=0)  # a followed type whose absence means empty
# Baselines average the readings in the hours before the incident, but not its ramp-up.
BASELINE_WINDOW = timedelta(hours=6)
BASELINE_GAP = timedelta(minutes=10)
ALL_TYPES = ""  # the alert's headline numbers when it names no runner type
# Every target is scraped within this of an alert (Prometheus scrapes every minute or less).
SCRAPED_WITHIN = timedelta(minutes=5)


def incident_fleet(
    incident: Incident,
    reading: Reading | None,
    history: Sequence[HistoryPoint] = (),
    *,
    backend: str,
    now: datetime,
    interval: timedelta,
    routing: Routing | None = None,
    within_mins: float = DRAIN_TARGET_MINS,
) -> FleetSnapshot:
    """The runner types this incident shows, from the reading or, failing it, the alert's; an
    alert naming no type shows those that queue, but not another team's (`routing`)."""
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
        # No series at all is a wrong query or a target not scraped, not "nothing queues" (it
        # would close every incident), unless the source lists every queue.
        why = f"{backend} knows no runner type"
    if why or fleet is None:
        note = f"{why}: these are the alert's numbers"
        return alert_fleet(incident, now=now, note=note, within_mins=within_mins)
    ranked_all = _ranked(fleet)
    by_key = {key: name for key, name, _ in ranked_all}
    ranked, missing, empty, note = _relevant(incident, fleet, ranked_all, by_key, routing)
    kept, cut = dict(ranked[:MAX_VIEW_TYPES]), ranked[MAX_VIEW_TYPES:]
    view = FleetSnapshot(
        at=fleet.at,
        source=fleet.source,
        runner_types=kept,
        note=" · ".join(n for n in (fleet.note, note) if n),
        missing=missing,
        queued_over_mins=fleet.queued_over_mins,
        absent=tuple(empty),  # the cut ones too: the drain rule reads them
        hidden=len(cut),
        hidden_queueing=sum(1 for _, m in cut if (m.queued or 0) > 0),
        paced_s=fleet.paced_s,
    )
    # The readings' history knows a type by the reading's name, not the incident's.
    read_as = {name: by_key.get(runner_key(name), name) for name in kept}
    view = with_alert_waits(counting_scale_ups(view, incident.actions), incident)
    return with_baselines(view, history, started_at=incident.started_at, read_as=read_as)


def with_alert_waits(view: FleetSnapshot, incident: Incident) -> FleetSnapshot:
    """Each queueing type whose reading knows no wait judged with the alert's wait for it (or for
    the one type shown), said as the alert's; the reading's numbers stay, no drain waits on it."""
    said_at = incident.notified.at or incident.opened_at
    types = dict(view.runner_types)
    for name, metrics in view.runner_types.items():
        j = metrics.judged
        if j is None or j.wait_mins is not None or not j.queued:
            continue
        if incident.runner_types:
            queue = of_type(incident.runner_types, name) or RunnerQueue()
        elif len(view.runner_types) == 1:
            queue = RunnerQueue(longest_wait_mins=incident.numbers.max_queue_time_mins)
        else:
            continue
        if queue.longest_wait_mins is None:
            continue
        wait = {"wait_mins": queue.longest_wait_mins, "wait_over": bool(queue.wait_over)}
        judged = j.model_copy(update={**wait, "wait_alert_at": said_at, "wait_unknown": ""})
        types[name] = metrics.model_copy(update={"judged": judged})
    return view.model_copy(update={"runner_types": types})


def alert_fleet(
    incident: Incident, *, now: datetime, note: str = "", within_mins: float = DRAIN_TARGET_MINS
) -> FleetSnapshot:
    """Queued jobs and the longest wait per runner type (all an alert carries), judged as of when
    the alert said them, the direction from the incident's trend before then."""
    numbers, trend = incident.numbers, incident.trend
    queues = dict(incident.runner_types)
    if not queues and (numbers.max_queue_size is not None or numbers.max_queue_time_mins):
        queues[ALL_TYPES] = RunnerQueue(numbers.max_queue_size, numbers.max_queue_time_mins)
    said = incident.notified.at or incident.opened_at
    types: dict[str, RunnerTypeMetrics] = {}
    for name, queue in queues.items():
        queued = trend.totals() if name == ALL_TYPES else trend.queued_of(name)
        known = [(at, q) for at, q in zip(trend.times(), queued, strict=True) if q is not None]
        observed = [(at, q) for at, q in known if at < said.timestamp()][-(RECENT_READINGS - 1) :]
        metrics = RunnerTypeMetrics(queued=queue.queued, longest_wait_mins=queue.longest_wait_mins)
        verdict = judge(metrics, observed, at=said, within_mins=within_mins, source="alert")
        types[name] = metrics.model_copy(update={"judged": verdict})
    view = FleetSnapshot(at=now, source="alert", runner_types=types, note=note)
    return counting_scale_ups(view, incident.actions)


def judgement_of(
    incident: Incident, runner_type: str, *, now: datetime, within_mins: float = DRAIN_TARGET_MINS
) -> Judgement | None:
    """The judgement the incident shows of `runner_type`: its live reading's, else the alert's;
    an alert about the whole fleet speaks for any type."""
    view = incident.live
    if view is None or not view.is_live:
        view = alert_fleet(incident, now=now, within_mins=within_mins)
    found = of_type(view.runner_types, runner_type)
    if found is None and set(view.runner_types) == {ALL_TYPES}:
        found = view.runner_types[ALL_TYPES]
    return found.judged if found is not None else None


Ranked = list[tuple[str, str, RunnerTypeMetrics]]  # (runner_key, name, metrics), worst first
_latest: tuple[FleetSnapshot, Ranked] | None = None


def _ranked(fleet: FleetSnapshot) -> Ranked:
    """Every incident of a status tick shares one reading: it is ranked once, not per incident."""
    global _latest
    if _latest is None or _latest[0] is not fleet:
        _latest = (fleet, [(runner_key(n), n, m) for n, m in worst_first(fleet.runner_types)])
    return _latest[1]


def _relevant(
    incident: Incident,
    fleet: FleetSnapshot,
    ranked_all: Ranked,
    by_key: dict[str, str],
    routing: Routing | None,
) -> tuple[list[tuple[str, RunnerTypeMetrics]], tuple[str, ...], list[str], str]:
    """The types to show (worst first), those followed the reading cannot speak for, those shown
    from their absence, and a note. A type shown before stays: drained, it reads "0 queued"."""
    # Followed: every type the incident has shown or its alert named; the alert's name wins.
    followed = {runner_key(n): n for n in (*incident.peaks.types, *incident.runner_types) if n}
    absent = sorted(name for key, name in followed.items() if key not in by_key)
    # Shown from their absence (where it means nothing queued) only if a reading showed them: a
    # type only its alert names is more likely spelt otherwise in the source (`lf.linux.4xlarge`)
    # than drained, and would close the incident at once.
    read = _read_before(incident) if fleet.absent_means_empty else set()
    empty = [name for name in absent if runner_key(name) in read]
    named = {runner_key(name) for name in incident.runner_types if name}
    matched = named & {*by_key, *(runner_key(n) for n in empty)}
    note = ""
    chosen = followed.keys() & by_key.keys()
    if not matched:
        chosen |= {
            key
            for key, n, m in ranked_all
            if (m.queued or 0) > 0 and (routing is None or routing.owns(incident.channel, n))
        }
        if named:
            note = "none of the alert's runner types is in the reading: showing all that queue"
    ranked = [(followed.get(key, n), m) for key, n, m in ranked_all if key in chosen]
    # Nothing queued and no wait known: last, as `worst_first` puts them.
    ranked += [(name, NOTHING_QUEUED) for name in empty]
    missing = tuple(n for n in absent if n not in empty)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        lacking = f"no numbers for {', '.join(missing[:3])}{more} in this reading"
        note = f"{note}; {lacking}" if note else lacking
    return ranked, missing, empty, note


def _read_before(incident: Incident) -> set[str]:
    """The types (by `runner_key`) a live reading has shown this incident: its last live view's,
    and its peaks the alert never named (only a reading adds those)."""
    named = {runner_key(name) for name in incident.runner_types}
    read = {runner_key(n) for n in incident.peaks.types} - named
    if incident.live is not None and incident.live.is_live:
        read |= {runner_key(n) for n in incident.live.runner_types}
    return read


def absence_can_drain(queued_over_mins: float | None, max_wait_mins: float) -> bool:
    """Whether "the source lists no job of this type" reads as drained: only when the source
    lists every job waiting longer than the drain rule's wait limit."""
    return (queued_over_mins or 0) <= max_wait_mins


def is_drained(view: FleetSnapshot, rule: DrainRule) -> bool:
    return all(_within(m, rule) for m in view.runner_types.values())


def _within(m: RunnerTypeMetrics, rule: DrainRule) -> bool:
    """An unknown wait does not count; a wait "over" a number is not known to be under any; an
    unknown queue is not known to be drained."""
    wait = m.longest_wait_mins
    waits = not m.wait_over and (wait is None or wait <= rule.max_wait_mins)
    return m.queued is not None and m.queued <= rule.max_queued and waits


def type_drained(view: FleetSnapshot, runner_type: str, rule: DrainRule) -> bool | None:
    """Whether one type's queue is drained in a live reading; None when it cannot tell."""
    if not view.is_live:
        return None
    found = of_type(view.runner_types, runner_type)
    if found is not None:
        return None if found.queued is None else _within(found, rule)
    if view.absent_means_empty and absence_can_drain(view.queued_over_mins, rule.max_wait_mins):
        return True
    return None


def drain_checks(incident: Incident, view: FleetSnapshot, rule: DrainRule) -> int:
    """Consecutive drained checks including this one (0: it queues, or the alert's numbers);
    unchanged while a live view of the incident's own types cannot tell, or for the same reading."""
    if not view.is_live:
        return 0
    named = {runner_key(name) for name in incident.runner_types if name}
    blind = bool(view.absent) and not absence_can_drain(view.queued_over_mins, rule.max_wait_mins)
    # A view of no type says nothing queues only where the source lists every queue, or once
    # every target is scraped (else the incident waits for a resolve that may never come).
    scraped = view.absent_means_empty or view.at - incident.opened_at >= SCRAPED_WITHIN
    if (
        blind
        or not _readable(view)
        or (named and not any(runner_key(n) in named for n in view.runner_types))
        or (not view.runner_types and not scraped)
    ):
        return incident.drain.checks
    if not is_drained(view, rule):
        return 0
    counted = incident.drain.read_at
    return incident.drain.checks + (counted is None or view.at > counted)


def still_queued(incident: Incident, rule: DrainRule) -> float | None:
    """The jobs its latest live view still sees queued over the alert's thresholds (without
    any, not drained by `rule`); None when it cannot tell (always, from the alert alone)."""
    view = incident.live
    if view is None or not _readable(view):
        return None
    types = view.runner_types.values()
    queued = sum(m.queued or 0 for m in types)
    if not queued:
        return None
    size, time = thresholds(incident)
    if size is None and time is None:
        return None if is_drained(view, rule) else queued
    largest = max((m.queued or 0 for m in types), default=0)
    worst = longest_wait(types)
    wait = worst.longest_wait_mins if worst is not None else None
    over_size = size is not None and largest > size
    over_time = time is not None and wait is not None and wait > time
    return queued if over_size or over_time else None


def follow_ended(
    incident: Incident, checks: int, *, needed: int, rule: DrainRule, cap: timedelta, now: datetime
) -> str:
    """Why a queue followed after its alert cleared stops being followed (`DRAINED`, `UNDER` its
    thresholds, `CAPPED`); "" while it goes on, or when it is not followed."""
    follow = incident.drain.follow
    if follow is None:
        return ""
    if checks >= needed:
        return DRAINED
    view = incident.live
    # Drained by the rule is said once the drain checks agree, as for any incident.
    under = view is not None and _readable(view) and not is_drained(view, rule)
    if under and thresholds(incident) != (None, None) and still_queued(incident, rule) is None:
        return UNDER
    return CAPPED if now - follow.cleared_at >= cap else ""


def _readable(view: FleetSnapshot | None) -> bool:
    """A live view that knows every queue it shows."""
    if view is None or not view.is_live or view.missing or view.hidden_queueing:
        return False
    return all(m.queued is not None for m in view.runner_types.values())


def as_snapshot(incident: Incident, view: FleetSnapshot, now: datetime) -> Snapshot:
    """The compact form kept in the trend."""
    if not view.is_live:
        return incident.snapshot(now)
    types = {
        name: RunnerQueue(m.queued, m.longest_wait_mins, m.wait_over, m.wait_of_starts)
        for name, m in view.runner_types.items()
    }
    waited, started = (longest_wait(of_measure(types.values(), starts=s)) for s in (False, True))
    queued = [q.queued for q in types.values() if q.queued is not None]
    numbers = QueueNumbers(
        max_queue_time_mins=waited.longest_wait_mins if waited else None,
        slowest_start_mins=started.longest_wait_mins if started else None,
        max_queue_size=sum(queued) if queued else None,
        queue_time_threshold=incident.numbers.queue_time_threshold,
        queue_size_threshold=incident.numbers.queue_size_threshold,
    )
    advice = {n: advice_of(m.judged) for n, m in view.runner_types.items() if m.judged}
    return Snapshot(at=view.at, numbers=numbers, runner_types=types, advice=advice)


def with_baselines(
    view: FleetSnapshot,
    history: Sequence[HistoryPoint],
    *,
    started_at: datetime,
    read_as: Mapping[str, str] | None = None,
) -> FleetSnapshot:
    """The baselines the backend could not give, from the readings in the hours before the
    incident. `read_as`: a shown type's name in the readings, where the incident's differs."""
    since, until = started_at - BASELINE_WINDOW, started_at - BASELINE_GAP
    before = [p for p in history if since <= p.at <= until]
    if not before:
        return view
    types = {}
    for name, m in view.runner_types.items():
        read = (read_as or {}).get(name, name)
        update: dict[str, float] = {}
        for field, values in (
            ("arrival_baseline_per_min", [p.arrival_per_min.get(read) for p in before]),
            ("duration_baseline_mins", [p.job_duration_mins.get(read) for p in before]),
        ):
            known = [v for v in values if v is not None]
            if getattr(m, field) is None and known:
                update[field] = sum(known) / len(known)
        types[name] = m.model_copy(update=update) if update else m
    return view.model_copy(update={"runner_types": types})
