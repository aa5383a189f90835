"""Incidents built directly, without a notification: the product's reference alert."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.domain.alerts import QueueNumbers, RunnerQueue
from bot.domain.incidents import Incident, Links

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
        "numbers": QueueNumbers(114, 14, 1, 0),
        "peak": QueueNumbers(114, 14, 1, 0),
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
