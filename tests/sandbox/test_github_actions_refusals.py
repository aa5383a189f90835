"""What GitHub's REST API for self-hosted runners and workflow jobs refuses, as its stand-in
(`tests.support.fakes.github_api`, the `github` metrics backend's GitHub) must: one table.

GitHub's refusals ("Troubleshooting the REST API", "Rate limits for the REST API"): 401 "Bad
credentials"; 403 for a fine-grained token without the permission; past the hour's quota 403 or
429 with `x-ratelimit-remaining: 0`; past a secondary limit a message of its own and maybe
`retry-after`; 404 for a run that is not there. Its answers to a client that reads them are
tested through the bot (tests/backends/test_github_metrics.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import httpx
import pytest

from tests.support.fakes.github_api import FakeGithub
from tests.support.refusals import Answer, Holding, Like, assert_answered

DOCS = "https://docs.github.com/rest"
LIMITS = f"{DOCS}/overview/rate-limits-for-the-rest-api"
RUNNERS = "/orgs/pytorch/actions/runners"
SUPPORT = r" If you reach out to GitHub Support for help, please include the request ID \S+\."


@pytest.fixture
async def github() -> AsyncIterator[tuple[FakeGithub, httpx.AsyncClient]]:
    fake = FakeGithub(base_url="http://api.gh.test")
    job = FakeGithub.job(11, ["linux.2xlarge"], "queued", "2025-06-15T15:06:40Z")
    fake.run("pytorch/pytorch", 1, "queued", [job])
    transport = httpx.ASGITransport(app=fake.app)
    headers = {"Authorization": f"Bearer {fake.token}"}
    async with httpx.AsyncClient(
        transport=transport, base_url=fake.base_url, headers=headers
    ) as http:
        yield fake, http


Switch = Callable[[FakeGithub], Any]


def nothing(fake: FakeGithub) -> None:
    return None


def limit(
    kind: Literal["primary", "secondary"], status: int, retry_after: int | None = None
) -> Switch:
    def switch(fake: FakeGithub) -> None:
        fake.limit, fake.limit_status, fake.retry_after = kind, status, retry_after

    return switch


def forbid(fake: FakeGithub) -> None:
    fake.forbidden.add(RUNNERS)


def past_limit(status: int, message: str, anchor: str = "", **headers: Any) -> Answer:
    body = {"message": Like(message + SUPPORT), "documentation_url": LIMITS + anchor}
    return Answer(status, body, headers)


PRIMARY = r"API rate limit exceeded for user ID \d+\."
SECONDARY = (
    r"You have exceeded a secondary rate limit\. Please wait a few minutes before you try again\."
)
ROWS: list[tuple[str, Switch, str, str | None, Answer]] = [
    ("a token GitHub does not know", nothing, RUNNERS, "Bearer ghp_wrong",
     Answer(401, Holding(message="Bad credentials"))),
    ("no token", nothing, RUNNERS, "", Answer(401, Holding(message="Bad credentials"))),
    ("no token for the quota", nothing, "/rate_limit", "",
     Answer(401, Holding(message="Bad credentials"))),
    ("a token without the permission", forbid, RUNNERS, None, Answer(403, {
        "message": "Resource not accessible by personal access token",
        "documentation_url": DOCS, "status": "403"})),
    *((f"past the hour's quota: {status}", limit("primary", status), RUNNERS, None,
       past_limit(status, PRIMARY, **{"x-ratelimit-remaining": "0"})) for status in (403, 429)),
    ("a secondary limit with retry-after", limit("secondary", 403, 60), RUNNERS, None,
     past_limit(403, SECONDARY, "#about-secondary-rate-limits", **{"retry-after": "60"})),
    ("a secondary limit without", limit("secondary", 429), "/repos/pytorch/pytorch/actions/runs",
     None, past_limit(429, SECONDARY, "#about-secondary-rate-limits", **{"retry-after": None})),
    ("the jobs of a run that is not there", nothing, "/repos/pytorch/pytorch/actions/runs/9/jobs",
     None, Answer(404, Holding(message="Not Found"))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("switch", "path", "authorization", "expected"),
    [
        pytest.param(switch, path, auth, expected, id=name)
        for name, switch, path, auth, expected in ROWS
    ],
)
async def test_github_refuses_it_so(
    github: tuple[FakeGithub, httpx.AsyncClient],
    switch: Switch,
    path: str,
    authorization: str | None,
    expected: Answer,
) -> None:
    fake, http = github
    switch(fake)
    headers = {} if authorization is None else {"Authorization": authorization}
    assert_answered(Answer.of(await http.get(path, headers=headers)), expected)
