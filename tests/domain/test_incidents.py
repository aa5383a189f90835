"""The incident lifecycle as pure functions: (group, state, notification, entry) -> (state, change).

Every race the intake can meet (duplicate deliveries, a resolved notification overtaken by an older
firing one, a lagging HA peer repeating a firing after its resolve, a responder resolving before
Grafana does) is a row of a table here, not a flaky test. `apply` below composes the two steps the
intake takes: the group decides whether a delivery is stale, the incident folds in the rest.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue, Source, parse_notification
from bot.domain.alerting.delivery import Delivery, delivery_of
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import (
    MAX_ACTIONS,
    TREND_POINTS,
    Change,
    Event,
    GroupState,
    Incident,
    Resolution,
    Snapshot,
    Status,
    acknowledge,
    apply_notification,
    chart_moved,
    entry_order,
    is_reopenable,
    is_stale,
    noted,
    open_incident,
    record_status,
    resolve_manually,
    with_action,
    with_live,
    without_put_backs,
)
from bot.domain.incident.trend import Trend
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.runner_pods import RunnerPods
from bot.domain.scale.scale_ups import ScaleUp
from bot.render.chart import chart_block, incident_chart
from bot.storage.incident_store import state_json
from tests.support.incidents import make_incident
from tests.support.payloads import fixture_json

T0 = datetime(2025, 12, 1, 2, 30, tzinfo=UTC)


def entry(seconds: int, seq: int = 0) -> str:
    """A stream entry ID as Redis makes them: accepted `seconds` after T0."""
    return f"{int(T0.timestamp() * 1000) + seconds * 1000}-{seq}"


OPENED_ENTRY = entry(1000, 0)
RESOLVED_ENTRY = entry(2000, 0)
GRAFANA_FIRING = "grafana/queue-alert-firing.json"
GRAFANA_RESOLVED = "grafana/queue-alert-resolved.json"


def payload(name: str = GRAFANA_FIRING) -> dict[str, Any]:
    return copy.deepcopy(fixture_json(name))


def with_queue(data: dict[str, Any], *, wait: float, queued: float) -> dict[str, Any]:
    """The queue alert with other numbers, in both places Grafana writes them."""
    for alert in data["alerts"]:
        alert["values"].update(max_queue_time_mins=wait, max_queue_size=queued)
        alert["valueString"] = ", ".join(
            f"[ var='{name}' labels={{}} value={value:g} ]"
            for name, value in alert["values"].items()
        )
    return data


def with_second_alert(data: dict[str, Any]) -> dict[str, Any]:
    second = copy.deepcopy(data["alerts"][0])
    second["fingerprint"] = "0a1b2c3d4e5f6071"
    second["labels"]["type"] = "alerting-infra-gpu"
    data["alerts"].append(second)
    return data


def with_runner_label(data: dict[str, Any], runner: str) -> dict[str, Any]:
    for alert in data["alerts"]:
        alert["labels"]["runner_type"] = runner
    return data


def refired(data: dict[str, Any], starts_at: str = "2025-12-01T05:00:00Z") -> dict[str, Any]:
    """The alert firing again: senders give a new firing a new startsAt."""
    for alert in data["alerts"]:
        alert["startsAt"] = starts_at
    return data


def parsed(data: dict[str, Any], source: Source = "grafana") -> Delivery:
    return delivery_of(parse_notification(source, data))


def opened(source_file: str = GRAFANA_FIRING, source: Source = "grafana") -> Incident:
    return open_incident(
        parsed(payload(source_file), source), incident_id="7", uid="u7", channel="C1", now=T0
    )


@dataclass(frozen=True)
class State:
    """An alert group with its incident, as the intake reads them."""

    group: GroupState
    incident: Incident


def state_of(incident: Incident, group: GroupState | None = None) -> State:
    return State(group or GroupState(incident_id=incident.id, last_entry=OPENED_ENTRY), incident)


def apply(
    state: State | Incident,
    data: dict[str, Any],
    entry_id: str,
    *,
    at: timedelta = timedelta(hours=1),
    source: Source = "grafana",
    still_queued: float | None = None,
) -> tuple[State, Change]:
    """What the intake does with one delivery (the reopen window aside)."""
    current = state if isinstance(state, State) else state_of(state)
    delivery = parsed(data, source)
    if is_stale(current.group, delivery, entry_id):
        return current, Change.STALE
    incident, change = apply_notification(
        current.incident, delivery, entry_id=entry_id, now=T0 + at, still_queued=still_queued
    )
    return State(noted(current.group, delivery, entry_id), incident), change


# -- open_incident -------------------------------------------------------------------------------


def test_open_incident_from_the_queue_alert_shows_its_title_priority_and_numbers() -> None:
    incident = opened()

    assert incident.title == "Jobs queueing in autoscaled machines"
    assert incident.priority == "P2"
    assert incident.team == "pytorch-dev-infra"
    assert incident.status is Status.FIRING and incident.is_open
    assert incident.numbers == QueueNumbers(
        max_queue_time_mins=114, max_queue_size=14, queue_time_over=True, queue_size_over=False
    )
    assert incident.peaks.numbers == incident.numbers
    assert incident.firing_count == 1
    assert incident.notified.count == 1
    assert (incident.id, incident.uid, incident.channel) == ("7", "u7", "C1")
    assert incident.links.runbook == "https://hud.pytorch.org/metrics"
    assert [m.name for m in incident.silence_matchers] == [
        "__alert_rule_uid__",
        "type",
        "alertname",
        "grafana_folder",
    ], "the rule, what its silence link carries, and the group labels"


def test_open_incident_starts_when_the_alert_started_not_when_the_bot_heard_of_it() -> None:
    incident = opened()

    assert incident.started_at == datetime(2025, 12, 1, 2, 23, tzinfo=UTC)
    assert incident.opened_at == T0
    assert incident.updated_at == T0


def test_open_incident_takes_a_first_snapshot_so_the_first_status_post_has_a_baseline() -> None:
    incident = opened()

    assert incident.shown.status == Snapshot(at=T0, numbers=incident.numbers, runner_types={})


def test_open_incident_from_alertmanager_keeps_the_runner_type_queue() -> None:
    incident = opened("alertmanager/runner-queue-am-00-firing.json", "alertmanager")

    assert set(incident.runner_types) == {"linux.g5.4xlarge.nvidia.gpu"}
    assert incident.runner_types["linux.g5.4xlarge.nvidia.gpu"].queued == 14
    assert incident.shown.status is not None
    assert incident.shown.status.runner_types == incident.runner_types


# -- apply_notification: the table ---------------------------------------------------------------


def _open() -> State:
    return state_of(opened())


def _resolved_by_alert() -> State:
    state, change = apply(opened(), payload(GRAFANA_RESOLVED), RESOLVED_ENTRY)
    assert change is Change.RESOLVED
    return state


def _resolved_by_hand() -> State:
    return state_of(resolve_manually(opened(), by="U0ALICE", name="alice", now=T0 + MIN * 30))


def _acknowledged() -> State:
    return state_of(acknowledge(opened(), by="U0ALICE", name="alice", now=T0 + MIN * 5))


def _opened_at_entry_9_5() -> State:
    return state_of(opened(), GroupState(incident_id="7", last_entry=entry(9, 5)))


def _followed() -> State:
    """The alert cleared while the live readings still saw 12 jobs over its thresholds."""
    state, change = apply(opened(), payload(GRAFANA_RESOLVED), RESOLVED_ENTRY, still_queued=12)
    assert change is Change.FOLLOWED
    return state


MIN = timedelta(minutes=1)
STATES: dict[str, Callable[[], State]] = {
    "open": _open,
    "resolved by alert": _resolved_by_alert,
    "resolved by hand": _resolved_by_hand,
    "acknowledged": _acknowledged,
    "open at 9-5": _opened_at_entry_9_5,
    "followed after its alert cleared": _followed,
}

NOTIFICATIONS: dict[str, Callable[[], dict[str, Any]]] = {
    "firing, same numbers": payload,
    "firing, worse": lambda: with_queue(payload(), wait=200, queued=30),
    "firing, better": lambda: with_queue(payload(), wait=20, queued=2),
    "firing, two alerts": lambda: with_second_alert(payload()),
    "firing, a runner type": lambda: with_runner_label(payload(), "linux.2xlarge"),
    "firing again (new start)": lambda: refired(payload()),
    "resolved": lambda: payload(GRAFANA_RESOLVED),
}


@dataclass(frozen=True)
class Row:
    state: str
    notification: str
    entry_id: str
    change: Change
    status: Status
    still_queued: float | None = None  # what the live readings see over the thresholds


TABLE = [
    Row("open", "firing, same numbers", entry(3000, 0), Change.UPDATED, Status.FIRING),
    Row("open", "firing, worse", entry(3000, 0), Change.UPDATED, Status.FIRING),
    Row("open", "firing, better", entry(3000, 0), Change.UPDATED, Status.FIRING),
    Row("open", "firing, two alerts", entry(3000, 0), Change.ALERTS_CHANGED, Status.FIRING),
    Row("open", "firing, a runner type", entry(3000, 0), Change.ALERTS_CHANGED, Status.FIRING),
    Row("open", "resolved", entry(3000, 0), Change.RESOLVED, Status.RESOLVED),
    Row("open", "firing, same numbers", OPENED_ENTRY, Change.STALE, Status.FIRING),
    Row("open", "resolved", OPENED_ENTRY, Change.STALE, Status.FIRING),
    Row("open", "resolved", entry(999, 9), Change.STALE, Status.FIRING),
    Row("acknowledged", "firing, worse", entry(3000, 0), Change.UPDATED, Status.FIRING),
    Row("acknowledged", "resolved", entry(3000, 0), Change.RESOLVED, Status.RESOLVED),
    Row("resolved by alert", "resolved", entry(3000, 0), Change.STALE, Status.RESOLVED),
    Row("resolved by alert", "resolved", RESOLVED_ENTRY, Change.STALE, Status.RESOLVED),
    Row("resolved by alert", "firing, same numbers", entry(1500, 0), Change.STALE, Status.RESOLVED),
    Row("resolved by alert", "firing, worse", RESOLVED_ENTRY, Change.STALE, Status.RESOLVED),
    # A lagging HA peer or a retry repeats the firing it resolved: same instance, same start.
    Row("resolved by alert", "firing, same numbers", entry(3000, 0), Change.STALE, Status.RESOLVED),
    Row("resolved by alert", "firing, worse", entry(3000, 0), Change.STALE, Status.RESOLVED),
    Row(
        "resolved by alert",
        "firing again (new start)",
        entry(3000, 0),
        Change.REOPENED,
        Status.FIRING,
    ),
    Row("resolved by hand", "resolved", entry(3000, 0), Change.STALE, Status.RESOLVED),
    Row("resolved by hand", "firing, worse", entry(3000, 0), Change.REOPENED, Status.FIRING),
    # Accepted before the click on Resolve, processed after it: not a new firing.
    Row("resolved by hand", "firing, worse", entry(1500, 0), Change.STALE, Status.RESOLVED),
    Row("open at 9-5", "firing, worse", entry(10, 0), Change.UPDATED, Status.FIRING),
    Row("open at 9-5", "resolved", entry(9, 4), Change.STALE, Status.FIRING),
    # The alert clears while jobs still queue over its thresholds: followed, not resolved.
    Row("open", "resolved", entry(3000, 0), Change.FOLLOWED, Status.FIRING, still_queued=12),
    Row("open", "resolved", entry(3000, 0), Change.RESOLVED, Status.RESOLVED, still_queued=0),
    Row("acknowledged", "resolved", entry(3000, 0), Change.FOLLOWED, Status.FIRING, 6),
    # Its resolve repeated (an HA peer) changes nothing: there is one follow-up, one summary.
    Row(
        "followed after its alert cleared", "resolved", entry(3000, 0), Change.STALE, Status.FIRING
    ),
    Row(
        "followed after its alert cleared",
        "firing, same numbers",
        entry(3000, 0),
        Change.STALE,
        Status.FIRING,
    ),
    # Firing again while followed: it never resolved, so it fires again, never "reopened".
    Row(
        "followed after its alert cleared",
        "firing again (new start)",
        entry(3000, 0),
        Change.ALERTS_CHANGED,
        Status.FIRING,
    ),
]


@pytest.mark.parametrize(
    "row", TABLE, ids=[f"{r.state} + {r.notification} @{r.entry_id}" for r in TABLE]
)
def test_apply_notification(row: Row) -> None:
    before = STATES[row.state]()
    data = NOTIFICATIONS[row.notification]()

    after, change = apply(before, data, row.entry_id, still_queued=row.still_queued)

    assert (change, after.incident.status) == (row.change, row.status)
    if change is not Change.STALE:
        assert (after.incident.drain.follow is not None) == (change is Change.FOLLOWED)
    if change is Change.STALE:
        # A stale notification changes nothing anyone sees.
        assert after.incident == before.incident
    else:
        assert after.group.last_entry == row.entry_id
        assert after.incident.notified.count == before.incident.notified.count + 1


# -- what each change carries --------------------------------------------------------------------


def test_firing_updates_follow_the_numbers_and_the_peak_keeps_the_worst() -> None:
    incident = opened()

    state, _ = apply(incident, with_queue(payload(), wait=20, queued=2), entry(2000, 0))
    better = state.incident
    assert (better.numbers.max_queue_time_mins, better.numbers.max_queue_size) == (20, 2)
    assert (better.peaks.numbers.max_queue_time_mins, better.peaks.numbers.max_queue_size) == (
        114,
        14,
    )

    state, _ = apply(state, with_queue(payload(), wait=300, queued=9), entry(3000, 0))
    worse = state.incident
    assert (worse.numbers.max_queue_time_mins, worse.numbers.max_queue_size) == (300, 9)
    assert (worse.peaks.numbers.max_queue_time_mins, worse.peaks.numbers.max_queue_size) == (
        300,
        14,
    )
    assert worse.updated_at == T0 + timedelta(hours=1)


def test_resolved_clears_the_live_numbers_but_keeps_the_peak_for_the_summary() -> None:
    incident = opened("alertmanager/runner-queue-am-00-firing.json", "alertmanager")
    delivery = parsed(payload("alertmanager/runner-queue-am-03-resolved.json"), "alertmanager")
    now = T0 + timedelta(minutes=42)

    resolved, change = apply_notification(incident, delivery, entry_id=entry(2000, 0), now=now)

    assert change is Change.RESOLVED
    assert resolved.numbers == QueueNumbers()
    assert resolved.runner_types == {}
    assert resolved.firing_count == 0
    assert resolved.peaks.numbers == incident.peaks.numbers
    assert resolved.peaks.numbers.max_queue_time_mins == 114
    assert resolved.resolved.how is Resolution.ALERT
    assert resolved.resolved.by is None
    assert resolved.resolved.at == now


def typed(at_min: int, **queued: float) -> Snapshot:
    """A status's snapshot naming each runner type's queue, its total as a reading's."""
    types = {name: RunnerQueue(queued=q) for name, q in queued.items()}
    total = QueueNumbers(max_queue_size=sum(queued.values()))
    return Snapshot(at=T0 + timedelta(minutes=at_min), numbers=total, runner_types=types)


