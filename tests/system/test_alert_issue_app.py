"""The alert's GitHub issue with a GitHub App instead of GITHUB_TOKEN, end to end: the first
scenario of `test_alert_issue` (alerting-infra's issue found, linked from the root, told each
step once) with a real bot, against a stand-in that takes no personal token at all, only the
installation tokens it mints for the App's JWT."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.config import Settings
from sandbox.github_issues import GithubIssues as GithubStandIn
from sandbox.serve import serve_in_thread
from tests.support.github_app import APP_ID, private_pem, public_pem
from tests.support.slack import Slack
from tests.system import test_alert_issue as scenarios

REPO = scenarios.REPO


@pytest.fixture
def github() -> Iterator[GithubStandIn]:
    stand_in = GithubStandIn(tokens=set())  # no token but the App's installation tokens
    with serve_in_thread(stand_in.app) as server:
        stand_in.base_url = server.url
        stand_in.repo(REPO)
        stand_in.apps.register(APP_ID, public_pem())
        stand_in.apps.install(APP_ID, REPO.split("/")[0], repos=(REPO,))
        yield stand_in
        stand_in.reset_limits()  # nothing stays hung


@pytest.fixture
def app_settings(
    settings_for: Callable[..., Settings], github: GithubStandIn
) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values = {
            "github_token": None,
            "github_app_id": APP_ID,
            # As a Kubernetes Secret made --from-env-file carries it: one line, \n for breaks.
            "github_app_private_key": private_pem().strip().replace("\n", "\\n"),
            "github_api_url": github.base_url,
            "github_issues_repo": REPO,
            "github_issues_interval_ms": 20,
        }
        return settings_for(**{**values, **overrides})

    return make


async def test_alerting_infras_issue_is_found_linked_and_told_each_step_once_as_an_app(
    app_settings: Callable[..., Settings], github: GithubStandIn, slack: Slack
) -> None:
    await scenarios.test_alerting_infras_issue_is_found_linked_and_told_each_step_once(
        app_settings, github, slack
    )

    # Found on the repository, minted once, and every call made with it answered.
    installation = f"/repos/{REPO}/installation"
    assert [path for _, path, _ in github.calls].count(installation) == 1
    assert github.apps.minted == 1
    assert not [call for call in github.calls if call[2] in (401, 403)]
