"""The HUD's two saved queue queries as data: their names, default parameters, and how long a job
must have queued for each to count it (`bot.backends.metrics.hud` describes the queries).

Pure, so the settings can refuse at start a threshold no drain could pass
(`bot.domain.incident_fleet.absence_can_drain`), and the HUD backend reads the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AGGREGATE, BY_LABEL = "queued_jobs_aggregate", "queued_jobs_by_label"
THRESHOLD = "queuedThresholdMinutes"
DEFAULT_PARAMETERS: dict[str, dict[str, Any]] = {
    AGGREGATE: {THRESHOLD: 5, "maxAgeDays": 3},
    BY_LABEL: {},
}
# `queued_jobs_by_label` takes no parameters: it counts jobs created more than 5 minutes ago.
BY_LABEL_THRESHOLD_MINS = 5


def threshold_minutes(query: str, parameters: Mapping[str, Any]) -> int:
    """How long a job must have queued for the query to count it: `queuedThresholdMinutes`
    (an Int64 in the query's params.json) over our default, or the fixed 5 of `by_label`."""
    if query != AGGREGATE:
        return BY_LABEL_THRESHOLD_MINS
    value = {**DEFAULT_PARAMETERS[AGGREGATE], **parameters}[THRESHOLD]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"HUD_PARAMETERS {THRESHOLD} must be a whole number of minutes")
    return value
