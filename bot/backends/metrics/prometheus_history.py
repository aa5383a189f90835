"""The capacity report's window from Prometheus: the reading's own queries over a range, and the
numbers over the window (`promql.REPORT`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime

from bot.backends.metrics.promql import RANGE_WAIT, render
from bot.domain.capacity import Series, TypeHistory

# Prometheus refuses a range query of more than 11,000 points per series; a week at 5 min is
# 2,016, a month at 22 min about the same.
MAX_POINTS = 2000
# `TypeHistory` field -> the reading's query it is the history of.
SERIES = {"queued": "queued", "wait_mins": "longest_wait_mins", "maximum": "maximum"}
# How "Prometheus could not answer for …" names a history.
SAID = {
    "queued": "queued jobs",
    "wait_mins": "the longest wait",
    "maximum": "the maximum",
    "level": "the runners wanted",
    "wait_p50_mins": "queue time p50",
    "wait_p90_mins": "queue time p90",
    "job_mins": "job duration",
    "pending_pod_mins": "runner pods Pending",
    "pending_longest_mins": "the longest a runner pod was Pending",
    "unschedulable_hours": "runner pods unschedulable",
    "node_oom_kills": "OOM kills on the runners' nodes",
}


def step_s(start: datetime, end: datetime) -> int:
    """Whole minutes, at least one, under `MAX_POINTS` a series."""
    seconds = max((end - start).total_seconds(), 60.0)
    return 60 * max(1, math.ceil(seconds / MAX_POINTS / 60))


def range_queries(queries: Mapping[str, str], *, wait_buckets: bool = False) -> dict[str, str]:
    """`TypeHistory` field -> PromQL; `wait_buckets`: the wait's query answers ARC's buckets."""
    chosen = {field: queries[name] for field, name in SERIES.items() if name in queries}
    if wait_buckets and "wait_mins" in chosen:
        chosen["wait_mins"] = render(RANGE_WAIT, **queries)
    level = queries.get("desired") or queries.get("registered")
    if level:
        chosen["level"] = level
    return chosen


def merged(into: dict[float, float], samples: Series) -> None:
    """Two series of one runner type (a listener recreated under a new name): the larger."""
    for at, value in samples.items():
        into[at] = max(value, into.get(at, value))


def histories(
    step: int,
    series: Mapping[str, Mapping[str, dict[float, float]]],
    numbers: Mapping[str, Mapping[str, float]],
) -> dict[str, TypeHistory]:
    """Per runner type: its series by field and its numbers over the window."""
    return {
        name: TypeHistory(
            step_s=step,
            **{field: dict(samples) for field, samples in series.get(name, {}).items()},
            **numbers.get(name, {}),
        )
        for name in sorted({*series, *numbers})
    }