@dataclass(frozen=True)
class Shown:
    """One thing the incident showed, at minute `at`: a notification with the alert's own figure
    and wait ("alert"), or a reading of each type's queue taken by a status ("status"), by a
    quiet status that edits the last one ("quiet"), or between statuses by diagnostics
    ("diagnostics")."""

    how: str
    at: int
    queued: float = 0
    wait: float = 20
    types: tuple[tuple[str, float], ...] = ()


def alert(at: int, queued: float, wait: float = 20) -> Shown:
    return Shown("alert", at, queued, wait)


def read(how: str, at: int, **types: float) -> Shown:
    return Shown(how, at, types=tuple(types.items()))


def shown(incident: Incident, step: Shown, n: int) -> Incident:
    """`step` applied as the intake, the status tick or diagnostics apply it."""
    if step.how == "alert":
        data = with_queue(payload(), wait=step.wait, queued=step.queued)
        state, _ = apply(incident, data, entry(2000 + n), at=timedelta(minutes=step.at))
        return state.incident
    snapshot = typed(step.at, **dict(step.types))
    if step.how == "diagnostics":
        return with_live(incident, None, snapshot)
    return record_status(incident, snapshot, posted=step.how == "status")


@dataclass(frozen=True)
class PeakRow:
    case: str
    steps: tuple[Shown, ...]
    peak: float  # the summary's peak queue: the most any of them showed
    summed: bool  # the types' queues summed, rather than the alert's own figure
    at: int  # when the peak was first shown
    at_peak: dict[str, float]  # each type's queue then
    per_type: dict[str, float]  # each type's own peak


