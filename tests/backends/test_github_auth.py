"""A GitHub App's installation token, against the strict stand-in (`sandbox.github_issues`): the
JWT is one GitHub takes (the stand-in checks its signature and claims), the token is minted once
and reused, renewed a few minutes before it expires, renewed once when GitHub refuses it, and
concurrent callers share one mint; a token as given is never retried."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from bot.backends.github_api import (
    HEADERS,
    RENEW_BEFORE_S,
    AppInstallationToken,
    GithubApi,
    app_jwt,
)
from bot.backends.http import BackendError
from bot.config import Settings
from sandbox.github_apps import AppToken, Installation
from sandbox.github_issues import TOKEN, GithubIssues
from tests.sandbox.test_github_issues import START, Clock
from tests.support.github_app import APP_ID, key, private_pem, public_pem
from tests.support.running import eventually

REPO = "pytorch/alerting-issues"
BASE = "http://api.gh.test"


def app_settings(**values: object) -> Settings:
    """The App, found installed on REPO (`GITHUB_ISSUES_REPO`)."""
    app = {"github_app_id": APP_ID, "github_app_private_key": private_pem()}
    return Settings(**{**app, "github_issues_repo": REPO, "github_api_url": BASE, **values})


CONFIG = app_settings()


@pytest.fixture
def clock() -> Clock:
    """One clock for GitHub and the bot: the JWT's times and the token's expiry agree."""
    return Clock(START)


@pytest.fixture
def gh(clock: Clock) -> GithubIssues:
    stand_in = GithubIssues(base_url=BASE, clock=clock)
    stand_in.repo(REPO)
    stand_in.apps.register(APP_ID, public_pem())
    stand_in.apps.install(APP_ID, "pytorch", repos=(REPO,))
    return stand_in


def source(gh: GithubIssues, clock: Clock, config: Settings = CONFIG) -> AppInstallationToken:
    return AppInstallationToken(config, clock=clock, transport=httpx.ASGITransport(app=gh.app))


@pytest.fixture
async def api(gh: GithubIssues, clock: Clock) -> AsyncIterator[GithubApi]:
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=gh.app), base_url=BASE, headers=HEADERS
    )
    github = GithubApi(Settings(github_api_url=BASE), client, auth=source(gh, clock), clock=clock)
    yield github
    await github.aclose()


def auth_of(api: GithubApi) -> AppInstallationToken:
    auth = api._auth
    assert isinstance(auth, AppInstallationToken)
    return auth


def mints(gh: GithubIssues) -> list[tuple[str, str, int]]:
    return [call for call in gh.calls if call[1].endswith("/access_tokens")]


def test_the_jwt_is_rs256_issued_a_minute_back_and_good_for_ten_minutes_from_then() -> None:
    header, claims, _ = app_jwt(APP_ID, key(), START).split(".")

    assert decoded(header) == {"alg": "RS256", "typ": "JWT"}
    assert decoded(claims) == {"iat": int(START) - 60, "exp": int(START) + 540, "iss": APP_ID}


def decoded(part: str) -> object:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


async def test_the_token_is_minted_with_a_jwt_github_takes_and_reused(
    gh: GithubIssues, api: GithubApi
) -> None:
    first, _ = await api.get(f"/repos/{REPO}/issues")
    again, _ = await api.get(f"/repos/{REPO}")

    assert first == [] and again["full_name"] == REPO
    # Found by the repository (the JWT passed the stand-in's signature and claims), minted once.
    assert [c[:2] for c in gh.calls[:2]] == [
        ("GET", f"/repos/{REPO}/installation"),
        ("POST", f"/app/installations/{auth_of(api).grant.installation_id}/access_tokens"),
    ]
    assert gh.calls[1][2] == 201
    assert len(mints(gh)) == 1 and gh.apps.minted == 1
    grant = auth_of(api).grant
    assert grant is not None and grant.permissions["issues"] == "write"
    assert grant.repository_selection == "selected"


async def test_the_token_is_renewed_a_few_minutes_before_it_expires(
    gh: GithubIssues, api: GithubApi, clock: Clock
) -> None:
    await api.get(f"/repos/{REPO}")
    clock.now += 3600 - RENEW_BEFORE_S - 1
    await api.get(f"/repos/{REPO}")
    assert len(mints(gh)) == 1

    clock.now += 1
    body, _ = await api.get(f"/repos/{REPO}")
    assert body["full_name"] == REPO
    # An installation already known is not looked up again.
    assert len(mints(gh)) == 2
    assert sum(path.endswith("/installation") for _, path, _ in gh.calls) == 1


async def test_a_revoked_token_is_replaced_once_and_the_call_made_again(
    gh: GithubIssues, api: GithubApi
) -> None:
    await api.get(f"/repos/{REPO}")
    [old] = gh.apps.tokens
    gh.apps.revoke(old)

    body, _ = await api.get(f"/repos/{REPO}/issues")

    assert body == []
    assert [status for _, _, status in gh.calls[-3:]] == [401, 201, 200]
    assert len(mints(gh)) == 2


async def test_a_token_github_keeps_refusing_is_tried_once_more_only(
    gh: GithubIssues, api: GithubApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    await api.get(f"/repos/{REPO}")
    gh.apps.tokens.clear()
    mint = gh.apps.mint

    def refused_at_once(installation: Installation, now: float) -> tuple[str, AppToken]:
        token, minted = mint(installation, now)
        gh.apps.revoke(token)
        return token, minted

    # Every token minted from now on is refused (as for an installation being suspended).
    monkeypatch.setattr(gh.apps, "mint", refused_at_once)

    with pytest.raises(BackendError) as refused:
        await api.get(f"/repos/{REPO}/issues")

    assert refused.value.status == 401 and "Bad credentials" in str(refused.value)
    assert [status for _, _, status in gh.calls[-3:]] == [401, 201, 401]


async def test_a_token_as_given_is_not_tried_again(gh: GithubIssues) -> None:
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=gh.app), base_url=BASE, headers=HEADERS
    )
    api = GithubApi(Settings(github_token="ghp_revoked", github_api_url=BASE), client)
    with pytest.raises(BackendError) as refused:
        await api.get(f"/repos/{REPO}")
    await api.aclose()

    assert refused.value.status == 401 and not refused.value.retryable
    assert [status for _, _, status in gh.calls] == [401]
    assert TOKEN in gh.tokens  # the stand-in's own token still works: only this one was refused


async def test_concurrent_callers_share_one_mint(gh: GithubIssues, clock: Clock) -> None:
    tokens = source(gh, clock)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=gh.app), base_url=BASE, headers=HEADERS
    )
    api = GithubApi(Settings(github_api_url=BASE), client, auth=tokens, concurrency=4, clock=clock)
    gate = gh.hang_next(1)  # GitHub holds its first answer (the installation's lookup)
    callers = [asyncio.create_task(tokens.token()) for _ in range(4)]
    calls = [asyncio.create_task(api.get(f"/repos/{REPO}?n={n}")) for n in range(4)]
    # One asks GitHub and is held there; the rest, started before it, wait on that one.
    await eventually(lambda: gh.held == 1, what="the installation's lookup held by GitHub")
    assert tokens.minted == 0
    gate.set()
    got = await asyncio.gather(*callers)
    answers = await asyncio.gather(*calls)
    await api.aclose()

    assert len(set(got)) == 1 and tokens.minted == 1 and gh.apps.minted == 1
    assert all(body["full_name"] == REPO for body, _ in answers)


async def test_a_late_refusal_of_a_replaced_token_leaves_the_new_one_be(
    gh: GithubIssues, clock: Clock
) -> None:
    tokens = source(gh, clock)
    old = await tokens.token()
    gh.apps.revoke(old)

    assert tokens.invalidate(old)  # the first call GitHub refused: worth one more try
    new = await tokens.token()
    assert tokens.invalidate(old)  # a concurrent call's refusal of the same old token

    assert new != old and await tokens.token() == new
    assert tokens.minted == 2


async def test_an_installation_given_by_id_is_not_looked_up(gh: GithubIssues, clock: Clock) -> None:
    [installation] = gh.apps.installations
    tokens = source(gh, clock, app_settings(github_app_installation_id=installation))

    await tokens.token()

    assert [path for _, path, _ in gh.calls] == [f"/app/installations/{installation}/access_tokens"]


async def test_an_app_not_installed_where_it_is_looked_for_says_so_and_the_fix(
    gh: GithubIssues, clock: Clock
) -> None:
    gh.repo("pytorch/pytorch")
    elsewhere = app_settings(github_issues_repo="pytorch/pytorch")

    with pytest.raises(BackendError) as refused:
        await source(gh, clock, elsewhere).token()

    message = str(refused.value)
    assert "not installed on pytorch/pytorch" in message
    assert "GITHUB_APP_INSTALLATION_ID" in message and not refused.value.retryable


async def test_a_jwt_github_refuses_is_said_with_githubs_words(
    gh: GithubIssues, clock: Clock
) -> None:
    gh.apps.keys[APP_ID] = public_pem("other")  # the App's key was replaced on GitHub

    with pytest.raises(BackendError) as refused:
        await source(gh, clock).token()

    assert str(refused.value) == (
        "the GitHub App's token: GitHub answered 401: A JSON web token could not be decoded"
    )
    assert private_pem() not in repr(CONFIG) and "PRIVATE" not in repr(CONFIG)
