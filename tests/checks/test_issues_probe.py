"""`queuepilot check` with GITHUB_ISSUES_REPO: the repository as the token sees it, against the
strict GitHub stand-in: fine, unknown to the token, issues turned off, a token GitHub refuses."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from bot.checks import Verdict
from bot.checks.run import probe_all
from bot.config import Settings
from sandbox.github_issues import TOKEN, GithubIssues
from sandbox.serve import serve_in_thread

REPO = "pytorch/alerting-issues"


@pytest.fixture
def github() -> Iterator[GithubIssues]:
    stand_in = GithubIssues()
    with serve_in_thread(stand_in.app) as server:
        stand_in.base_url = server.url
        yield stand_in


def issue_settings(
    settings_for: Callable[..., Settings], github: GithubIssues, **changes: object
) -> Settings:
    values = {"github_token": TOKEN, "github_api_url": github.base_url, "github_issues_repo": REPO}
    return settings_for(**{**values, **changes})


async def issues_findings(settings: Settings) -> list[tuple[Verdict, str, str]]:
    found = await probe_all(settings, {})
    return [(f.verdict, f.detail, f.fix) for f in found if f.subject == "github issues"]


async def test_a_repository_the_token_reads_is_ok_and_says_what_happens(
    settings_for: Callable[..., Settings], github: GithubIssues
) -> None:
    github.repo(REPO)
    github.seed_issue(REPO, "[P2] Disk full", labels=("area:alerting",))
    [(verdict, detail, _)] = await issues_findings(issue_settings(settings_for, github))
    assert verdict is Verdict.OK
    assert detail == f"{REPO}: 1 open area:alerting issues; the alert's is linked, not opened"


async def test_an_unknown_repository_fails_naming_the_permission(
    settings_for: Callable[..., Settings], github: GithubIssues
) -> None:
    [(verdict, detail, fix)] = await issues_findings(issue_settings(settings_for, github))
    assert verdict is Verdict.FAIL
    assert "404" in detail and "(or it does not exist)" in detail
    assert '"Issues" (read and write)' in fix


async def test_issues_turned_off_fail_with_the_fix(
    settings_for: Callable[..., Settings], github: GithubIssues
) -> None:
    github.repo(REPO, has_issues=False)
    [(verdict, detail, fix)] = await issues_findings(issue_settings(settings_for, github))
    assert verdict is Verdict.FAIL
    assert "410" in detail or "turned off" in detail
    assert fix


async def test_a_token_github_refuses_fails(
    settings_for: Callable[..., Settings], github: GithubIssues
) -> None:
    github.repo(REPO)
    settings = issue_settings(settings_for, github, github_token="ghp_wrong")
    [(verdict, detail, fix)] = await issues_findings(settings)
    assert verdict is Verdict.FAIL
    assert "401" in detail and "Bad credentials" in detail
    assert fix
