"""The alert issue's backend (`bot.backends.issues`) against the GitHub stand-in: how it reads
GitHub's answers about one issue (moved, deleted, gone) and a 422 that names what was invalid."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from bot.backends.github_api import HEADERS, GithubApi
from bot.backends.http import BackendError
from bot.backends.issues import GithubIssues
from bot.config import Settings
from sandbox.github_issues import TOKEN
from sandbox.github_issues import GithubIssues as GithubStandIn

BASE = "http://api.gh.test"
REPO, ARCHIVE = "pytorch/alerting-issues", "pytorch/alerts-archive"


@pytest.fixture
def gh() -> GithubStandIn:
    stand_in = GithubStandIn(base_url=BASE, html_url_base="http://gh.test")
    stand_in.repo(REPO)
    stand_in.repo(ARCHIVE)
    return stand_in


@pytest.fixture
async def issues(gh: GithubStandIn) -> AsyncIterator[GithubIssues]:
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=gh.app), base_url=BASE, headers=HEADERS
    )
    api = GithubApi(Settings(github_api_url=BASE, github_token=TOKEN), client)
    yield GithubIssues(api, REPO)
    await api.aclose()


async def test_an_issue_is_read_where_it_is_now_and_none_once_deleted_or_gone(
    gh: GithubStandIn, issues: GithubIssues
) -> None:
    for title in ("moved", "deleted"):
        gh.seed_issue(REPO, title)
    gh.seed_issue(ARCHIVE, "older")
    gh.transfer_issue(REPO, 1, ARCHIVE)
    gh.delete_issue(REPO, 2)

    moved = await issues.issue(REPO, 1)
    assert moved is not None
    assert (moved.repo, moved.number, moved.title) == (ARCHIVE, 2, "moved")
    assert moved.url == "http://gh.test/pytorch/alerts-archive/issues/2"
    assert await issues.issue(REPO, 2) is None  # 410
    assert await issues.issue(REPO, 99) is None  # 404


async def test_a_422_names_what_github_found_invalid_and_is_not_retried(
    issues: GithubIssues,
) -> None:
    label = "Team:" + "x" * 46
    with pytest.raises(BackendError) as refused:
        await issues.create("[P2] Jobs queueing", "body", ("area:alerting", label))
    assert refused.value.status == 422 and not refused.value.retryable
    assert str(refused.value) == (
        f"GitHub answered 422: Validation Failed (Label name invalid ('{label}'))"
    )
