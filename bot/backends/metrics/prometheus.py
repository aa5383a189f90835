"""Queue numbers from Prometheus's HTTP API: by default, ARC's scale-set listener metrics.

Every field of a runner type's reading is one instant query (`/api/v1/query`) returning one series
per runner type, in the reading's units (jobs, runners, jobs per minute, minutes). The defaults
read the gauges of ARC's listeners (one listener per scale set, its `name` label naming the
runner set); the job counters and histograms carry the job's labels, not the scale set's, so they
are joined to the set through the scrape target (`instance`) they share with its gauges. Any query
can be replaced (`PROMETHEUS_QUERIES`), so other exporters fit; see the README for an EC2
autoscaler's example.

A series is named for the runner type the alerts use: its `name` less ARC's runner-set suffix is
a scale set (`linux-2xlarge`), which `RunnerNames` maps back to the type it serves
(`linux.2xlarge`) when the bot knows that type; a scale set of no known type keeps its name.

ARC lists no queued jobs. Its job counters can say which workflows' jobs started, per scale set,
when `spec.listenerMetrics` adds `job_workflow_name` or `job_workflow_ref` to them (absent by
default): `queued_jobs` then gives per-workflow starts in the last hour, against the same hour a
day before, as arrivals; without those labels it says how to add them.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import json_object, request
from bot.backends.metrics import prometheus_history as ranges
from bot.config import Settings
from bot.domain.capacity import FleetHistory
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics, unknown_fields
from bot.domain.jobs import Arrivals, JobsListing

# Gives a job-level series its scale set's `name`: they come from the same listener target.
_JOIN = " * on (instance) group_left (name) group by (instance, name) (gha_assigned_jobs{offset})"
_QUEUED = "(max by (name) (gha_assigned_jobs) - max by (name) (gha_running_jobs))"
# The quantile of the startup histogram read as the longest wait: its slowest recent starts.
WAIT_QUANTILE = 0.99
WORKFLOW_LABELS = ("job_workflow_name", "job_workflow_ref")
NO_WORKFLOW = (
    "ARC's listener metrics carry no job_workflow_name or job_workflow_ref: add one to the "
    "scale set's spec.listenerMetrics (gha_started_jobs_total's labels) to see which workflows "
    "queue; ARC lists no queued jobs themselves"
)
NO_STARTS = (
    "ARC's listeners report no job started in the last hour, so no workflow can be named; "
    "ARC lists no queued jobs themselves"
)


def _joined(expr: str, offset: str = "", *, by: str = "name") -> str:
    return f"sum by ({by}) ({expr}{_JOIN.format(offset=offset)})"


def _histogram_mean_mins(family: str, window: str, offset: str = "") -> str:
    total = _joined(f"rate({family}_sum[{window}]{offset})", offset)
    count = _joined(f"rate({family}_count[{window}]{offset})", offset)
    return f"{total} / {count} / 60"


def _mean_execution_mins(offset: str, by: str) -> str:
    """Mean minutes of the jobs that finished in the hour (before `offset`), per workflow."""
    family = "gha_job_execution_duration_seconds"
    total = _joined(f"increase({family}_sum[1h]{offset})", offset, by=by)
    count = _joined(f"increase({family}_count[1h]{offset})", offset, by=by)
    return f"{total} / {count} / 60"


def arc_queries(window: str = "10m") -> dict[str, str]:
    """ARC's listener metrics, by `name`; rates and means over `window`."""
    started = "60 * " + _joined(f"rate(gha_started_jobs_total[{window}])")
    growth = f"60 * deriv({_QUEUED}[{window}:])"
    bucket = _joined(f"rate(gha_job_startup_duration_seconds_bucket[{window}])", by="name, le")
    return {
        "queued": _QUEUED,
        "assigned": "max by (name) (gha_assigned_jobs)",
        "registered": "max by (name) (gha_registered_runners)",
        "busy": "max by (name) (gha_busy_runners)",
        "idle": "max by (name) (gha_idle_runners)",
        "minimum": "max by (name) (gha_min_runners)",
        "maximum": "max by (name) (gha_max_runners)",
        "desired": "max by (name) (gha_desired_runners)",
        "started_per_min": started,
        # Demand: what started, plus what the queue grew by meanwhile.
        "arrival_per_min": f"{started} + on (name) {growth}",
        "completed_per_min": "60 * " + _joined(f"rate(gha_completed_jobs_total[{window}])"),
        # The startup histogram's buckets (seconds), whose p99 is read here (`wait_of`): the
        # slowest recent start of a job that got a runner, "over an hour" past the top bucket.
        "longest_wait_mins": bucket,
        "job_duration_mins": _histogram_mean_mins("gha_job_execution_duration_seconds", window),
        # The same hour yesterday: what "normal" means for this hour of the day.
        "arrival_baseline_per_min": "60 * "
        + _joined("rate(gha_started_jobs_total[1h] offset 1d)", " offset 1d"),
        "duration_baseline_mins": _histogram_mean_mins(
            "gha_job_execution_duration_seconds", "1h", " offset 1d"
        ),
    }