# The opened incident showed PyTorch's rule at minute 0: 14 queued, naming no runner type.
PEAK_TABLE = [
    PeakRow("the alert alone", (), 14, False, 0, {}, {}),
    PeakRow(
        "the alert's figure stays above a lower reading",
        (read("status", 5, cpu=5, gpu=4),),
        14,
        False,
        0,
        {},
        {"cpu": 5, "gpu": 4},
    ),
    PeakRow(
        "a reading above the alert",
        (
            read("status", 5, cpu=5, gpu=4),
            read("status", 70, cpu=30, gpu=6),
            read("status", 80, cpu=3),
        ),
        36,
        True,
        70,
        {"cpu": 30, "gpu": 6},
        {"cpu": 30, "gpu": 6},
    ),
    PeakRow(
        "a later notification above the readings",
        (read("status", 5, cpu=5, gpu=4), alert(6, 40), read("status", 7, cpu=8)),
        40,
        False,
        6,
        {},
        {"cpu": 8, "gpu": 4},
    ),
    PeakRow(
        "a reading diagnostics showed between statuses",
        (read("status", 10, cpu=20), read("diagnostics", 12, cpu=30), read("status", 20, cpu=5)),
        30,
        True,
        12,
        {"cpu": 30},
        {"cpu": 30},
    ),
    PeakRow(
        "a quiet status, edited in place",
        (read("status", 10, cpu=20), read("quiet", 15, cpu=25)),
        25,
        True,
        15,
        {"cpu": 25},
        {"cpu": 25},
    ),
    PeakRow(
        "a tie keeps the first moment",
        (read("status", 10, cpu=20, gpu=10), read("status", 20, cpu=10, gpu=20)),
        30,
        True,
        10,
        {"cpu": 20, "gpu": 10},
        {"cpu": 20, "gpu": 20},
    ),
    PeakRow(
        "each type's peak from another moment than the total's",
        (read("status", 10, cpu=40), read("status", 20, cpu=2, gpu=39)),
        41,
        True,
        20,
        {"cpu": 2, "gpu": 39},
        {"cpu": 40, "gpu": 39},
    ),
]


