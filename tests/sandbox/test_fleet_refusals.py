"""What the simulated fleet's real protocols refuse, as the real servers do: one table.

The fleet speaks Prometheus's HTTP API (its `bad_data` error, 400, in Prometheus's words for a
range query's bounds and resolution), Alertmanager's API v2 for silences (400 with the reason a
silence is refused, 404 for one it does not have, 500 when expiring one that already ended, as
Alertmanager's deleteSilence answers) and the HUD's `queued_jobs` route (Next.js's bare 500 when
the route throws). Its Kubernetes API is `sandbox.kube_api`, whose table is
test_kube_refusals.py. A refused request changes no silence and no scale set.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from sandbox.fleet import DEMO_BURSTS, DEMO_TYPES, Fleet
from sandbox.fleet_api import FleetApi, FleetApiConfig
from tests.support.refusals import Answer, Like, assert_answered

MATCHER = {"name": "a", "value": "b", "isRegex": False, "isEqual": True}
LATER = (datetime.now(UTC) + timedelta(days=365)).isoformat().replace("+00:00", "Z")
SILENCE = {"matchers": [MATCHER], "startsAt": "2020-01-01T00:00:00Z", "endsAt": LATER,
           "createdBy": "alice", "comment": "c"}  # fmt: skip
EXPIRED = "expired-silence"


@pytest.fixture
async def fleet() -> AsyncIterator[tuple[FleetApi, httpx.AsyncClient]]:
    api = FleetApi(Fleet(DEMO_TYPES, DEMO_BURSTS, speed=60), FleetApiConfig(rate_window="10m"))
    now = datetime.now(UTC)
    api.silences.create({**SILENCE, "id": EXPIRED}, now)
    api.silences.expire(EXPIRED, now)
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fleet.test") as http:
        yield api, http


def bad_data(error: str | Like) -> Answer:
    return Answer(400, {"status": "error", "errorType": "bad_data", "error": error})


def range_of(**params: str) -> dict[str, Any]:
    query = {"query": "up", "start": "0", "end": "600", "step": "60", **params}
    return {"method": "GET", "url": "/api/v1/query_range", "params": query}


def silence(body: object) -> dict[str, Any]:
    return {"method": "POST", "url": "/api/v2/silences", "json": body}


NOT_SERVED = Like("the simulated fleet answers only the prometheus backend's ARC queries.*")
THREW = Answer(500, "Internal Server Error", {"content-type": None})
ROWS: list[tuple[str, dict[str, Any], Answer]] = [
    # -- Prometheus
    ("a query the fleet does not serve", {"method": "GET", "url": "/api/v1/query",
                                          "params": {"query": "up"}}, bad_data(NOT_SERVED)),
    ("a range query the fleet does not serve", range_of(), bad_data(NOT_SERVED)),
    ("a range without its start", range_of(start="soon"),
     bad_data(Like('invalid parameter "start": cannot parse .*to a valid timestamp'))),
    ("a step of zero", range_of(step="0"), bad_data(
        "zero or negative query resolution step widths are not accepted. Try a positive integer")),
    ("an end before the start", range_of(start="10", end="5"),
     bad_data("end timestamp must not be before start time")),
    ("past 11,000 points", range_of(end="86400", step="1"), bad_data(
        "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query "
        "resolution (?step=XX)")),
    # -- Alertmanager's API v2
    ("an empty silence", silence({}), Answer(400, Like(".+"))),
    ("no matcher", silence({**SILENCE, "matchers": []}), Answer(400, Like(".*matchers.*"))),
    ("a matcher without isRegex", silence({**SILENCE, "matchers": [{"name": "a", "value": "("}]}),
     Answer(400, Like(".*matchers.*"))),
    ("a regular expression that does not compile", silence(
        {**SILENCE, "matchers": [{**MATCHER, "isRegex": True, "value": "("}]}),
     Answer(400, Like("invalid regular expression: .+"))),
    ("times that are not RFC 3339", silence({**SILENCE, "startsAt": "x", "endsAt": "y"}),
     Answer(400, Like(".*RFC 3339.*"))),
    ("an end in the past", silence({**SILENCE, "endsAt": "2020-01-01T01:00:00Z"}),
     Answer(400, "end time can't be in the past")),
    ("a body that is not JSON", {"method": "POST", "url": "/api/v2/silences", "content": b"{"},
     Answer(400, Like(".+"))),
    ("reading a silence it does not have", {"method": "GET", "url": "/api/v2/silence/nope"},
     Answer(404, "silence not found")),
    ("expiring a silence it does not have", {"method": "DELETE", "url": "/api/v2/silence/nope"},
     Answer(404, "silence not found")),
    ("expiring a silence that already ended",
     {"method": "DELETE", "url": f"/api/v2/silence/{EXPIRED}"},
     Answer(500, Like("silence .*already expired"))),
    # -- the HUD's queued_jobs
    ("the HUD without parameters", {"method": "GET", "url": "/api/clickhouse/queued_jobs"}, THREW),
    ("the HUD with parameters that are not JSON", {
        "method": "GET", "url": "/api/clickhouse/queued_jobs", "params": {"parameters": "{"}},
     THREW),
    ("a HUD query the fleet does not run", {"method": "GET", "url": "/api/clickhouse/other",
                                            "params": {"parameters": "{}"}}, THREW),
]  # fmt: skip


def held(api: FleetApi) -> object:
    silences = [(s.id, s.matchers, s.starts_at, s.ends_at) for s in api.silences.all()]
    return silences, copy.deepcopy(api.kube.sets)


@pytest.mark.parametrize(
    ("request_", "expected"), [pytest.param(r, e, id=name) for name, r, e in ROWS]
)
async def test_the_fleet_refuses_it_so(
    fleet: tuple[FleetApi, httpx.AsyncClient], request_: dict[str, Any], expected: Answer
) -> None:
    api, http = fleet
    before = held(api)

    answer = await http.request(**request_)

    assert_answered(Answer.of(answer), expected)
    assert held(api) == before, "a refused request changes nothing"