def all_queries(config: Settings) -> dict[str, str]:
    """Field of `RunnerTypeMetrics` -> PromQL: PROMETHEUS_QUERIES over `arc_queries()`. An empty
    query drops a field (an exporter that has no such number)."""
    queries = config.prometheus_queries
    unknown = unknown_fields(queries)
    if unknown:
        raise ValueError(f"PROMETHEUS_QUERIES: unknown fields {unknown}")
    merged = {**arc_queries(config.prometheus_rate_window), **queries}
    return {name: query for name, query in merged.items() if query.strip()}


class PrometheusMetrics:
    name = "Prometheus"
    live = True

    def __init__(self, config: Settings, client: httpx.AsyncClient | None = None) -> None:
        self._config = config
        self._queries = all_queries(config)
        # The wait is ARC's startup histogram (a start, from assignment) unless it was replaced.
        arc_wait = arc_queries(config.prometheus_rate_window).get("longest_wait_mins")
        self._arc_wait = self._queries.get("longest_wait_mins") == arc_wait
        suffix = config.prometheus_name_suffix
        self._suffix = re.compile(suffix) if suffix else None
        # Scale set -> the runner type the alerts name (RUNNER_SCALE_SETS, SCALER_TARGETS' types).
        self._names = config.runner_names
        token = config.prometheus_token
        headers = {"Authorization": f"Bearer {token.get_secret_value()}"} if token else {}
        self._client = client or httpx.AsyncClient(
            base_url=(config.prometheus_url or "").rstrip("/"),
            timeout=config.backend_timeout_seconds,
            headers=headers,
        )

    async def read(self, *, now: datetime) -> FleetSnapshot:
        """All queries at once, at one evaluation time: every field describes the same moment."""
        names = list(self._queries)
        answers = await asyncio.gather(
            *(self._query(self._queries[name], now) for name in names), return_exceptions=True
        )
        by_type: dict[str, dict[str, Any]] = {}
        buckets: dict[str, dict[float, float]] = {}
        failures = []
        for name, answer in zip(names, answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, BackendError):
                    raise answer
                failures.append((name, answer))
                continue
            for labels, value in answer:
                runner_type = self.runner_type(labels)
                if not runner_type:
                    continue
                if name == "longest_wait_mins" and "le" in labels:
                    le = _bound(labels["le"])  # a histogram's bucket: summed per type, read below
                    if le is not None:
                        kept = buckets.setdefault(runner_type, {})
                        kept[le] = kept.get(le, 0.0) + value
                else:
                    by_type.setdefault(runner_type, {})[name] = value
        for runner_type, counts in buckets.items():
            by_type.setdefault(runner_type, {}).update(self._wait_of(counts))
        if failures and len(failures) == len(names):
            raise failures[0][1]
        note = ""
        if failures:
            note = f"Prometheus could not answer for {', '.join(n for n, _ in failures)}"
        types = {name: RunnerTypeMetrics(**values) for name, values in sorted(by_type.items())}
        # A runner type with no series is unknown, not idle: a listener being recreated (after a
        # scale-up, an upgrade) serves nothing until it is back, and its queue may be long.
        return FleetSnapshot(
            at=now, source="prometheus", runner_types=types, note=note, absent_means_empty=False
        )

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        """Per (runner type, workflow), the jobs started in the last hour and in the same hour a
        day before: what arrived, since ARC's listener has no per-job queue to list."""
        by = "name, " + ", ".join(WORKFLOW_LABELS)
        last, before, minutes, minutes_before = await asyncio.gather(
            self._query(_joined("increase(gha_started_jobs_total[1h])", by=by), now),
            self._query(
                _joined("increase(gha_started_jobs_total[1h] offset 1d)", " offset 1d", by=by),
                now,
            ),
            self._query(_mean_execution_mins("", by), now),
            self._query(_mean_execution_mins(" offset 1d", by), now),
        )
        last_hour, labelled = self._per_workflow(last)
        day_before, _ = self._per_workflow(before)
        note = ""
        if not last:
            note = NO_STARTS
        elif not labelled:
            note = NO_WORKFLOW
        arrivals = Arrivals(
            last_hour,
            day_before,
            history=bool(day_before),
            minutes_last_hour=self._per_workflow_mean(minutes),
            minutes_day_before=self._per_workflow_mean(minutes_before),
        )
        return JobsListing(complete=False, note=note, arrivals=arrivals)

    def _per_workflow(
        self, series: list[tuple[dict[str, str], float]]
    ) -> tuple[dict[tuple[str, str], int], bool]:
        """Counts per (runner type, workflow); and whether any series named its workflow."""
        counts: dict[tuple[str, str], int] = {}
        labelled = False
        for labels, value in series:
            workflow = workflow_of(labels)
            runner_type = self.runner_type(labels)
            if not workflow or not runner_type:
                continue
            labelled = True
            key = (runner_type, workflow)
            counts[key] = counts.get(key, 0) + round(value)
        return {key: n for key, n in counts.items() if n > 0}, labelled

    def _per_workflow_mean(
        self, series: list[tuple[dict[str, str], float]]
    ) -> dict[tuple[str, str], float]:
        """Mean minutes per (runner type, workflow): one series each, as the query sums them."""
        means = {}
        for labels, value in series:
            workflow, runner_type = workflow_of(labels), self.runner_type(labels)
            if workflow and runner_type and math.isfinite(value) and value >= 0:
                means[(runner_type, workflow)] = value
        return means

    def _wait_of(self, buckets: Mapping[float, float]) -> dict[str, Any]:
        """The longest wait of a runner type from its startup histogram's buckets (seconds):
        the p99, "over" the top finite bound when it fell in `+Inf`; nothing when no job
        started in the window. ARC's own histogram times starts, not jobs still queued."""
        found = bucket_quantile(WAIT_QUANTILE, buckets)
        if found is None:
            return {}
        seconds, over = found
        return {
            "longest_wait_mins": seconds / 60,
            "wait_over": over or None,
            "wait_of_starts": self._arc_wait or None,
        }

    def runner_type(self, labels: Mapping[str, str]) -> str:
        """The runner type a series is of: its scale set (the name label less ARC's suffix),
        as the alerts name the type it serves; "" for a series without the label."""
        raw = labels.get(self._config.prometheus_runner_type_label, "")
        scale_set = self._suffix.sub("", raw) if self._suffix else raw
        return self._names.runner_type(scale_set) if scale_set else ""

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        """The capacity report's window (`bot.backends.metrics.prometheus_history`): every
        series and quantile at once; raises `BackendError` when none could be read."""
        step = ranges.step_s(start, end)
        fields = ranges.range_queries(self._queries, wait_buckets=self._arc_wait)
        seconds = max(60, round((end - start).total_seconds()))
        suffix = self._config.prometheus_name_suffix
        numbers = {
            "wait_p50_mins": ranges.quantile_query(0.5, seconds, suffix),
            "wait_p90_mins": ranges.quantile_query(0.9, seconds, suffix),
            "job_mins": ranges.duration_query(seconds, suffix),
        }
        answers = await asyncio.gather(
            *(self._query_range(query, start, end, step) for query in fields.values()),
            *(self._query(query, end) for query in numbers.values()),
            return_exceptions=True,
        )
        failures = [a for a in answers if isinstance(a, BaseException)]
        for failure in failures:
            if not isinstance(failure, BackendError):
                raise failure
        if failures and len(failures) == len(answers):
            raise failures[0]
        failed = [
            name
            for name, answer in zip([*fields, *numbers], answers, strict=True)
            if isinstance(answer, BaseException)
        ]
        series: dict[str, dict[str, dict[float, float]]] = {}
        for field_name, answer in zip(fields, answers[: len(fields)], strict=True):
            for labels, samples in [] if isinstance(answer, BaseException) else answer:
                runner_type = self.runner_type(labels)
                if runner_type:
                    by_field = series.setdefault(runner_type, {})
                    ranges.merged(by_field.setdefault(field_name, {}), samples)
        by_type: dict[str, dict[str, float]] = {}
        for number, answer in zip(numbers, answers[len(fields) :], strict=True):
            for labels, value in [] if isinstance(answer, BaseException) else answer:
                runner_type = self.runner_type(labels)
                if runner_type:
                    by_type.setdefault(runner_type, {})[number] = value
        said = [ranges.SAID.get(name, name) for name in failed]
        note = f"Prometheus could not answer for {', '.join(said)}" if failed else ""
        return FleetHistory(ranges.histories(step, series, by_type), note)

    async def _query_range(
        self, query: str, start: datetime, end: datetime, step: int
    ) -> list[tuple[dict[str, str], dict[float, float]]]:
        response = await request(
            self._client,
            "Prometheus",
            "GET",
            "/api/v1/query_range",
            params={
                "query": query,
                "start": f"{start.timestamp():.3f}",
                "end": f"{end.timestamp():.3f}",
                "step": str(step),
            },
        )
        return ranges.parse_matrix(json_object(response, "Prometheus"))

    @property
    def fields(self) -> list[str]:
        """The reading's fields queried: ARC's defaults with PROMETHEUS_QUERIES over them."""
        return list(self._queries)

    async def series(self, field: str, *, now: datetime) -> list[tuple[dict[str, str], float]]:
        """One field's query, asked as `read` asks it (`queuepilot check` asks them one by one,
        to say which returns what)."""
        return await self._query(self._queries[field], now)

    async def _query(self, query: str, now: datetime) -> list[tuple[dict[str, str], float]]:
        response = await request(
            self._client,
            "Prometheus",
            "GET",
            "/api/v1/query",
            params={"query": query, "time": f"{now.timestamp():.3f}"},
        )
        return parse_vector(json_object(response, "Prometheus"))

    async def aclose(self) -> None:
        await self._client.aclose()