@pytest.mark.parametrize("row", PEAK_TABLE, ids=[row.case for row in PEAK_TABLE])
def test_the_peak_is_the_most_the_incident_showed(row: PeakRow) -> None:
    incident = opened()
    for n, step in enumerate(row.steps):
        incident = shown(incident, step, n)
    moment = incident.peaks.moment
    assert moment is not None
    assert (incident.peaks.numbers.max_queue_size, incident.peak_summed) == (row.peak, row.summed)
    assert moment.at == T0 + timedelta(minutes=row.at)
    assert moment.numbers.max_queue_size == row.peak
    assert {n: q.queued for n, q in moment.runner_types.items()} == row.at_peak
    assert {n: q.queued for n, q in incident.peaks.types.items()} == row.per_type


def test_the_peak_wait_is_the_longest_any_notification_or_reading_showed() -> None:
    incident = opened()  # 114 min
    waited = {"cpu": RunnerQueue(queued=3, longest_wait_mins=150)}
    reading = Snapshot(
        at=T0 + timedelta(minutes=5), numbers=QueueNumbers(150, 3), runner_types=waited
    )
    incident = with_live(incident, None, reading)
    incident = shown(incident, alert(20, 2, wait=30), 0)
    incident = with_live(incident, None, reading.model_copy(update={"at": T0 + timedelta(hours=1)}))
    assert incident.peaks.numbers.max_queue_time_mins == 150
    assert incident.peaks.types["cpu"].longest_wait_mins == 150
    assert incident.peaks.wait_at == reading.at, "when first shown, however long the trend"


def test_an_alert_naming_its_types_says_their_total_as_a_reading_does() -> None:
    incident = opened().model_copy(
        update={"runner_types": {"cpu": RunnerQueue(queued=4), "gpu": RunnerQueue(queued=10)}}
    )
    incident = incident.model_copy(update={"numbers": QueueNumbers(max_queue_size=10)})
    assert incident.snapshot(T0).numbers.max_queue_size == 14


@given(
    st.lists(
        st.one_of(
            st.dictionaries(st.sampled_from(["cpu", "gpu", "arm"]), st.integers(0, 60), max_size=3),
            st.integers(0, 80),  # an alert's own figure, naming no type
        ),
        max_size=8,
    )
)
def test_the_peak_queue_is_the_most_shown_and_never_below_a_types_peak(
    seen: list[dict[str, int] | int],
) -> None:
    incident = opened()
    totals = [14]
    for i, what in enumerate(seen):
        if isinstance(what, int):
            snapshot = Snapshot(at=T0, numbers=QueueNumbers(max_queue_size=what))
            totals.append(what)
        else:
            snapshot = typed(i, **what)
            totals += [sum(what.values())] if what else []
        incident = record_status(incident, snapshot)
    peaks = [q.queued for q in incident.peaks.types.values() if q.queued is not None]
    assert incident.peaks.numbers.max_queue_size == max(totals)
    assert all(incident.peaks.numbers.max_queue_size >= p for p in peaks)


