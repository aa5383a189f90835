"""Queue numbers from a PyTorch-style HUD's saved ClickHouse queries. The readings answer only
labels with jobs queued past the threshold, so an absent label has none."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx

from bot.backends.http import BackendError, Counted, HttpBackend, json_of, number_of, uncounted
from bot.config import Settings
from bot.domain.alerting.alerts import max_known, time_of
from bot.domain.queue_cost.jobs import JobsListing, QueuedJob, trigger_of_hud
from bot.domain.reading.capacity import FleetHistory, TypeHistory
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.hud_queries import (
    AGGREGATE,
    BY_LABEL,
    DEFAULT_PARAMETERS,
    threshold_minutes,
)
from bot.domain.shortened import one_line

T = TypeVar("T")
HUD = "The HUD"
JOBS_QUERY = "queued_jobs"
HISTORY_QUERY = "queue_times_historical"
HOUR_S = 3600
# The query lists jobs created less than a week ago; a larger age is not a queued job.
MAX_QUEUE_S = 8 * 86_400
# Per query: the row's label, queued count and longest wait columns, and that wait's unit in
# minutes (`queued_jobs_by_label`'s `avg_queue_s` is the longest wait, in seconds).
COLUMNS = {
    AGGREGATE: ("runner_label", "num_queued_jobs", "max_queue_time_minutes", 1.0),
    BY_LABEL: ("machine_type", "count", "avg_queue_s", 60.0),
}


class HudMetrics(HttpBackend):
    name = "the HUD"
    service = HUD
    live = True

    def __init__(
        self,
        config: Settings,
        client: httpx.AsyncClient | None = None,
        *,
        counted: Counted = uncounted,
    ) -> None:
        self._query = config.hud_query
        self._parameters = {**DEFAULT_PARAMETERS[self._query], **config.hud_parameters}
        self._threshold = threshold_minutes(self._query, config.hud_parameters)
        self._jobs_over = config.hud_jobs_over_minutes  # `queued_jobs` lists only jobs past it
        token = config.hud_token
        headers = {"x-hud-internal-bot": token.get_secret_value()} if token else {}
        timeout = config.backend_timeout_seconds
        super().__init__(client, config.hud_url, timeout, headers, counted=counted)

    async def read(self, *, now: datetime) -> FleetSnapshot:
        types, skipped = per_label(await self._rows(self._query, self._parameters), self._query)
        return FleetSnapshot(
            at=now,
            source="hud",
            runner_types=types,
            note=_note(skipped),
            absent_means_empty=not skipped,  # an unreadable row may have been any label's
            queued_over_mins=self._threshold,
        )

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        jobs, skipped = job_rows(await self._rows(JOBS_QUERY, {}), now=now)
        note, over = _note(skipped), self._jobs_over
        return JobsListing(tuple(jobs), complete=not skipped, note=note, listed_over_mins=over)

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        times = {"granularity": "hour", "startTime": _hud_time(start), "stopTime": _hud_time(end)}
        types, skipped = history_rows(await self._rows(HISTORY_QUERY, times))
        return FleetHistory(types, _note(skipped))

    async def _rows(self, query: str, parameters: Mapping[str, Any]) -> Any:
        # `parameters` is required (the route JSON-parses it): at least "{}".
        shown = json.dumps(parameters, separators=(",", ":"))
        answer = await self._request(
            "GET", f"/api/clickhouse/{query}", params={"parameters": shown}
        )
        return json_of(answer, HUD)


def _note(skipped: int) -> str:
    return f"{skipped} unreadable HUD rows left out" if skipped else ""


def _each(rows: Any, read: Callable[[dict[str, Any]], T | None]) -> tuple[list[T], int]:
    """What `read` makes of each row, and how many rows it could not read (left out)."""
    if not isinstance(rows, list):
        said = f"{HUD} answered with something that is not a list of rows"
        raise BackendError(said, retryable=True)
    found = [read(row) if isinstance(row, dict) else None for row in rows]
    return [item for item in found if item is not None], sum(item is None for item in found)


def job_rows(rows: Any, *, now: datetime) -> tuple[list[QueuedJob], int]:
    """`queued_jobs` rows (`name` "<workflow> / <job>", `queue_s` the job's age) as jobs."""

    def read(row: dict[str, Any]) -> QueuedJob | None:
        name, url, machine = row.get("name"), row.get("html_url"), row.get("machine_type")
        queue_s = _count(row.get("queue_s"))
        if not (isinstance(name, str) and name and isinstance(machine, str) and machine):
            return None
        if not isinstance(url, str) or queue_s is None or queue_s > MAX_QUEUE_S:
            return None
        workflow, _, job = name.partition(" / ")
        parts = url.split("/")  # https://github.com/<owner>/<name>/actions/…
        branch = row.get("head_branch")
        # The job's URL names it (…/job/<id>): the same job listed again is not a new arrival.
        return QueuedJob(
            runner_type=machine[:200],
            workflow=workflow[:200],
            job=job[:500],
            repository="/".join(parts[3:5]) if len(parts) > 5 and parts[2] else "",
            url=url[:2000],
            created_at=now - timedelta(seconds=queue_s),
            trigger=trigger_of_hud(row.get("source_type"), row.get("event"), branch),
            run_attempt=1,
            source_id="hud:" + url[-200:],
            branch=one_line(branch, 200),
        )

    return _each(rows, read)


def history_rows(rows: Any) -> tuple[dict[str, TypeHistory], int]:
    """`queue_times_historical` rows as each type's hourly longest wait in minutes."""

    def read(row: dict[str, Any]) -> tuple[str, float, float] | None:
        machine, bucket = row.get("machine_type"), row.get("granularity_bucket")
        # ClickHouse's formatDateTime has no zone: UTC.
        at = time_of(f"{bucket}Z") if isinstance(bucket, str) else None
        wait = _count(row.get("avg_queue_s"))
        if not isinstance(machine, str) or not machine or at is None or wait is None:
            return None
        return machine[:200], at.timestamp(), wait / 60

    found, skipped = _each(rows, read)
    waits: dict[str, dict[float, float]] = {}
    for machine, at, wait in found:
        waits.setdefault(machine, {})[at] = wait
    types = {name: TypeHistory(step_s=HOUR_S, wait_mins=w) for name, w in sorted(waits.items())}
    return types, skipped


def _hud_time(at: datetime) -> str:
    """A time as HUD's own pages send it to its queries (`YYYY-MM-DDTHH:mm:ss.SSS`, UTC)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}"


def per_label(rows: Any, query: str) -> tuple[dict[str, RunnerTypeMetrics], int]:
    label_key, count_key, wait_key, wait_per_minute = COLUMNS[query]

    def read(row: dict[str, Any]) -> tuple[str, float, float | None] | None:
        label, count = row.get(label_key), _count(row.get(count_key))
        wait = _count(row.get(wait_key))
        if not isinstance(label, str) or not label or count is None:
            return None
        return label, count, None if wait is None else wait / wait_per_minute

    found, skipped = _each(rows, read)
    types: dict[str, RunnerTypeMetrics] = {}
    for label, count, wait in found:
        before = types.get(label, RunnerTypeMetrics(queued=0))
        types[label] = RunnerTypeMetrics(
            queued=(before.queued or 0) + count,
            longest_wait_mins=max_known(before.longest_wait_mins, wait),
        )
    return dict(sorted(types.items())), skipped


def _count(value: Any) -> float | None:
    """A non-negative number (`number_of` refuses infinities)."""
    number = number_of(value)
    return number if number is not None and number >= 0 else None
