"""The incident lifecycle as pure functions: (state, notification, stream entry) -> (state, change).

Every race the intake can meet (duplicate deliveries, a resolved notification overtaken by an older
firing one, a responder resolving before Grafana does) is a row of a table here, not a flaky test.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.alert_facts import facts_of
from bot.alerts import AlertFacts, Notification, QueueNumbers, Source, parse_notification
from bot.incidents import (
    TREND_POINTS,
    Change,
    Incident,
    Resolution,
    Snapshot,
    Status,
    acknowledge,
    apply_notification,
    entry_order,
    is_reopenable,
    open_incident,
    record_status,
    resolve_manually,
)
from tests.conftest import fixture_json

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


def parsed(data: dict[str, Any], source: Source = "grafana") -> tuple[Notification, AlertFacts]:
    notification = parse_notification(source, data)
    return notification, facts_of(notification)


def opened(source_file: str = GRAFANA_FIRING, source: Source = "grafana") -> Incident:
    notification, facts = parsed(payload(source_file), source)
    return open_incident(
        notification, facts, incident_id="7", group_hash="g7", entry_id=OPENED_ENTRY, now=T0
    )


def apply(
    incident: Incident, data: dict[str, Any], entry_id: str, *, at: timedelta = timedelta(hours=1)
) -> tuple[Incident, Change]:
    notification, facts = parsed(data)
    return apply_notification(incident, notification, facts, entry_id=entry_id, now=T0 + at)


# -- open_incident -------------------------------------------------------------------------------


def test_open_incident_from_the_queue_alert_shows_its_title_priority_and_numbers() -> None:
    incident = opened()

    assert incident.title == "Jobs queueing in autoscaled machines"
    assert incident.priority == "P2"
    assert incident.team == "pytorch-dev-infra"
    assert incident.status is Status.FIRING and incident.is_open
    assert incident.numbers == QueueNumbers(
        max_queue_time_mins=114, max_queue_size=14, queue_time_threshold=1, queue_size_threshold=0
    )
    assert incident.peak == incident.numbers
    assert incident.firing_count == 1
    assert incident.notifications == 1
    assert incident.last_entry_id == OPENED_ENTRY
    assert incident.links.runbook == "https://hud.pytorch.org/metrics"
    assert [m.name for m in incident.silence_matchers] == ["__alert_rule_uid__", "type"]


def test_open_incident_starts_when_the_alert_started_not_when_the_bot_heard_of_it() -> None:
    incident = opened()

    assert incident.started_at == datetime(2025, 12, 1, 2, 23, tzinfo=UTC)
    assert incident.opened_at == T0
    assert incident.updated_at == T0


def test_open_incident_takes_a_first_snapshot_so_the_first_status_post_has_a_baseline() -> None:
    incident = opened()

    assert incident.last_status == Snapshot(at=T0, numbers=incident.numbers, runner_types={})


def test_open_incident_from_alertmanager_keeps_the_runner_type_queue() -> None:
    incident = opened("alertmanager/runner-queue-am-00-firing.json", "alertmanager")

    assert set(incident.runner_types) == {"linux.g5.4xlarge.nvidia.gpu"}
    assert incident.runner_types["linux.g5.4xlarge.nvidia.gpu"].queued == 14
    assert incident.last_status is not None
    assert incident.last_status.runner_types == incident.runner_types


# -- apply_notification: the table ---------------------------------------------------------------


def _open() -> Incident:
    return opened()


def _resolved_by_alert() -> Incident:
    incident, change = apply(opened(), payload(GRAFANA_RESOLVED), RESOLVED_ENTRY)
    assert change is Change.RESOLVED
    return incident


def _resolved_by_hand() -> Incident:
    return resolve_manually(opened(), by="U0ALICE", now=T0 + timedelta(minutes=30))


def _acknowledged() -> Incident:
    return acknowledge(opened(), by="U0ALICE", now=T0 + timedelta(minutes=5))


def _opened_at_entry_9_5() -> Incident:
    return opened().model_copy(update={"last_entry_id": entry(9, 5)})


STATES: dict[str, Callable[[], Incident]] = {
    "open": _open,
    "resolved by alert": _resolved_by_alert,
    "resolved by hand": _resolved_by_hand,
    "acknowledged": _acknowledged,
    "open at 9-5": _opened_at_entry_9_5,
}

NOTIFICATIONS: dict[str, Callable[[], dict[str, Any]]] = {
    "firing, same numbers": payload,
    "firing, worse": lambda: with_queue(payload(), wait=200, queued=30),
    "firing, better": lambda: with_queue(payload(), wait=20, queued=2),
    "firing, two alerts": lambda: with_second_alert(payload()),
    "firing, a runner type": lambda: with_runner_label(payload(), "linux.2xlarge"),
    "resolved": lambda: payload(GRAFANA_RESOLVED),
}


@dataclass(frozen=True)
class Row:
    state: str
    notification: str
    entry_id: str
    change: Change
    status: Status


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
    Row(
        "resolved by alert", "firing, same numbers", entry(3000, 0), Change.REOPENED, Status.FIRING
    ),
    Row("resolved by hand", "resolved", entry(3000, 0), Change.STALE, Status.RESOLVED),
    Row("resolved by hand", "firing, worse", entry(3000, 0), Change.REOPENED, Status.FIRING),
    # Accepted before the click on Resolve, processed after it: not a new firing.
    Row("resolved by hand", "firing, worse", entry(1500, 0), Change.STALE, Status.RESOLVED),
    Row("open at 9-5", "firing, worse", entry(10, 0), Change.UPDATED, Status.FIRING),
    Row("open at 9-5", "resolved", entry(9, 4), Change.STALE, Status.FIRING),
]


@pytest.mark.parametrize(
    "row", TABLE, ids=[f"{r.state} + {r.notification} @{r.entry_id}" for r in TABLE]
)
def test_apply_notification(row: Row) -> None:
    incident = STATES[row.state]()
    data = NOTIFICATIONS[row.notification]()

    result, change = apply(incident, data, row.entry_id)

    assert (change, result.status) == (row.change, row.status)
    if change is Change.STALE:
        # A stale notification changes nothing anyone sees.
        ignored = {"last_entry_id"}
        assert result.model_dump(exclude=ignored) == incident.model_dump(exclude=ignored)
    else:
        assert result.last_entry_id == row.entry_id
        assert result.notifications == incident.notifications + 1


# -- what each change carries --------------------------------------------------------------------


def test_firing_updates_follow_the_numbers_and_the_peak_keeps_the_worst() -> None:
    incident = opened()

    better, _ = apply(incident, with_queue(payload(), wait=20, queued=2), entry(2000, 0))
    assert (better.numbers.max_queue_time_mins, better.numbers.max_queue_size) == (20, 2)
    assert (better.peak.max_queue_time_mins, better.peak.max_queue_size) == (114, 14)

    worse, _ = apply(better, with_queue(payload(), wait=300, queued=9), entry(3000, 0))
    assert (worse.numbers.max_queue_time_mins, worse.numbers.max_queue_size) == (300, 9)
    assert (worse.peak.max_queue_time_mins, worse.peak.max_queue_size) == (300, 14)
    assert worse.updated_at == T0 + timedelta(hours=1)


def test_resolved_clears_the_live_numbers_but_keeps_the_peak_for_the_summary() -> None:
    incident = opened("alertmanager/runner-queue-am-00-firing.json", "alertmanager")
    notification, facts = parsed(
        payload("alertmanager/runner-queue-am-03-resolved.json"), "alertmanager"
    )
    now = T0 + timedelta(minutes=42)

    resolved, change = apply_notification(
        incident, notification, facts, entry_id=entry(2000, 0), now=now
    )

    assert change is Change.RESOLVED
    assert resolved.numbers == QueueNumbers()
    assert resolved.runner_types == {}
    assert resolved.firing_count == 0
    assert resolved.peak == incident.peak
    assert resolved.peak.max_queue_time_mins == 114
    assert resolved.resolution is Resolution.ALERT
    assert resolved.resolved_by is None
    assert resolved.resolved_at == now


def test_a_resolved_notification_overtaken_by_an_older_firing_one_does_not_reopen() -> None:
    # Two replicas: the resolved entry (2000-0) is processed first, the firing one (1500-0)
    # that Grafana sent before it arrives late.
    resolved = _resolved_by_alert()

    late, change = apply(resolved, payload(), entry(1500, 0), at=timedelta(hours=2))

    assert change is Change.STALE
    assert late == resolved
    assert late.reopened == 0


def test_firing_after_resolved_reopens_clears_the_ack_and_counts_the_reopen() -> None:
    acked = acknowledge(opened(), by="U0ALICE", now=T0 + timedelta(minutes=5))
    resolved, _ = apply(acked, payload(GRAFANA_RESOLVED), RESOLVED_ENTRY)
    assert resolved.acknowledged_by == "U0ALICE"

    reopened, change = apply(
        resolved, with_queue(payload(), wait=50, queued=5), entry(3000, 0), at=timedelta(hours=2)
    )

    assert change is Change.REOPENED
    assert reopened.is_open
    assert reopened.reopened == 1
    assert reopened.acknowledged_by is None and reopened.acknowledged_at is None
    assert reopened.resolved_at is None and reopened.resolution is None
    assert (reopened.numbers.max_queue_time_mins, reopened.numbers.max_queue_size) == (50, 5)
    assert reopened.peak.max_queue_time_mins == 114

    again, change = apply(
        apply(reopened, payload(GRAFANA_RESOLVED), entry(4000, 0))[0], payload(), entry(5000, 0)
    )
    assert change is Change.REOPENED
    assert again.reopened == 2


def test_grafana_resolving_after_a_manual_resolve_is_stale_so_no_second_summary() -> None:
    by_hand = resolve_manually(opened(), by="U0ALICE", now=T0 + timedelta(minutes=30))

    after, change = apply(by_hand, payload(GRAFANA_RESOLVED), entry(3000, 0))

    assert change is Change.STALE
    assert after.resolution is Resolution.MANUAL
    assert after.resolved_by == "U0ALICE"
    assert after.resolved_at == T0 + timedelta(minutes=30)


def test_resolved_twice_is_stale_and_keeps_the_first_resolution_time() -> None:
    once = _resolved_by_alert()

    twice, change = apply(once, payload(GRAFANA_RESOLVED), entry(3000, 0), at=timedelta(hours=5))

    assert change is Change.STALE
    assert twice.resolved_at == once.resolved_at
    assert twice.notifications == once.notifications


# -- acknowledge and resolve racing --------------------------------------------------------------


def test_ack_after_resolve_does_not_reopen_the_incident() -> None:
    resolved = resolve_manually(opened(), by="U0BOB", now=T0 + timedelta(minutes=10))

    acked = acknowledge(resolved, by="U0ALICE", now=T0 + timedelta(minutes=11))

    assert acked.status is Status.RESOLVED
    assert not acked.is_open  # the action core refuses the ack on this
    assert acked.resolved_by == "U0BOB"
    assert acked.resolution is Resolution.MANUAL


def test_resolve_after_ack_keeps_who_owned_it() -> None:
    acked = acknowledge(opened(), by="U0ALICE", now=T0 + timedelta(minutes=5))

    resolved = resolve_manually(acked, by="U0BOB", now=T0 + timedelta(minutes=20))

    assert resolved.status is Status.RESOLVED
    assert resolved.resolution is Resolution.MANUAL
    assert resolved.resolved_by == "U0BOB"
    assert resolved.resolved_at == T0 + timedelta(minutes=20)
    assert resolved.acknowledged_by == "U0ALICE"
    assert resolved.acknowledged_at == T0 + timedelta(minutes=5)


def test_acknowledge_records_who_and_when() -> None:
    acked = acknowledge(opened(), by="U0ALICE", now=T0 + timedelta(minutes=5))

    assert acked.is_open
    assert (acked.acknowledged_by, acked.acknowledged_at) == ("U0ALICE", T0 + timedelta(minutes=5))
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
    resolved = resolve_manually(opened(), by="U0ALICE", now=RESOLVED_AT)

    assert is_reopenable(resolved, RESOLVED_AT + since_resolve, WINDOW) is reopenable


def test_an_open_incident_is_not_reopenable() -> None:
    assert not is_reopenable(opened(), T0, WINDOW)


def test_entry_order_sorts_stream_ids_numerically_with_empty_first() -> None:
    ids = ["10-0", "9-5", "", "9-10", "1700000000000-0", "1-0"]

    assert sorted(ids, key=entry_order) == ["", "1-0", "9-5", "9-10", "10-0", "1700000000000-0"]
    assert entry_order("10-0") > entry_order("9-5")


def test_record_status_keeps_the_latest_trend_points() -> None:
    incident = opened()
    snapshots = [
        Snapshot(at=T0 + timedelta(minutes=i), numbers=QueueNumbers(max_queue_size=i))
        for i in range(TREND_POINTS + 5)
    ]

    for snapshot in snapshots:
        incident = record_status(incident, snapshot)

    assert len(incident.trend) == TREND_POINTS
    assert incident.trend == snapshots[-TREND_POINTS:]
    assert incident.last_status == snapshots[-1]