def test_a_resolved_notification_overtaken_by_an_older_firing_one_does_not_reopen() -> None:
    # Two replicas: the resolved entry (2000-0) is processed first, the firing one (1500-0)
    # that Grafana sent before it arrives late.
    resolved = _resolved_by_alert()

    late, change = apply(resolved, payload(), entry(1500, 0), at=timedelta(hours=2))

    assert change is Change.STALE
    assert late == resolved
    assert late.incident.reopened == 0


def test_a_resolved_entry_handled_before_its_firing_keeps_the_group_from_opening() -> None:
    """No incident yet: the resolved delivery (newer entry) is handled first and ignored, but
    the group remembers it, so the older firing entry handled next opens nothing."""
    empty = GroupState()
    resolved = parsed(payload(GRAFANA_RESOLVED))
    firing = parsed(payload())

    assert not is_stale(empty, resolved, RESOLVED_ENTRY)
    after = noted(empty, resolved, RESOLVED_ENTRY)

    assert is_stale(after, firing, OPENED_ENTRY), "older in stream order"
    assert is_stale(after, firing, entry(3000, 0)), "newer, but the instance was seen resolved"
    assert not is_stale(after, parsed(refired(payload())), entry(3000, 0)), "a real re-fire"


def test_firing_after_resolved_reopens_clears_the_ack_and_counts_the_reopen() -> None:
    acked = acknowledge(opened(), by="U0ALICE", name="alice", now=T0 + timedelta(minutes=5))
    state, _ = apply(acked, payload(GRAFANA_RESOLVED), RESOLVED_ENTRY)
    assert state.incident.acknowledged.by == "U0ALICE"

    state, change = apply(
        state,
        refired(with_queue(payload(), wait=50, queued=5)),
        entry(3000, 0),
        at=timedelta(hours=2),
    )
    reopened = state.incident

    assert change is Change.REOPENED
    assert reopened.is_open
    assert reopened.reopened == 1
    assert reopened.acknowledged.by is None
    assert reopened.resolved.at is None and reopened.resolved.how is None
    assert (reopened.numbers.max_queue_time_mins, reopened.numbers.max_queue_size) == (50, 5)
    assert reopened.peaks.numbers.max_queue_time_mins == 114

    resolved_again, _ = apply(state, refired(payload(GRAFANA_RESOLVED)), entry(4000, 0))
    again, change = apply(
        resolved_again, refired(payload(), "2025-12-01T07:00:00Z"), entry(5000, 0)
    )
    assert change is Change.REOPENED
    assert again.incident.reopened == 2


def test_grafana_resolving_after_a_manual_resolve_is_stale_so_no_second_summary() -> None:
    by_hand = resolve_manually(opened(), by="U0ALICE", name="alice", now=T0 + MIN * 30)

    state, change = apply(by_hand, payload(GRAFANA_RESOLVED), entry(3000, 0))
    after = state.incident

    assert change is Change.STALE
    assert after.resolved.how is Resolution.MANUAL
    assert after.resolved.by == "U0ALICE"
    assert after.resolved.at == T0 + timedelta(minutes=30)


def test_resolved_twice_is_stale_and_keeps_the_first_resolution_time() -> None:
    once = _resolved_by_alert()

    twice, change = apply(once, payload(GRAFANA_RESOLVED), entry(3000, 0), at=timedelta(hours=5))

    assert change is Change.STALE
    assert twice.incident.resolved.at == once.incident.resolved.at
    assert twice.incident.notified.count == once.incident.notified.count


# -- acknowledge and resolve racing --------------------------------------------------------------


def test_ack_after_resolve_does_not_reopen_the_incident() -> None:
    resolved = resolve_manually(opened(), by="U0BOB", name="bob", now=T0 + timedelta(minutes=10))

    acked = acknowledge(resolved, by="U0ALICE", name="alice", now=T0 + timedelta(minutes=11))

    assert acked.status is Status.RESOLVED
    assert not acked.is_open  # the action core refuses the ack on this
    assert acked.resolved.by == "U0BOB"
    assert acked.resolved.how is Resolution.MANUAL


def test_resolve_after_ack_keeps_who_owned_it() -> None:
    acked = acknowledge(opened(), by="U0ALICE", name="alice", now=T0 + timedelta(minutes=5))

    resolved = resolve_manually(acked, by="U0BOB", name="bob", now=T0 + timedelta(minutes=20))

    assert resolved.status is Status.RESOLVED
    assert resolved.resolved.how is Resolution.MANUAL
    assert resolved.resolved.by == "U0BOB"
    assert resolved.resolved.at == T0 + timedelta(minutes=20)
    assert resolved.acknowledged.by == "U0ALICE"


def test_acknowledge_records_who_and_when() -> None:
    acked = acknowledge(opened(), by="U0ALICE", name="alice", now=T0 + timedelta(minutes=5))

    assert acked.is_open
    assert (acked.acknowledged.by, acked.acknowledged.name) == ("U0ALICE", "alice")
    assert acked.updated_at == T0 + timedelta(minutes=5)


