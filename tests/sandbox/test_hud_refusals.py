"""What the PyTorch HUD's `/api/clickhouse/<query>` route refuses, as its stand-in
(`tests.support.fakes.hud_api`) must: one table.

Without the bot header, the bot protection in front of it answers an HTML challenge page, as
Vercel does. Past it, torchci's pages/api/clickhouse/[queryName].ts catches nothing, so whatever
throws (JSON.parse of `parameters`, reading a query's files, ClickHouse refusing the query)
reaches Next.js's apiResolver, which answers `sendError(apiRes, 500, 'Internal Server Error')`:
that text, with no content type.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.fakes.hud_api import FakeHud
from tests.support.refusals import Answer, Like, assert_answered

THREW = Answer(500, "Internal Server Error", {"content-type": None})
HISTORICAL = "queue_times_historical"
# (the query, its `parameters`, the bot header sent), the HUD's answer
ROWS: list[tuple[str, str, str | None, bool, Answer]] = [
    ("no bot header", "queued_jobs", "{}", False,
     Answer(403, Like(".*Vercel Security Checkpoint.*"), {"content-type": Like("text/html.*")})),
    ("no parameters", "queued_jobs", None, True, THREW),
    ("parameters that are not JSON", "queued_jobs", "{not json", True, THREW),
    ("a query the HUD does not have", "no_such_query", "{}", True, THREW),
    ("a parameter the query needs left out", HISTORICAL, '{"granularity": "hour"}', True, THREW),
    ("a time ClickHouse cannot read", HISTORICAL,
     '{"granularity": "hour", "startTime": "soon", "stopTime": "later"}', True, THREW),
]  # fmt: skip


@pytest.fixture
async def hud() -> AsyncIterator[tuple[FakeHud, httpx.AsyncClient]]:
    fake = FakeHud(rows={"queued_jobs": []})
    transport = httpx.ASGITransport(app=fake.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://hud.test") as http:
        yield fake, http


@pytest.mark.parametrize(
    ("query", "parameters", "as_bot", "expected"),
    [pytest.param(q, p, b, e, id=name) for name, q, p, b, e in ROWS],
)
async def test_the_hud_refuses_it_so(
    hud: tuple[FakeHud, httpx.AsyncClient],
    query: str,
    parameters: str | None,
    as_bot: bool,
    expected: Answer,
) -> None:
    fake, http = hud
    params = {} if parameters is None else {"parameters": parameters}
    headers = {"x-hud-internal-bot": fake.token} if as_bot else {}
    answer = await http.get(f"/api/clickhouse/{query}", params=params, headers=headers)
    assert_answered(Answer.of(answer), expected)
