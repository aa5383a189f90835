"""Queue numbers from Prometheus's HTTP API: by default ARC's scale-set listener metrics, each
field one instant query answering one series per scale set."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import Awaitable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import httpx

from bot.backends.http import BackendError, Counted, HttpBackend, bearer, json_object, uncounted
from bot.backends.metrics.prometheus_pods import runner_pods
from bot.backends.metrics.promql import (
    JOBS,
    REPORT,
    SAID,
    WAITED,
    Vector,
    combined,
    defaults,
    parse_matrix,
    parse_vector,
    probe_query,
    range_queries,
    render,
    step_s,
)
from bot.config import Settings
from bot.domain.queue_cost.cost import Waited, bucket_bound, waited_of_buckets
from bot.domain.queue_cost.jobs import Arrivals, JobsListing, workflow_of
from bot.domain.reading.capacity import FleetHistory, TypeHistory
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics, unknown_fields
from bot.domain.reading.runner_pods import NEEDS, RunnerPods, not_scraped
from bot.domain.units import span_seconds

T = TypeVar("T")

# The quantile of the startup histogram read as the longest wait: its slowest recent starts.
WAIT_QUANTILE = 0.99
# ARC times a job only as it starts: with no start in the rate window, the wait's window.
WAIT_WINDOW = "1h"
WAIT = "longest_wait_mins"
LONGER_WAIT = f"longest_wait_mins over {WAIT_WINDOW}"  # as a refusal's note names it
PROBE = "series scraped"  # the pods' sources probe, asked beside the fields
# A series the probe found counts as scraped this long: the probe matches every series of a name.
PROBE_TTL_S = 600.0
NO_WORKFLOW = (
    "ARC's listener metrics carry no job_workflow_name or job_workflow_ref: add one to the "
    "scale set's spec.listenerMetrics (gha_started_jobs_total's labels) to see which workflows "
    "queue; ARC lists no queued jobs themselves"
)
NO_STARTS = (
    "ARC's listeners report no job started in the last hour, so no workflow can be named; "
    "ARC lists no queued jobs themselves"
)


def wait_window(rate_window: str) -> str | None:
    """The longer window the wait falls back to; None when the rate window is no shorter."""
    shorter = (span_seconds(rate_window) or 0) < (span_seconds(WAIT_WINDOW) or 0)
    return WAIT_WINDOW if shorter else None


def default_queries(config: Settings) -> dict[str, str]:
    """Field or reading -> its default PromQL."""
    window, label = config.prometheus_rate_window, config.prometheus_runner_type_label
    return defaults(window, label, config.runner_boot_minutes, config.prometheus_selector)


def all_queries(config: Settings) -> dict[str, str]:
    """PROMETHEUS_QUERIES (as written) over the defaults; an empty query drops a field."""
    queries = config.prometheus_queries
    if unknown := unknown_fields(queries):
        raise ValueError(f"PROMETHEUS_QUERIES: unknown fields {unknown}")
    merged = {**default_queries(config), **queries}
    return {name: query for name, query in merged.items() if query.strip()}


class PrometheusMetrics(HttpBackend):
    name = service = "Prometheus"
    live = True

    def __init__(
        self,
        config: Settings,
        client: httpx.AsyncClient | None = None,
        *,
        counted: Counted = uncounted,
    ) -> None:
        self._config = config
        # Field or reading -> the PromQL asked for it (`queuepilot check` shows them).
        self.queries = queries = all_queries(config)
        self._where = where = config.prometheus_selector
        asked = default_queries(config)
        self._arc_wait = queries.get(WAIT) == asked[WAIT]  # not replaced
        longer = wait_window(config.prometheus_rate_window) if self._arc_wait else None
        label, boot = config.prometheus_runner_type_label, config.runner_boot_minutes
        self._longer_wait = defaults(longer, label, boot, where)[WAIT] if longer else ""
        # The pods' readings whose default query stands: an empty answer of an absent series is
        # "not scraped".
        self._probed = [r for r in asked if r in NEEDS and queries.get(r) == asked[r]]
        self._found: dict[str, float] = {}  # series name -> when the probe found it (monotonic)
        self._unscraped: dict[str, str] = {}  # the last probe's `runner_pods` `probed`
        suffix = config.prometheus_name_suffix
        self._suffix = re.compile(suffix) if suffix else None
        self._names = config.runner_names
        timeout, headers = config.backend_timeout_seconds, bearer(config.prometheus_token)
        super().__init__(client, config.prometheus_url, timeout, headers, counted=counted)

    @property
    def fields(self) -> list[str]:
        """The queue's fields (not the runner pods' readings)."""
        return [name for name in self.queries if name not in NEEDS]

    @property
    def readings(self) -> list[str]:
        """The runner pods' readings asked (PROMETHEUS_QUERIES may drop some)."""
        return [name for name in self.queries if name in NEEDS]

    async def read(self, *, now: datetime) -> FleetSnapshot:
        """All queries at once, at one evaluation time: every field describes the same moment."""
        queries = {name: self.series(name, now=now) for name in self.fields}
        if self._longer_wait:
            queries[LONGER_WAIT] = self._query(self._longer_wait, now)
        (answers, failed), (pods, unseen, refused) = await asyncio.gather(
            gathered(queries), self.runner_pods(now=now)
        )
        failed.update(refused)
        by_type: dict[str, dict[str, Any]] = {}
        buckets: dict[tuple[str, str], dict[float, float]] = {}  # (query, runner type) -> counts
        for name, answer in answers.items():
            for labels, value in answer:
                runner_type = self.runner_type(labels)
                if not runner_type:
                    continue
                bucket = name in (WAIT, LONGER_WAIT) and "le" in labels
                if not bucket and name != LONGER_WAIT:
                    by_type.setdefault(runner_type, {})[name] = value
                elif bucket and (le := bucket_bound(labels["le"])) is not None:
                    kept = buckets.setdefault((name, runner_type), {})  # summed per type
                    kept[le] = kept.get(le, 0.0) + value
        for runner_type in {runner_type for _, runner_type in buckets}:
            # ARC's histogram times starts, not jobs still queued; past its top bucket the p99
            # says only "over". No start in the rate window while jobs queue: the last hour's.
            found = bucket_quantile(WAIT_QUANTILE, buckets.get((WAIT, runner_type), {}))
            if found is None and (by_type.get(runner_type, {}).get("queued") or 0) > 0:
                found = bucket_quantile(WAIT_QUANTILE, buckets.get((LONGER_WAIT, runner_type), {}))
            if found is not None:
                by_type.setdefault(runner_type, {}).update(
                    longest_wait_mins=found[0] / 60,
                    wait_over=found[1] or None,
                    wait_of_starts=self._arc_wait or None,
                )
        if unseen is not None:
            # Only the listener's types: another team's scale set is no runner type of this fleet.
            for name, values in by_type.items():
                values["pods"] = pods.get(name, unseen)
        note = f"Prometheus could not answer for {', '.join(failed)}" if failed else ""
        types = {name: RunnerTypeMetrics(**values) for name, values in sorted(by_type.items())}
        # A runner type with no series is unknown, not idle: a listener being recreated (after a
        # scale-up, an upgrade) serves nothing until it is back, and its queue may be long.
        return FleetSnapshot(
            at=now, source="prometheus", runner_types=types, note=note, absent_means_empty=False
        )

    async def runner_pods(
        self, *, now: datetime, fresh: bool = False
    ) -> tuple[dict[str, RunnerPods], RunnerPods | None, dict[str, BackendError]]:
        """Per runner type with runner pods, their readings; those of a type with none (None: none
        asked); and the queries refused. The probe asks only for the series not found within
        `PROBE_TTL_S` (`fresh`: all of them)."""
        queries = {r: self.series(r, now=now) for r in self.readings}
        if not queries:
            return {}, None, {}
        since = time.monotonic() - PROBE_TTL_S
        known = set() if fresh else {name for name, at in self._found.items() if at > since}
        needed = {series for r in self._probed for series, _ in NEEDS[r]} - known
        if needed:
            queries[PROBE] = self._query(probe_query(sorted(needed), self._where), now)
        answers, failed = await gathered(queries, all_may_fail=True)
        found_now = {labels.get("__name__", "") for labels, _ in answers.pop(PROBE, [])}
        # A failed probe leaves the last verdicts: a source not scraped answers no "none".
        if PROBE not in failed:
            self._unscraped = {r: not_scraped(r, known | found_now) for r in self._probed}
            kept = {name: at for name, at in self._found.items() if name in known}
            self._found = dict.fromkeys(found_now, time.monotonic()) | kept
        found, unseen = runner_pods(answers, self._unscraped, self.runner_type)
        return found, unseen, failed

    def unscraped(self) -> dict[str, str]:
        """Per reading the last `runner_pods` probed, the source it lacks ("" when none)."""
        return dict(self._unscraped)

    async def series(self, field: str, *, now: datetime) -> Vector:
        return await self._query(self.queries[field], now)

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        """Per (runner type, workflow), the jobs started in the last hour and a day before."""
        last, before, minutes, minutes_before = await asyncio.gather(
            *(self._query(render(q.promql, by=q.by, where=self._where), now) for q in JOBS.values())
        )
        day_before = self._per_workflow(before, counts=True)
        arrivals = Arrivals(
            self._per_workflow(last, counts=True),
            day_before,
            history=bool(day_before),
            minutes_last_hour=self._per_workflow(minutes),
            minutes_day_before=self._per_workflow(minutes_before),
        )
        note = ""
        if not last:
            note = NO_STARTS
        elif not any(workflow_of(labels) and self.runner_type(labels) for labels, _ in last):
            note = NO_WORKFLOW
        return JobsListing(complete=False, note=note, arrivals=arrivals)

    def _per_workflow(self, series: Vector, *, counts: bool = False) -> dict[tuple[str, str], Any]:
        """Per (runner type, workflow): the jobs counted (`counts`), else the mean minutes."""
        found: dict[tuple[str, str], Any] = {}
        for labels, value in series:
            key = (self.runner_type(labels), workflow_of(labels))
            if all(key) and counts:
                found[key] = found.get(key, 0) + round(value)
            elif all(key) and math.isfinite(value) and value >= 0:
                found[key] = value
        return {key: n for key, n in found.items() if n > 0 or not counts}

    def runner_type(self, labels: Mapping[str, str]) -> str:
        """A series' runner type: its scale set less ARC's suffix; "" without the label."""
        raw = labels.get(self._config.prometheus_runner_type_label, "")
        scale_set = self._suffix.sub("", raw) if self._suffix else raw
        return self._names.runner_type(scale_set) if scale_set else ""

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        step = step_s(start, end)
        fields = range_queries(self.queries, wait_buckets=self._arc_wait)
        seconds = max(60, round((end - start).total_seconds()))
        fill = {
            "range": f"{seconds}s",
            "span": f"[{seconds}s:{step}s]",
            "step_mins": f"{step / 60:g}",
            "step_hours": f"{step / 3600:g}",
            "cut": self._cut(),
        }
        numbers = {}
        for number, query in REPORT.items():
            with contextlib.suppress(KeyError):  # a reading PROMETHEUS_QUERIES dropped: not asked
                numbers[number] = render(query.promql, where=self._where, **fill, **self.queries)
        ranged, failed = await gathered(
            {field: self._query_range(query, start, end, step) for field, query in fields.items()}
            | {number: self._query(query, end) for number, query in numbers.items()}
        )
        series: dict[str, dict[str, dict[float, float]]] = {}
        by_type: dict[str, dict[str, float]] = {}
        for name, answer in ranged.items():
            for labels, found in answer:
                runner_type = self.runner_type(labels)
                # A listener recreated under a new name: two series of one type, the larger.
                if runner_type and name in fields:
                    into = series.setdefault(runner_type, {}).setdefault(name, {})
                    for at, value in found.items():  # type: ignore[union-attr]
                        into[at] = max(value, into.get(at, value))
                elif runner_type:
                    kept = by_type.setdefault(runner_type, {})
                    kept[name] = combined(REPORT[name].read, kept.get(name), found)  # type: ignore[arg-type]
        said = [SAID.get(name, name) for name in failed]
        note = f"Prometheus could not answer for {', '.join(said)}" if failed else ""
        types = {
            name: TypeHistory(step_s=step, **series.get(name, {}), **by_type.get(name, {}))
            for name in sorted({*series, *by_type})
        }
        return FleetHistory(types, note)

    async def waited(
        self, *, since: datetime, until: datetime, threshold_mins: float
    ) -> dict[str, Waited]:
        """Per runner type, what its jobs that got a runner within [since, until] waited, from
        the window's increase of ARC's startup histogram, asked once at `until`."""
        # To the millisecond Prometheus stamps samples with: the window is the one asked.
        ms = max(1, round((until - since).total_seconds() * 1000))
        fill = {"range": f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms", "cut": self._cut()}
        asked = [render(q.promql, by=q.by, where=self._where, **fill) for q in WAITED.values()]
        answers = await asyncio.gather(*(self._query(query, until) for query in asked))
        by_type: dict[str, list[Vector]] = {}
        for index, answer in enumerate(answers):
            for labels, value in answer:
                if runner_type := self.runner_type(labels):
                    parts = by_type.setdefault(runner_type, [[], [], []])
                    parts[index].append((labels, value))
        return {
            runner_type: waited_of_buckets(*parts, threshold_mins)
            for runner_type, parts in sorted(by_type.items())
        }

    def _cut(self) -> str:
        """A regex of a runner set's name less PROMETHEUS_NAME_SUFFIX, as a PromQL string."""
        suffix = self._config.prometheus_name_suffix
        # Prometheus anchors its regexes at both ends; a name with no suffix is its type whole.
        suffix = f"(?:{suffix.removesuffix('$')})?" if suffix else ""
        return json.dumps(f"(.+?){suffix}")

    async def _query_range(
        self, query: str, start: datetime, end: datetime, step: int
    ) -> list[tuple[dict[str, str], dict[float, float]]]:
        span = {"start": f"{start.timestamp():.3f}", "end": f"{end.timestamp():.3f}"}
        params = {"query": query, **span, "step": str(step)}
        return parse_matrix(await self._get("/api/v1/query_range", params))

    async def _query(self, query: str, now: datetime) -> Vector:
        params = {"query": query, "time": f"{now.timestamp():.3f}"}
        return parse_vector(await self._get("/api/v1/query", params))

    async def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        return json_object(await self._request("GET", path, params=params), self.service)


async def gathered(
    calls: Mapping[str, Awaitable[T]], *, all_may_fail: bool = False
) -> tuple[dict[str, T], dict[str, BackendError]]:
    """Every answer and failure by name; the first failure raised when all failed, unless asked."""
    answers = await asyncio.gather(*calls.values(), return_exceptions=True)
    for answer in answers:
        if isinstance(answer, BaseException) and not isinstance(answer, BackendError):
            raise answer
    named = dict(zip(calls, answers, strict=True))
    failed = {n: a for n, a in named.items() if isinstance(a, BackendError)}
    if failed and len(failed) == len(named) and not all_may_fail:
        raise next(iter(failed.values()))
    return {n: a for n, a in named.items() if n not in failed}, failed  # type: ignore[misc]


def bucket_quantile(q: float, buckets: Mapping[float, float]) -> tuple[float, bool] | None:
    """The `q` quantile of cumulative buckets as `histogram_quantile` computes it, except past the
    top finite bound, which Prometheus answers as the value: here (that bound, True), "over it"."""
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
