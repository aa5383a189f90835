"""Queue numbers from a PyTorch-style HUD (pytorch/test-infra `torchci`): its saved ClickHouse
queries over HTTP, as PyTorch's own bots read them.

`GET {HUD_URL}/api/clickhouse/<query>?parameters=<URL-encoded JSON>` with the
`x-hud-internal-bot` header answers a JSON array of rows. Two queries fit:
- `queued_jobs_aggregate` (the default; what PyTorch's scale-up-chron reads): rows per
  (runner_label, org, repo) with `num_queued_jobs` and `max_queue_time_minutes`; a label appears
  once per repo, so rows are added up per label. Only jobs queued longer than
  `queuedThresholdMinutes` count; it is 5 here, so the numbers read like PyTorch's own queue
  alert ("machines queueing" longer than 5 minutes), not the query's default of 30.
- `queued_jobs_by_label`: rows per `machine_type` with `count` and `avg_queue_s`, which despite
  its name holds the longest wait in seconds; it takes no parameters. It counts jobs queued
  longer than 5 minutes too.

A third, `queued_jobs` (one row per queued job, what HUD's metrics page lists; no parameters),
tells which jobs they are: `/queue jobs` and diagnostics read it (`queued_jobs`). A fourth,
`queue_times_historical` (what HUD's queue-time charts read), is the capacity report's history:
per machine type and hour, the mean of the longest wait HUD sampled (`avg_queue_s`, a misnomer
for the maximum, as its SQL says); hours with too few jobs are left out by the query itself. It
keeps no queue sizes, percentiles or maximums: the report takes the hours over the wait
threshold from it, and says the rest is not known.

Both counting queries answer only labels that have such jobs: a label whose queue drained leaves
the answer, so the reading says that a label it lacks has nothing queued longer than the query's
threshold (`absent_means_empty`, with `queued_over_mins`); jobs younger than that it cannot see.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import request
from bot.config import Settings
from bot.domain.alerts import max_known
from bot.domain.capacity import FleetHistory, TypeHistory
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.hud_queries import AGGREGATE, DEFAULT_PARAMETERS, threshold_minutes
from bot.domain.jobs import JobsListing, QueuedJob, trigger_of_hud

JOBS_QUERY = "queued_jobs"
JOBS_LISTED_OVER_MINS = 5.0  # `queued_jobs` lists only jobs queued longer than this
HISTORY_QUERY = "queue_times_historical"
HOUR_S = 3600
# The query lists jobs created less than a week ago; a larger age is not a queued job.
MAX_QUEUE_S = 8 * 86_400


class HudMetrics:
    name = "the HUD"
    live = True

    def __init__(self, config: Settings, client: httpx.AsyncClient | None = None) -> None:
        self._query = config.hud_query
        self._parameters = {**DEFAULT_PARAMETERS[self._query], **config.hud_parameters}
        self._threshold = threshold_minutes(self._query, config.hud_parameters)
        token = config.hud_token
        headers = {"x-hud-internal-bot": token.get_secret_value()} if token else {}
        self._client = client or httpx.AsyncClient(
            base_url=(config.hud_url or "").rstrip("/"),
            timeout=config.backend_timeout_seconds,
            headers=headers,
        )

    async def read(self, *, now: datetime) -> FleetSnapshot:
        rows = await self._rows(self._query, self._parameters)
        parse = aggregate_rows if self._query == AGGREGATE else by_label_rows
        types, skipped = parse(rows)
        note = f"{skipped} unreadable HUD rows left out" if skipped else ""
        return FleetSnapshot(
            at=now,
            source="hud",
            runner_types=types,
            note=note,
            # Both queries group queued jobs by label, so a label with none is not in the
            # answer: its absence says "nothing queued longer than the threshold", unless a row
            # could not be read (it may have been that label's).
            absent_means_empty=not skipped,
            queued_over_mins=self._threshold,
        )

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        jobs, skipped = job_rows(await self._rows(JOBS_QUERY, {}), now=now)
        note = f"{skipped} unreadable HUD rows left out" if skipped else ""
        return JobsListing(
            tuple(jobs), complete=not skipped, note=note, listed_over_mins=JOBS_LISTED_OVER_MINS
        )

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        """Each machine type's longest wait, hour by hour, over [start, end)."""
        parameters = {
            "granularity": "hour",
            "startTime": _hud_time(start),
            "stopTime": _hud_time(end),
        }
        types, skipped = history_rows(await self._rows(HISTORY_QUERY, parameters))
        note = f"{skipped} unreadable HUD rows left out" if skipped else ""
        return FleetHistory(types, note)

    async def _rows(self, query: str, parameters: Mapping[str, Any]) -> Any:
        response = await request(
            self._client,
            "The HUD",
            "GET",
            f"/api/clickhouse/{query}",
            # `parameters` is required (the route JSON-parses it): at least "{}".
            params={"parameters": json.dumps(parameters, separators=(",", ":"))},
        )
        try:
            return response.json()
        except ValueError:
            raise BackendError(
                "The HUD answered with something that is not JSON", retryable=True
            ) from None

    async def aclose(self) -> None:
        await self._client.aclose()


