"""`queuepilot check` with a GitHub App, against the strict stand-in served for real: one line
says which installation the App's token is for and what it was granted; it fails, with the fix,
when the grant lacks what a configured reader needs (Issues: write for GITHUB_ISSUES_REPO), when
GitHub refuses the App's JWT, or when the App is not installed where it is looked for."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.checks import Verdict
from bot.checks.github import APP, probe_app
from bot.checks.run import probes
from bot.config import Settings, load_settings
from sandbox.github_issues import GithubIssues
from sandbox.serve import serve_in_thread
from tests.support.github_app import APP_ID, private_pem, public_pem

REPO = "pytorch/alerting-issues"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower() in Settings.model_fields:
            monkeypatch.delenv(name)


@pytest.fixture
def github() -> Iterator[GithubIssues]:
    stand_in = GithubIssues()
    with serve_in_thread(stand_in.app) as server:
        stand_in.base_url = server.url
        stand_in.repo(REPO)
        stand_in.apps.register(APP_ID, public_pem())
        yield stand_in


@pytest.fixture
def app_settings(github: GithubIssues) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values = {
            "github_app_id": APP_ID,
            "github_app_private_key": private_pem(),
            "github_api_url": github.base_url,
            "github_issues_repo": REPO,
        }
        return load_settings(_env_file=None, **{**values, **overrides})

    return make


async def test_the_installation_and_its_grant_are_said(
    github: GithubIssues, app_settings: Callable[..., Settings]
) -> None:
    installation = github.apps.install(APP_ID, "pytorch", repos=(REPO,))

    [found] = await probe_app(app_settings())

    assert found.verdict is Verdict.OK and found.subject == APP
    assert found.detail == (
        f"installation {installation.id} (some repositories) granted actions: read, "
        "issues: write, metadata: read"
    )
    assert APP in probes(app_settings(), {}, None)  # type: ignore[arg-type]


async def test_issues_read_only_fails_with_the_fix_when_the_issue_is_configured(
    github: GithubIssues, app_settings: Callable[..., Settings]
) -> None:
    github.apps.install(APP_ID, "pytorch", permissions={"issues": "read", "metadata": "read"})

    [found] = await probe_app(app_settings())
    [metrics_only] = await probe_app(
        app_settings(github_issues_repo="", metrics_backend="github", github_org="pytorch")
    )

    assert found.verdict is Verdict.FAIL
    assert found.detail.endswith(
        'granted issues: read, metadata: read; missing "Issues" (write, for GITHUB_ISSUES_REPO)'
    )
    assert found.fix.startswith('give the App "Issues" (write, for GITHUB_ISSUES_REPO)')
    assert "approve the new permissions on the installation" in found.fix
    # Without the issue, Issues is not needed; the org's runners are.
    assert metrics_only.verdict is Verdict.FAIL
    assert 'missing "Self-hosted runners" (read, for GITHUB_ORG\'s runners)' in metrics_only.detail
    assert "Issues" not in metrics_only.detail.partition("missing")[2]


async def test_a_key_github_does_not_know_fails_naming_the_settings_and_the_clock(
    github: GithubIssues, app_settings: Callable[..., Settings]
) -> None:
    github.apps.install(APP_ID, "pytorch")
    github.apps.keys[APP_ID] = public_pem("other")

    [found] = await probe_app(app_settings())

    assert found.verdict is Verdict.FAIL
    assert "401: A JSON web token could not be decoded" in found.detail
    assert "GITHUB_APP_PRIVATE_KEY" in found.fix and "clock" in found.fix


async def test_an_app_not_installed_on_the_repository_fails_with_where_to_install_it(
    github: GithubIssues, app_settings: Callable[..., Settings]
) -> None:
    github.apps.install(APP_ID, "meta")

    [found] = await probe_app(app_settings())

    assert found.verdict is Verdict.FAIL
    assert f"not installed on {REPO}" in found.detail
    assert "GITHUB_APP_INSTALLATION_ID" in found.fix
