"""The HUD's two saved queue queries as data: the settings refuse at start a threshold no drain
could pass, and the HUD backend reads the same numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AGGREGATE, BY_LABEL = "queued_jobs_aggregate", "queued_jobs_by_label"
THRESHOLD = "queuedThresholdMinutes"
DEFAULT_PARAMETERS: dict[str, dict[str, Any]] = {
    AGGREGATE: {THRESHOLD: 5, "maxAgeDays": 3},
    BY_LABEL: {},
}
BY_LABEL_THRESHOLD_MINS = 5  # `queued_jobs_by_label` takes none: it counts jobs over 5 min


def threshold_minutes(query: str, parameters: Mapping[str, Any]) -> int:
    """How long a job must have queued for the query to count it (an Int64 in params.json)."""
    if query != AGGREGATE:
        return BY_LABEL_THRESHOLD_MINS
    value = {**DEFAULT_PARAMETERS[AGGREGATE], **parameters}[THRESHOLD]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"HUD_PARAMETERS {THRESHOLD} must be a whole number of minutes")
    return value