def job_rows(rows: Any, *, now: datetime) -> tuple[list[QueuedJob], int]:
    """`queued_jobs` rows as jobs (`name` is "<workflow> / <job>"; `queue_s` is how long ago it
    was created); and how many rows were not readable (left out, never guessed)."""
    if not isinstance(rows, list):
        raise BackendError(
            "The HUD answered with something that is not a list of rows", retryable=True
        )
    jobs, skipped = [], 0
    for row in rows:
        job = _job(row, now) if isinstance(row, dict) else None
        if job is None:
            skipped += 1
        else:
            jobs.append(job)
    return jobs, skipped


def _job(row: dict[str, Any], now: datetime) -> QueuedJob | None:
    name, url, machine = row.get("name"), row.get("html_url"), row.get("machine_type")
    queue_s = _count(row.get("queue_s"))
    if not (isinstance(name, str) and name and isinstance(machine, str) and machine):
        return None
    if not isinstance(url, str) or queue_s is None or queue_s > MAX_QUEUE_S:
        return None
    workflow, _, job = name.partition(" / ")
    return QueuedJob(
        runner_type=machine[:200],
        workflow=workflow[:200],
        job=job[:500],
        repository=_repository(url),
        url=url[:2000],
        created_at=now - timedelta(seconds=queue_s),
        trigger=trigger_of_hud(row.get("source_type"), row.get("event"), row.get("head_branch")),
        run_attempt=1,
        # The job's URL names it (…/job/<id>): the same job listed again is not a new arrival.
        source_id="hud:" + url[-200:],
    )


def _repository(url: str) -> str:
    """`owner/name` from `https://github.com/<owner>/<name>/actions/…`."""
    parts = url.split("/")
    return "/".join(parts[3:5]) if len(parts) > 5 and parts[2] else ""


def history_rows(rows: Any) -> tuple[dict[str, TypeHistory], int]:
    """`queue_times_historical` rows (`granularity_bucket`, `avg_queue_s`, `machine_type`) as
    each type's hourly longest wait in minutes; and how many rows were not readable."""
    if not isinstance(rows, list):
        raise BackendError(
            "The HUD answered with something that is not a list of rows", retryable=True
        )
    waits: dict[str, dict[float, float]] = {}
    skipped = 0
    for row in rows:
        machine = row.get("machine_type") if isinstance(row, dict) else None
        at = _bucket(row.get("granularity_bucket")) if isinstance(row, dict) else None
        wait = _count(row.get("avg_queue_s")) if isinstance(row, dict) else None
        if not isinstance(machine, str) or not machine or at is None or wait is None:
            skipped += 1
            continue
        waits.setdefault(machine[:200], {})[at] = wait / 60
    types = {name: TypeHistory(step_s=HOUR_S, wait_mins=w) for name, w in sorted(waits.items())}
    return types, skipped


def _bucket(value: Any) -> float | None:
    """`2026-11-20T14:00:00` (ClickHouse's formatDateTime, no zone: UTC) as unix seconds."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def _hud_time(at: datetime) -> str:
    """A time as HUD's own pages send it to its queries (`YYYY-MM-DDTHH:mm:ss.SSS`, UTC)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}"


def aggregate_rows(rows: Any) -> tuple[dict[str, RunnerTypeMetrics], int]:
    """`queued_jobs_aggregate` rows added up per `runner_label` over repos; and how many rows
    were not readable (left out, never guessed)."""
    return _per_label(rows, "runner_label", "num_queued_jobs", "max_queue_time_minutes", 1.0)


def by_label_rows(rows: Any) -> tuple[dict[str, RunnerTypeMetrics], int]:
    """`queued_jobs_by_label` rows: `count` queued, `avg_queue_s` (the maximum) in seconds."""
    return _per_label(rows, "machine_type", "count", "avg_queue_s", 60.0)


def _per_label(
    rows: Any, label_key: str, count_key: str, wait_key: str, wait_per_minute: float
) -> tuple[dict[str, RunnerTypeMetrics], int]:
    """Rows summed per label (queued) with the longest of their waits, in minutes."""
    if not isinstance(rows, list):
        raise BackendError(
            "The HUD answered with something that is not a list of rows", retryable=True
        )
    types: dict[str, RunnerTypeMetrics] = {}
    skipped = 0
    for row in rows:
        label = row.get(label_key) if isinstance(row, dict) else None
        count = _count(row.get(count_key)) if isinstance(row, dict) else None
        if not isinstance(label, str) or not label or count is None:
            skipped += 1
            continue
        wait = _count(row.get(wait_key))
        before = types.get(label, RunnerTypeMetrics(queued=0))
        types[label] = RunnerTypeMetrics(
            queued=(before.queued or 0) + count,
            longest_wait_mins=max_known(
                before.longest_wait_mins, None if wait is None else wait / wait_per_minute
            ),
        )
    return dict(sorted(types.items())), skipped


def _count(value: Any) -> float | None:
    """A non-negative finite number (ClickHouse numbers arrive as JSON numbers, or as strings
    when a deployment quotes 64-bit integers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)
