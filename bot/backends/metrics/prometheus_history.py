"""The capacity report's window from Prometheus: the reading's own queries over a range, and the
queue time's quantiles over ARC's startup histogram's increase across the window."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.backends.http import BackendError
from bot.domain.capacity import Series, TypeHistory
from bot.domain.promql_selector import vector
from bot.domain.runner_pods import WINDOW_MINS

# Prometheus refuses a range query of more than 11,000 points per series; a week at 5 min is
# 2,016, a month at 22 min about the same.
MAX_POINTS = 2000
STARTUP = "gha_job_startup_duration_seconds_bucket"
EXECUTION = "gha_job_execution_duration_seconds"
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
# The runner pods' numbers that add up across a type's runner sets (the rest take the worst): the
# sets mostly follow one another (a template rolled), so their hours and kills are apart.
ADDED = {"pending_pod_mins", "unschedulable_hours", "node_oom_kills"}


def step_s(start: datetime, end: datetime) -> int:
    """Whole minutes, at least one, under `MAX_POINTS` a series."""
    seconds = max((end - start).total_seconds(), 60.0)
    return 60 * max(1, math.ceil(seconds / MAX_POINTS / 60))


def range_queries(queries: Mapping[str, str], *, wait_buckets: bool = False) -> dict[str, str]:
    """`TypeHistory` field -> PromQL; `wait_buckets`: the wait's query answers ARC's buckets."""
    chosen = {field: queries[name] for field, name in SERIES.items() if name in queries}
    if wait_buckets and "wait_mins" in chosen:
        chosen["wait_mins"] = f"histogram_quantile(0.99, {chosen['wait_mins']}) / 60"
    level = queries.get("desired") or queries.get("registered")
    if level:
        chosen["level"] = level
    return chosen


def pending_queries(queries: Mapping[str, str], seconds: int, step: int) -> dict[str, str]:
    """`TypeHistory`'s runner pods numbers -> PromQL asked at the window's end: the reading's
    pods queries as subqueries `step` apart. Each step joins over the cluster's pods, so the range
    queries' step, not a minute, keeps a week's report cheap (and under the 11,000 points a proxy
    such as promxy allows a subquery). The longest wait reads up to a step short."""
    span = f"[{seconds}s:{step}s]"
    found = {}
    if query := queries.get("pods_pending"):  # pods Pending at each step, a step each
        found["pending_pod_mins"] = f"sum_over_time(({query}){span}) * {step / 60:g}"
    if query := queries.get("pending_mins"):
        found["pending_longest_mins"] = f"max_over_time(({query}){span})"
    if query := queries.get("unschedulable"):  # the steps with any pod no node fits
        found["unschedulable_hours"] = f"count_over_time((({query}) > 0){span}) * {step / 3600:g}"
    if query := queries.get("node_oom_kills"):  # its kills over 30 min: each 30 minutes once
        found["node_oom_kills"] = f"sum_over_time(({query})[{seconds}s:{WINDOW_MINS:.0f}m])"
    return found


def combined(name: str, was: float | None, value: float) -> float:
    """A number of two runner sets of one type: added (`ADDED`), else the worst."""
    if was is None:
        return value
    return was + value if name in ADDED else max(was, value)


TYPE = "queuepilot_type"  # the scale set (the runner set's `name` less its suffix), while summing


def per_type(expr: str, seconds: int, name_suffix: str = "", where: str = "") -> str:
    """A job series per scale set (`TYPE`) through any target that served the set's gauges, so a
    listener restarted or renamed mid-window is one match (summed before any quantile)."""
    # Prometheus anchors its regexes at both ends; a name with no suffix is its type whole.
    suffix = f"(?:{name_suffix.removesuffix('$')})?" if name_suffix else ""
    cut = json.dumps(f"(.+?){suffix}")
    assigned = vector("gha_assigned_jobs", where=where)
    names = f'label_replace(last_over_time({assigned}[{seconds}s]), "{TYPE}", "$1", "name", {cut})'
    return f"{expr} * on (instance) group_left ({TYPE}) group by (instance, {TYPE}) ({names})"


def _named(expr: str) -> str:
    """Labelled `name` as the reading's series are."""
    return f'label_replace({expr}, "name", "$1", "{TYPE}", "(.*)")'


def quantile_query(quantile: float, seconds: int, name_suffix: str = "", where: str = "") -> str:
    """Minutes within which `quantile` of the jobs that got a runner in the window got one."""
    startup = vector(STARTUP, where=where)
    jobs = per_type(f"increase({startup}[{seconds}s])", seconds, name_suffix, where)
    return f"histogram_quantile({quantile}, {_named(f'sum by ({TYPE}, le) ({jobs})')}) / 60"


def duration_query(seconds: int, name_suffix: str = "", where: str = "") -> str:
    """The mean minutes a job ran, of the jobs that finished in the window."""

    def summed(part: str) -> str:
        series = vector(f"{EXECUTION}_{part}", where=where)
        jobs = per_type(f"increase({series}[{seconds}s])", seconds, name_suffix, where)
        return f"sum by ({TYPE}) ({jobs})"

    return _named(f"{summed('sum')} / {summed('count')} / 60")


def result_of(body: Mapping[str, Any]) -> tuple[Any, Any]:
    """A query's answer as (resultType, result)."""
    if body.get("status") != "success":
        error = body.get("error") or body.get("errorType") or "an error"
        raise BackendError(f"Prometheus answered {str(error)[:200]}", retryable=False)
    data = body.get("data")
    if not isinstance(data, dict):
        raise BackendError("Prometheus answered without data", retryable=True)
    return data.get("resultType"), data.get("result")


def labels_of(item: Mapping[str, Any]) -> dict[str, str]:
    metric = item.get("metric")
    return {str(k): str(v) for k, v in metric.items()} if isinstance(metric, dict) else {}


def parse_matrix(body: Mapping[str, Any]) -> list[tuple[dict[str, str], dict[float, float]]]:
    """A range query's answer as (labels, {unix time: value}), only finite values."""
    result_type, result = result_of(body)
    if result_type != "matrix" or not isinstance(result, list):
        raise BackendError(
            f"Prometheus answered a {str(result_type)[:20]}, not a range vector", retryable=False
        )
    series = []
    for item in result:
        if isinstance(item, dict):
            values = item.get("values")
            points = [sample_of(v) for v in values] if isinstance(values, list) else []
            series.append((labels_of(item), dict(p for p in points if p is not None)))
    return series


def sample_of(sample: Any) -> tuple[float, float] | None:
    """`[<unix time>, "<value>"]` -> (time, value), when both are finite numbers."""
    if not isinstance(sample, list) or len(sample) != 2:
        return None
    try:
        at, value = float(sample[0]), float(sample[1])
    except (TypeError, ValueError):
        return None
    return (at, value) if math.isfinite(at) and math.isfinite(value) else None


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
