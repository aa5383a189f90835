"""The real alert payloads of `tests/fixtures`, read as JSON, and the same alert as another group
or firing again."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture_json(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def as_group(key: str, **labels: str) -> dict[str, Any]:
    """The fixture's firing alert as another group, with `labels` among its common labels."""
    payload = copy.deepcopy(fixture_json("grafana/queue-alert-firing.json"))
    payload["groupKey"] = key
    payload["commonLabels"].update(labels)
    payload["groupLabels"].update(labels)
    for alert in payload["alerts"]:
        alert["labels"].update(labels)
    return payload


def refired(payload: dict[str, Any], starts_at: str = "2025-12-01T05:00:00Z") -> dict[str, Any]:
    """The same alert firing again: Grafana and Alertmanager give the new firing a new start."""
    changed = copy.deepcopy(payload)
    for alert in changed["alerts"]:
        alert["startsAt"] = starts_at
    return changed


def stating_thresholds(queued: float, size: float, wait_mins: float) -> dict[str, Any]:
    """The fixture's firing alert from a rule that states where its thresholds are (`queued` jobs
    against `size`, 114 minutes against `wait_mins`), rather than PyTorch's, which only says
    whether each was crossed (`threshold_breached`)."""
    payload = copy.deepcopy(fixture_json("grafana/queue-alert-firing.json"))
    values = {
        "max_queue_size": queued,
        "max_queue_time_mins": 114,
        "queue_size_threshold": size,
        "queue_time_threshold": wait_mins,
    }
    for alert in payload["alerts"]:
        alert["values"] = dict(values)
        alert["valueString"] = ", ".join(
            f"[ var='{name}' labels={{}} value={value} ]" for name, value in values.items()
        )
    return payload