def parse_vector(body: Mapping[str, Any]) -> list[tuple[dict[str, str], float]]:
    """An instant query's answer as (labels, value) pairs; NaN and infinities are dropped (a
    quantile of no observations, a division by zero rate): they are "not known", not numbers.

    Raises `BackendError` for an error answer or a shape that is not an instant vector.
    """
    if body.get("status") != "success":
        error = body.get("error") or body.get("errorType") or "an error"
        raise BackendError(f"Prometheus answered {str(error)[:200]}", retryable=False)
    data = body.get("data")
    if not isinstance(data, dict):
        raise BackendError("Prometheus answered without data", retryable=True)
    result_type, result = data.get("resultType"), data.get("result")
    if result_type == "scalar" and isinstance(result, list):
        value = _number(result)
        return [] if value is None else [({}, value)]
    if result_type != "vector" or not isinstance(result, list):
        raise BackendError(
            f"Prometheus answered a {str(result_type)[:20]}, not an instant vector",
            retryable=False,
        )
    series = []
    for item in result:
        if not isinstance(item, dict):
            continue
        metric = item.get("metric")
        labels = {str(k): str(v) for k, v in metric.items()} if isinstance(metric, dict) else {}
        value = _number(item.get("value"))
        if value is not None:
            series.append((labels, value))
    return series


