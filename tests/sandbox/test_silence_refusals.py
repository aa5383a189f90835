"""What Grafana's silence API (Alertmanager's API v2 under Grafana's prefix) refuses, as its
stand-in (`sandbox.silence_api`) must: one table.

Grafana checks in its order: the service account's token (401), the route's permissions before
the body is read (403, its access-control middleware's "Access denied" naming every permission
the route's evaluator wants: ngalert's `api/authorization.go`), then the new silence (400, "bad
request data" for a body that is not JSON, "silence failed validation" for one Alertmanager's
API would not take), and a silence it does not have (404, Alertmanager's "silence not found"
through pkg/api/response's Error). A refused request changes no silence.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from sandbox.silence_api import PREFIX, READ, FakeSilenceApi
from tests.support.refusals import Answer, Holding, Like, assert_answered

SILENCE = {
    "matchers": [{"name": "alertname", "value": "Queue", "isRegex": False, "isEqual": True}],
    "startsAt": "2030-01-01T00:00:00Z",
    "endsAt": "2030-01-01T01:00:00Z",
    "createdBy": "queuepilot",
    "comment": "test",
}
KNOWN = "known-silence"


@pytest.fixture
async def grafana() -> AsyncIterator[tuple[FakeSilenceApi, httpx.AsyncClient]]:
    api = FakeSilenceApi()
    api.silences[KNOWN] = {**SILENCE, "id": KNOWN, "status": {"state": "active"}}
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(
        transport=transport, base_url=f"http://grafana.test{PREFIX}"
    ) as http:
        yield api, http


def denied(wanted: str) -> Answer:
    message = (
        f"You'll need additional permissions to perform this action. Permissions needed: {wanted}"
    )
    return Answer(403, Holding(title="Access denied", message=message))


def failed_validation(why: str = ".+") -> Answer:
    return Answer(400, {"message": Like(f"silence failed validation: {why}")})


READING = "any of alert.instances:read, alert.silences:read"
EXPIRING = "any of alert.instances:write, alert.silences:write"
CREATING = (
    "any of alert.instances:create, alert.instances:write, alert.silences:create, "
    "alert.silences:write"
)
TO_CREATE, TO_EXPIRE = f"all of {READING}, {CREATING}", f"all of {READING}, {EXPIRING}"
EDITOR: frozenset[str] | None = None  # the token's permissions left as they are
MATCHER = SILENCE["matchers"][0]
# (the token's permissions, the request), Grafana's answer
ROWS: list[tuple[str, frozenset[str] | None, dict[str, Any], Answer]] = [
    ("no token", EDITOR, {"method": "POST", "url": "/silences", "json": SILENCE,
                          "headers": {"Authorization": ""}},
     Answer(401, {"message": Like("(?i)invalid API key")})),
    ("creating with a Viewer's permissions", frozenset(READ),
     {"method": "POST", "url": "/silences", "json": SILENCE}, denied(TO_CREATE)),
    # The permissions come first: a body it would refuse is not read.
    ("a bad body with a Viewer's permissions", frozenset(READ),
     {"method": "POST", "url": "/silences", "content": b"{"}, denied(TO_CREATE)),
    ("expiring with a Viewer's permissions", frozenset(READ),
     {"method": "DELETE", "url": f"/silence/{KNOWN}"}, denied(TO_EXPIRE)),
    ("listing with none", frozenset(), {"method": "GET", "url": "/silences"}, denied(READING)),
    ("a body that is not JSON", EDITOR, {"method": "POST", "url": "/silences", "content": b"{",
                                         "headers": {"Content-Type": "application/json"}},
     Answer(400, {"message": "bad request data"})),
    ("a body that is no object", EDITOR, {"method": "POST", "url": "/silences", "json": [1]},
     failed_validation()),
    *((f"no {key}", EDITOR, {"method": "POST", "url": "/silences",
                            "json": {k: v for k, v in SILENCE.items() if k != key}},
       failed_validation(f".*{key}.*"))
      for key in SILENCE),
    ("no matcher", EDITOR,
     {"method": "POST", "url": "/silences", "json": {**SILENCE, "matchers": []}},
     failed_validation(".*matchers.*")),
    ("a matcher without isEqual", EDITOR, {"method": "POST", "url": "/silences", "json": {
        **SILENCE, "matchers": [{k: v for k, v in MATCHER.items() if k != "isEqual"}]}},
     failed_validation(".*matchers.*")),
    ("a time that is not RFC 3339", EDITOR, {"method": "POST", "url": "/silences", "json": {
        **SILENCE, "startsAt": "tomorrow"}}, failed_validation(".*RFC 3339.*")),
    ("a time without its offset", EDITOR, {"method": "POST", "url": "/silences", "json": {
        **SILENCE, "endsAt": "2030-01-01T01:00:00"}}, failed_validation(".*RFC 3339.*")),
    ("an end before the start", EDITOR, {"method": "POST", "url": "/silences", "json": {
        **SILENCE, "endsAt": "2029-12-31T23:00:00Z"}}, failed_validation(".*endsAt.*")),
    ("expiring a silence it does not have", EDITOR,
     {"method": "DELETE", "url": "/silence/no-such-silence"},
     Answer(404, {"message": "silence not found"})),
    ("reading a silence it does not have", EDITOR,
     {"method": "GET", "url": "/silence/no-such-silence"},
     Answer(404, {"message": "silence not found"})),
    # The stand-in's switch: the next call fails as Grafana says it did.
    ("a call Grafana fails", EDITOR, {"method": "GET", "url": "/silences",
                                      "fail": (500, "database is locked")},
     Answer(500, {"message": "database is locked"})),
]  # fmt: skip


@pytest.mark.parametrize(
    ("permissions", "request_", "expected"),
    [pytest.param(p, r, e, id=name) for name, p, r, e in ROWS],
)
async def test_grafana_refuses_it_so(
    grafana: tuple[FakeSilenceApi, httpx.AsyncClient],
    permissions: frozenset[str] | None,
    request_: dict[str, Any],
    expected: Answer,
) -> None:
    api, http = grafana
    if permissions is not None:
        api.permissions = permissions
    request_ = dict(request_)
    if "fail" in request_:
        api.fail_next(*request_.pop("fail"))
    headers = {"Authorization": f"Bearer {api.token}", **request_.pop("headers", {})}
    before = copy.deepcopy(api.silences)

    answer = await http.request(**request_, headers=headers)

    assert_answered(Answer.of(answer), expected)
    assert api.silences == before, "a refused request changes nothing"