# -- reopen window, entry order, trend ------------------------------------------------------------

WINDOW = timedelta(hours=1)
RESOLVED_AT = T0 + timedelta(minutes=30)


@pytest.mark.parametrize(
    ("since_resolve", "reopenable"),
    [
        (timedelta(0), True),
        (timedelta(minutes=59, seconds=59), True),
        (WINDOW, True),
        (WINDOW + timedelta(microseconds=1), False),
        (timedelta(days=1), False),
    ],
)
def test_is_reopenable_at_the_window_edges(since_resolve: timedelta, reopenable: bool) -> None:
    resolved = resolve_manually(opened(), by="U0ALICE", name="alice", now=RESOLVED_AT)

    assert is_reopenable(resolved, RESOLVED_AT + since_resolve, WINDOW) is reopenable


def test_an_open_incident_is_not_reopenable() -> None:
    assert not is_reopenable(opened(), T0, WINDOW)


def test_entry_order_sorts_stream_ids_numerically_with_empty_first() -> None:
    ids = ["10-0", "9-5", "", "9-10", "1700000000000-0", "1-0"]

    assert sorted(ids, key=entry_order) == ["", "1-0", "9-5", "9-10", "10-0", "1700000000000-0"]
    assert entry_order("10-0") > entry_order("9-5")


