"""Incidents built directly, without a notification: the product's reference alert."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue, parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import (
    Event,
    GroupState,
    Incident,
    Links,
    open_incident,
    resolve_manually,
)
from bot.domain.scale.scale_ups import ScaleUp
from bot.storage.incident_store import Commit, IncidentStore
from tests.support.payloads import fixture_json

T0 = datetime(2025, 9, 16, 17, 0, tzinfo=UTC)


def make_incident(**changes: Any) -> Incident:
    """The product's reference alert (P2, 114 min, 14 queued), firing; override any field."""
    fields: dict[str, Any] = {
        "id": "12",
        "uid": "u12",
        "group_key": '{}:{alertname="Jobs queueing"}',
        "group_hash": "5f3c",
        "source": "grafana",
        "title": "Jobs queueing in autoscaled machines",
        "priority": "P2",
        "team": "pytorch-dev-infra",
        "summary": "Max queue time 114 minutes, max queue size 14 runners.",
        "links": Links(
            runbook="https://github.com/pytorch/test-infra/wiki/runbook",
            alert="https://grafana.example/alerting/grafana/dez2aomgvru2oe/view",
            silence="https://grafana.example/alerting/silence/new?alertmanager=grafana&matcher=a%3Db",
        ),
        # As the reference alert is read: its rule says the wait is over its threshold and the
        # size under it, not where the thresholds are.
        "numbers": QueueNumbers(114, 14, queue_time_over=True, queue_size_over=False),
        "peak": QueueNumbers(114, 14, queue_time_over=True, queue_size_over=False),
        "runner_types": {
            "linux.2xlarge": RunnerQueue(queued=4, longest_wait_mins=20),
            "linux.g5.4xlarge.nvidia.gpu": RunnerQueue(queued=10, longest_wait_mins=114),
        },
        "firing_count": 1,
        "notifications": 1,
        "started_at": T0,
        "opened_at": T0 + timedelta(minutes=1),
        "updated_at": T0 + timedelta(minutes=1),
    }
    return Incident(**(fields | changes))


async def keep_resolved(
    store: IncidentStore,
    n: int,
    started: datetime,
    hours: float,
    runner_type: str,
    *,
    channel: str = "C1",
    queued: float = 15,
    wait_mins: float = 40,
    thresholds: tuple[float, float] | None = None,
) -> None:
    """The Grafana fixture's alert kept as incident `n` (its own alert group) of `runner_type`,
    begun at `started` and resolved `hours` later: a past week's record for the report. The
    fixture's alert is PyTorch's rule, which says which threshold was crossed but not where it
    is; `thresholds` (queued, wait minutes) makes it a rule that states them."""
    payload = fixture_json("grafana/queue-alert-firing.json")
    payload["groupKey"] = f"kept-{n}"
    if thresholds is not None:
        for alert in payload["alerts"]:
            alert["values"]["queue_size_threshold"], alert["values"]["queue_time_threshold"] = (
                thresholds
            )
    incident = changed(
        open_incident(
            delivery_of(parse_notification("grafana", payload)),
            incident_id=str(n),
            uid=f"u{n}",
            channel=channel,
            now=started,
        ),
        started_at=started,
        peak_types={runner_type: RunnerQueue(queued=queued, longest_wait_mins=wait_mins)},
    )
    group = GroupState(incident_id=incident.id)
    assert await store.commit(Commit(incident, group=group, group_hash=incident.group_hash))
    done = resolve_manually(incident, by="U2", name="al", now=started + timedelta(hours=hours))
    assert await store.commit(Commit(done, version=1))


def changed(incident: Incident, **fields: Any) -> Incident:
    """`incident` with `fields` changed, named as its record keeps them (`peak_types`, `follow`:
    flat, as 0.27 wrote them), validated as a record read back is."""
    return Incident.model_validate(incident.model_dump() | fields)


def with_scaled(incident: Incident, up: ScaleUp) -> Incident:
    """`incident` with the "scaled" event of `up` (one still to go back: its `back` set)."""
    at = up.at or incident.updated_at
    event = Event(at=at, kind="scaled", text=f"Scaled {up.runner_type} by +{up.added}", scale=up)
    return incident.model_copy(update={"actions": (*incident.actions, event)})