def bucket_quantile(q: float, buckets: Mapping[float, float]) -> tuple[float, bool] | None:
    """The `q` quantile of a histogram's cumulative buckets (upper bound -> count), computed as
    Prometheus's `histogram_quantile` computes it (linear within the bucket the rank falls in,
    counts made monotonic, none without a `+Inf` bucket or an observation), except past the top:
    there Prometheus answers the highest finite bound as if it were the value, and this says
    (that bound, True): the quantile is over it, by how much the histogram cannot tell.
    """
    bounds = sorted(buckets)
    if not bounds or not math.isinf(bounds[-1]) or not 0 <= q <= 1:
        return None
    counts, highest = [], 0.0
    for bound in bounds:
        highest = max(highest, buckets[bound])  # a scrape mid-update: Prometheus does the same
        counts.append(highest)
    total = counts[-1]
    if total <= 0 or len(bounds) < 2:
        return None
    rank = q * total
    i = next(n for n, count in enumerate(counts) if count >= rank)
    if i == len(bounds) - 1:
        return bounds[-2], True
    if i == 0 and bounds[0] <= 0:
        return bounds[0], False
    start = bounds[i - 1] if i > 0 else 0.0
    below = counts[i - 1] if i > 0 else 0.0
    inside = counts[i] - below
    fraction = (rank - below) / inside if inside > 0 else 1.0
    return start + (bounds[i] - start) * fraction, False


def _bound(text: str | None) -> float | None:
    """A bucket's `le` label as a number (`+Inf` included); None for none or a bad one."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _number(sample: Any) -> float | None:
    """`[<unix time>, "<value>"]` -> the value, when finite."""
    if not isinstance(sample, list) or len(sample) != 2:
        return None
    try:
        value = float(sample[1])
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def workflow_of(labels: Mapping[str, str]) -> str:
    """A job series' workflow: `job_workflow_name`, else the file `job_workflow_ref` names
    (`pytorch/pytorch/.github/workflows/periodic.yml@refs/heads/main` -> `periodic`)."""
    name = labels.get("job_workflow_name", "").strip()
    if name:
        return name[:200]
    ref = labels.get("job_workflow_ref", "").partition("@")[0]
    stem = ref.rsplit("/", 1)[-1]
    for extension in (".yml", ".yaml"):
        stem = stem.removesuffix(extension)
    return stem.strip()[:200]