def test_record_status_keeps_the_first_the_peak_and_the_latest_trend_points() -> None:
    incident = opened()  # the alert's reading, at T0
    snapshots = [
        Snapshot(at=T0 + timedelta(minutes=i), numbers=QueueNumbers(max_queue_size=i % 50))
        for i in range(1, TREND_POINTS + 60)
    ]

    for snapshot in snapshots:
        incident = record_status(incident, snapshot)

    latest = snapshots[-(TREND_POINTS // 2) :]
    times = incident.trend.times()
    assert len(incident.trend) == TREND_POINTS
    assert times[0] == T0.timestamp(), "the alert's reading"
    assert snapshots[48].at.timestamp() in times, "the peak (49 queued)"
    assert times[-len(latest) :] == [s.at.timestamp() for s in latest]
    assert incident.trend.totals()[1:] == [(at - T0.timestamp()) / 60 % 50 for at in times[1:]]
    assert incident.shown.status == snapshots[-1]


def test_the_trend_keeps_each_runner_types_column_aligned_and_forgets_types_gone_from_it() -> None:
    gpu, cpu = RunnerQueue(queued=4, longest_wait_mins=9), RunnerQueue(queued=1)
    trend = Trend()
    for i in range(12):
        shown = {"gpu": gpu} if i == 1 else {"cpu": cpu}
        trend = trend.appended(T0 + timedelta(minutes=i), None, shown, limit=4)

    assert "gpu" not in trend.names()  # its only status was thinned out
    assert trend.queued_of("cpu") == [1.0] * 4
    assert trend.points("cpu")[-1] == (trend.times()[-1], 1.0, None)
    assert trend.queued_of("gpu") == [None] * 4


_queues = st.one_of(
    st.none(),
    st.builds(
        RunnerQueue,
        queued=st.one_of(st.none(), st.integers(0, 500)),
        longest_wait_mins=st.one_of(st.none(), st.integers(0, 500)),
    ),
)


@given(
    statuses=st.lists(
        st.dictionaries(st.sampled_from(["cpu", "gpu", "arm"]), _queues, max_size=3), max_size=12
    ),
    limit=st.integers(1, 6),
    last=st.integers(1, 8),
)
def test_the_trend_columns_hold_what_each_kept_status_showed(
    statuses: list[dict[str, RunnerQueue | None]], limit: int, last: int
) -> None:
    trend = Trend()
    for i, shown in enumerate(statuses):
        types = {name: queue for name, queue in shown.items() if queue is not None}
        trend = trend.appended(T0 + timedelta(minutes=i), i, types, limit=limit)

    # Thinned past `limit`: the first and the latest stay, each column aligned with the times.
    indices = [int(t or 0) for t in trend.totals()]
    kept = [statuses[i] for i in indices]
    assert len(trend) == min(len(statuses), limit)
    assert indices == sorted(set(indices))
    assert trend.times() == [(T0 + timedelta(minutes=i)).timestamp() for i in indices]
    if statuses:
        assert indices[-1] == len(statuses) - 1 and (limit == 1 or indices[0] == 0)
    for name in ("cpu", "gpu", "arm"):
        queues = [status.get(name) for status in kept]
        expected = [q.queued if q is not None else None for q in queues]
        shown = any(
            q is not None and (q.queued is not None or q.longest_wait_mins is not None)
            for q in queues
        )
        assert (name in trend.names()) == shown
        if shown:
            assert trend.queued_of(name) == expected
            waits = [q.longest_wait_mins if q is not None else None for q in queues]
            assert [w for _, _, w in trend.points(name)] == [
                w for q, w in zip(expected, waits, strict=True) if q is not None or w is not None
            ]
        assert trend.queued_of(name, last) == trend.queued_of(name)[-last:]


def test_the_posted_status_is_stored_once_and_survives_quiet_statuses() -> None:
    incident = opened()
    first = Snapshot(at=T0, numbers=QueueNumbers(max_queue_size=14))
    quiet = [
        Snapshot(at=T0 + timedelta(minutes=i), numbers=QueueNumbers(max_queue_size=14))
        for i in (10, 20)
    ]
    incident = record_status(incident, first)
    assert incident.shown.status == first
    stored = json.loads(state_json(incident))
    assert "last_posted" not in stored and "last_status" not in stored, "stored once"

    for snapshot in quiet:  # edits in place: the posted one stays what "since" refers to
        incident = Incident.model_validate_json(
            state_json(record_status(incident, snapshot, posted=False))
        )
        assert incident.shown.status == first
        assert incident.trend.times()[-1] == snapshot.at.timestamp()

    later = Snapshot(at=T0 + timedelta(minutes=30), numbers=QueueNumbers(max_queue_size=40))
    incident = Incident.model_validate_json(state_json(record_status(incident, later)))
    assert incident.shown.status == later
    assert incident.shown.statuses == 2


def test_numbers_per_runner_type_are_stored_under_short_keys_and_0_7_state_still_reads() -> None:
    metrics = RunnerTypeMetrics(
        queued=4, longest_wait_mins=39, registered=12, busy=10, arrival_per_min=2.5
    )
    live = FleetSnapshot(at=T0, source="prometheus", runner_types={"linux.4xl": metrics})
    snapshot = Snapshot(
        at=T0,
        numbers=QueueNumbers(max_queue_time_mins=39, max_queue_size=4),
        runner_types={"linux.4xl": RunnerQueue(queued=4, longest_wait_mins=39)},
    )
    incident = record_status(opened(), snapshot, live=live)

    stored = state_json(incident)
    as_0_7 = incident.model_dump_json(exclude_none=True, exclude_defaults=True)

    assert "longest_wait_mins" not in stored and "max_queue_size" not in stored
    assert len(stored) < len(as_0_7)
    assert Incident.model_validate_json(stored) == incident
    assert Incident.model_validate_json(as_0_7) == incident


def test_a_reading_diagnostics_showed_between_statuses_counts_in_the_peaks() -> None:
    """A status on 20 queued, then diagnostics read 30 (the root and the report showed it),
    then a status on 5: the summary's peak is the 30 someone saw, for the total and the type."""
    incident = make_incident()
    for minute, queued, diagnosed in ((10, 20, False), (12, 30, True), (20, 5, False)):
        at = T0 + timedelta(minutes=minute)
        metrics = RunnerTypeMetrics(queued=queued, longest_wait_mins=10)
        live = FleetSnapshot(at=at, source="prometheus", runner_types={"linux.2xlarge": metrics})
        seen = as_snapshot(incident, live, at)
        if diagnosed:
            incident = with_live(incident, live, seen)
        else:
            incident = record_status(incident, seen, live=live)
    assert incident.peaks.numbers.max_queue_size == 30
    assert incident.peaks.types["linux.2xlarge"].queued == 30


@pytest.mark.parametrize(
    ("source", "maximum", "queued", "kept"),
    [
        ("prometheus", 60.0, 20.0, False),  # the maximum was raised since: the cause is gone
        ("prometheus", 20.0, 0.0, False),  # still 20, but nothing needs more: no shortfall
        ("prometheus", 20.0, 20.0, True),  # still short of it: the cause stands
        ("alert", 60.0, 20.0, True),  # a failed reading's stand-in proves nothing
    ],
)
def test_a_cause_of_too_low_a_maximum_leaves_the_root_once_a_reading_disproves_it(
    source: str, maximum: float, queued: float, kept: bool
) -> None:
    from bot.domain.incident.incidents import diagnosed
    from bot.domain.reading.judging import judged

    cause = "Autoscaling configuration (high confidence): linux.2xlarge: 17 short"
    incident = diagnosed(make_incident(), cause, short_of=("linux.2xlarge", 20.0))
    at = make_incident().opened_at + timedelta(minutes=5)
    metrics = RunnerTypeMetrics(
        queued=queued, busy=20, registered=20, desired=20, maximum=maximum, job_duration_mins=30
    )
    read = FleetSnapshot(at=at, source=source, runner_types={"linux.2xlarge": metrics})
    view = judged(read, [], interval=timedelta(minutes=1))
    shown = record_status(incident, as_snapshot(incident, view, at), live=view)
    assert (shown.cause.said == cause) is kept
    assert (shown.cause.maximum is not None) is kept


@pytest.mark.parametrize(
    ("source", "pods", "kept"),
    [
        ("prometheus", RunnerPods(pods_pending=0, unschedulable=0), False),  # pods start now
        ("prometheus", RunnerPods(pods_pending=12, unschedulable=12), True),  # still stuck
        ("prometheus", None, True),  # the pods not read: nothing disproved
        ("alert", RunnerPods(pods_pending=0, unschedulable=0), True),
    ],
)
def test_a_cause_of_pods_that_cannot_start_leaves_the_root_once_they_can(
    source: str, pods: RunnerPods | None, kept: bool
) -> None:
    from bot.domain.incident.incidents import diagnosed
    from bot.domain.reading.judging import judged

    cause = "Runner pods cannot be scheduled (high confidence): linux.2xlarge: 12 runner pods"
    incident = diagnosed(make_incident(), cause, pods_of="linux.2xlarge")
    at = make_incident().opened_at + timedelta(minutes=5)
    metrics = RunnerTypeMetrics(
        queued=20, busy=20, registered=20, desired=20, maximum=20, job_duration_mins=30, pods=pods
    )
    read = FleetSnapshot(at=at, source=source, runner_types={"linux.2xlarge": metrics})
    view = judged(read, [], interval=timedelta(minutes=1))
    shown = record_status(incident, as_snapshot(incident, view, at), live=view)
    assert (shown.cause.said == cause) is kept
    assert shown.cause.pods is kept


def test_responders_and_the_latest_actions_come_from_what_was_done() -> None:
    incident = make_incident()
    for k, who in enumerate("ABACD"):
        event = Event(at=T0 + timedelta(minutes=k), kind="acknowledged", text=f"{k}", actor=who)
        incident = with_action(incident, event)
    assert [r.user_id for r in incident.responders] == ["A", "B", "C", "D"], "first action order"
    assert [e.text for e in incident.recent_actions] == ["2", "3", "4"]
    back = Incident.model_validate_json(state_json(incident))
    assert [r.user_id for r in back.responders] == ["A", "B", "C", "D"]
    assert [e.text for e in back.recent_actions] == ["2", "3", "4"]


def test_weeks_of_actions_keep_the_stored_record_bounded_and_the_responders_whole() -> None:
    incident = make_incident()
    for k in range(2000):  # weeks of a noisy incident: bob and carol act once, early
        who = "B" if k == 1 else "C" if k == 2 else "A"
        event = Event(at=T0 + timedelta(minutes=k), kind="diagnosed", text=f"{k:04}", actor=who)
        incident = with_action(incident, event)
        if k == 300:
            size = len(state_json(incident))
    assert len(state_json(incident)) == size, "no longer by a byte after its first 300 actions"
    assert len(incident.actions) == MAX_ACTIONS + 3, "the newest, and each responder's first"
    back = Incident.model_validate_json(state_json(incident))
    assert [r.user_id for r in back.responders] == ["A", "B", "C"], "the responders whole"
    assert [e.text for e in back.recent_actions] == ["1997", "1998", "1999"]


def test_a_scale_up_still_to_go_back_stays_on_the_record_past_weeks_of_actions() -> None:
    """Its summary says it goes back: it is kept however many actions came after it, and goes
    with the rest once it went back."""
    up = ScaleUp(
        runner_type="linux", added=5, by="A", at=T0, field="maxRunners", before=20, after=25
    )
    going = up.model_copy(update={"back": "linux|maxRunners", "back_to": 20})
    incident = with_action(make_incident(), Event(at=T0, kind="scaled", text="+5", scale=going))
    for k in range(1, 400):
        event = Event(at=T0 + timedelta(minutes=k), kind="diagnosed", text=f"{k}", actor="A")
        incident = with_action(incident, event)
    back = Incident.model_validate_json(state_json(incident))
    assert [(p.back, p.back_to, p.after) for p in back.put_backs] == [("linux|maxRunners", 20, 25)]
    assert len(back.actions) == MAX_ACTIONS + 2, "the newest, the responder's first, and it"
    gone = without_put_backs(back, {"linux|maxRunners"})
    assert gone.put_backs == ()
    later = with_action(gone, Event(at=T0 + timedelta(days=1), kind="diagnosed", text="x"))
    assert len(later.actions) == MAX_ACTIONS + 1, "it goes with the older ones"


def test_a_long_incidents_chart_starts_at_its_open_and_holds_an_early_peak() -> None:
    """Past the trend's cap, the summary chart still starts where the incident did and its peak
    (reached early, long since out of the latest statuses) is on it."""
    name = "linux.2xlarge"
    at_open = Trend().appended(T0, 5, {name: RunnerQueue(queued=5)}, limit=TREND_POINTS)
    incident = opened().model_copy(update={"trend": at_open})
    for i in range(1, 4 * TREND_POINTS):
        queued = 99 if i == 3 else 5
        shown = {name: RunnerQueue(queued=queued, longest_wait_mins=10)}
        at = T0 + timedelta(minutes=10 * i)
        snapshot = Snapshot(at=at, numbers=QueueNumbers(max_queue_size=queued), runner_types=shown)
        incident = record_status(incident, snapshot)

    block = chart_block(incident_chart(incident))
    assert block is not None
    chart = block["chart"]
    assert chart["axis_config"]["categories"][0] == f"{T0:%H:%M}", "it starts at the open"
    values = [p["value"] for series in chart["series"] for p in series["data"]]
    assert max(values) == 99, "the peak"


def test_the_chart_starts_at_the_first_reading_not_at_the_first_status() -> None:
    """The first status comes minutes after the alert; the first reading by type, seconds after
    it, starts the chart in place of the alert's dot, and a status draws it only once two
    statuses made a line of the incident's own."""
    name = "linux.2xlarge"
    incident = opened()
    first = T0 + timedelta(seconds=90)
    queue = RunnerQueue(queued=14, longest_wait_mins=3)
    live = FleetSnapshot(
        at=first, source="prometheus", runner_types={name: RunnerTypeMetrics(queued=14)}
    )
    seen = Snapshot(at=first, numbers=QueueNumbers(max_queue_size=14), runner_types={name: queue})
    incident = with_live(incident, live, seen)
    assert incident.trend.times() == [first.timestamp()]
    for minutes in (10, 20):
        at = T0 + timedelta(minutes=minutes)
        status = Snapshot(
            at=at, numbers=QueueNumbers(max_queue_size=30), runner_types={name: queue}
        )
        assert not chart_moved(incident), "no line of its own yet"
        incident = record_status(incident, status)
    assert chart_moved(incident)
    block = chart_block(incident_chart(incident))
    assert block is not None
    assert block["chart"]["axis_config"]["categories"][0] == f"{first:%H:%M}"
