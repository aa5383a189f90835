"""A PyTorch HUD's `/api/clickhouse/<query>` route, shaped like torchci's: `parameters` is
required (the route JSON-parses it), and the bot header gets past the bot protection in front of
it (without it, an HTML challenge page, as Vercel answers). Only the keys a query's `params.json`
declares reach it, a missing one taking its default (`passed`). Rows are set by the test, but
for `queue_times_historical`, which the fake runs as its SQL does over `history` (the
`queue_times_historical` table's rows, one per sample): hourly (or daily…) buckets of
[startTime, stopTime), the bucket's mean of `avg_queue_s` per machine type, buckets whose mean
`count` is 5 or less left out, oldest first; and for `queued_jobs` where `jobs` is set, which
the fake runs as its SQL does over them (GitHub's jobs, each with `created_at` and, once a
runner took it, `started_at`): the jobs created more than 5 minutes and less than a week ago
still queued, `queue_s` their age in whole seconds, the longest first.

Whatever fails (no `parameters`, a query it does not have, one ClickHouse refuses) fails as it
does on the HUD: the route catches nothing (torchci's pages/api/clickhouse/[queryName].ts awaits
`queryClickhouseSaved` bare), so Next.js answers a 500 whose body is the text "Internal Server
Error" (its apiResolver's `sendError(apiRes, 500, 'Internal Server Error')`), never JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

# Each saved query's params.json: its parameters and their defaults (README of the fixtures).
PARAMS: dict[str, dict[str, Any]] = {
    "queued_jobs_aggregate": {
        "queuedThresholdMinutes": 30,
        "maxAgeDays": 3,
        "orgs": ["pytorch", "pytorch-labs", "meta-pytorch"],
        "repo": "",
        "runnerLabels": [],
    },
    "queued_jobs_by_label": {},
    "queued_jobs": {},
}
HISTORICAL = "queue_times_historical"
# Its params.json declares three, with no defaults: ClickHouse refuses a query missing one.
REQUIRED = {HISTORICAL: ("granularity", "startTime", "stopTime")}
LISTED_OVER_S, WEEK_S = 5 * 60, 7 * 86_400  # `queued_jobs` lists the jobs queued between
BUCKET_FORMAT = "%Y-%m-%dT%H:%M:%S"  # formatDateTime(…, '%Y-%m-%dT%H:%i:%s'): no zone, UTC


def crashed() -> Response:
    """Next.js's answer to an API route that threw: plain text, no content type."""
    return Response("Internal Server Error", status_code=500)


@dataclass
class FakeHud:
    token: str = "hud-bot-token"
    rows: dict[str, Any] = field(default_factory=dict)  # query name -> rows (or anything)
    seen: list[dict[str, Any]] = field(default_factory=list)  # parameters received
    asked: list[tuple[str, Any]] = field(default_factory=list)  # (query, parameters) received
    passed: list[dict[str, Any]] = field(default_factory=list)  # what the query ran with
    # `queue_times_historical`'s table: {"time": datetime, "avg_queue_s", "machine_type", "count"}
    history: list[dict[str, Any]] = field(default_factory=list)
    # `queued_jobs`'s table: the row's columns but `queue_s`, with `created_at` and `started_at`
    # (datetime, or None while queued) in their place.
    jobs: list[dict[str, Any]] | None = None

    @property
    def app(self) -> Starlette:
        async def query(request: Request) -> Response:
            if request.headers.get("x-hud-internal-bot") != self.token:
                return HTMLResponse("<html>Vercel Security Checkpoint</html>", status_code=403)
            name = request.path_params["name"]
            raw = request.query_params.get("parameters")
            if raw is None:  # JSON.parse(undefined) throws
                return crashed()
            try:
                parameters = json.loads(raw)
            except ValueError:
                return crashed()
            self.seen.append(parameters)
            self.asked.append((request.path_params["name"], parameters))
            if name in REQUIRED:
                given = parameters if isinstance(parameters, dict) else {}
                if any(k not in given for k in REQUIRED[name]):  # ClickHouse refuses the query
                    return crashed()
                try:
                    return JSONResponse(self._historical(given))
                except ValueError:  # a time ClickHouse cannot parse
                    return crashed()
            if name == "queued_jobs" and self.jobs is not None:
                return JSONResponse(self._queued(datetime.now(UTC)))
            if name not in self.rows:  # no such query.sql to read
                return crashed()
            declared = PARAMS.get(name, {})
            given = parameters if isinstance(parameters, dict) else {}
            self.passed.append({k: given.get(k, default) for k, default in declared.items()})
            return JSONResponse(self.rows[name])

        return Starlette(routes=[Route("/api/clickhouse/{name}", query)])

    def _queued(self, now: datetime) -> list[dict[str, Any]]:
        rows = []
        for job in self.jobs or ():
            started = job.get("started_at")
            queue_s = int((now - job["created_at"]).total_seconds())
            if (started is None or started > now) and LISTED_OVER_S < queue_s < WEEK_S:
                columns = {k: v for k, v in job.items() if k not in ("created_at", "started_at")}
                rows.append({"queue_s": queue_s, **columns})
        return sorted(rows, key=lambda row: -row["queue_s"])

    def _historical(self, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        start, stop = (_best_effort(str(parameters[k])) for k in ("startTime", "stopTime"))
        granularity = parameters["granularity"]
        buckets: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in self.history:
            if start <= row["time"] < stop:
                at = _start_of(row["time"], granularity).strftime(BUCKET_FORMAT)
                buckets.setdefault((at, row["machine_type"]), []).append(row)
        out = []
        for (at, machine), rows in sorted(buckets.items()):
            if sum(r["count"] for r in rows) / len(rows) > 5:  # HAVING avg(q.count) > 5
                mean = sum(r["avg_queue_s"] for r in rows) / len(rows)
                out.append({"granularity_bucket": at, "avg_queue_s": mean, "machine_type": machine})
        return out


def _best_effort(text: str) -> datetime:
    """parseDateTimeBestEffort, for the ISO forms a client sends (a naive one is UTC)."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _start_of(at: datetime, granularity: object) -> datetime:
    if granularity == "minute":
        return at.replace(second=0, microsecond=0)
    if granularity == "hour":
        return at.replace(minute=0, second=0, microsecond=0)
    return at.replace(hour=0, minute=0, second=0, microsecond=0)  # the query's default: day
