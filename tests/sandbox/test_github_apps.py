"""The GitHub stand-in's Apps answer as GitHub does ("Generating a JSON Web Token (JWT) for a
GitHub App", "Generating an installation access token", "REST API endpoints for GitHub Apps"): a
JWT is checked for its key, its algorithm and its times, with GitHub's words; the installation is
found for a repository or an organization; its token lasts an hour, reads and writes as the
installation's permissions allow, and sees its repositories only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from sandbox.github_apps import EXPIRED, NOT_DECODED, NOT_ISSUED, TOO_FAR
from sandbox.github_issues import GithubIssues
from tests.sandbox.test_github_issues import HEADERS, START, Clock
from tests.support.github_app import APP_ID, CLIENT_ID, public_pem, signed

REPO = "pytorch/alerting-issues"


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def gh(clock: Clock) -> GithubIssues:
    api = GithubIssues(base_url="http://api.gh.test", clock=clock)
    api.repo(REPO)
    api.repo("pytorch/pytorch")
    api.repo("meta/private")
    api.apps.register(APP_ID, public_pem(), client_id=CLIENT_ID)
    return api


@pytest.fixture
async def http(gh: GithubIssues) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=gh.app)
    async with httpx.AsyncClient(transport=transport, base_url=gh.base_url, headers=HEADERS) as c:
        yield c


def jwt(now: float, *, which: str = "app", alg: str = "RS256", **claims: Any) -> str:
    """The App's JWT as GitHub asks for it, but for the claims, key or algorithm given."""
    usual = {"iat": int(now) - 60, "exp": int(now) + 540, "iss": APP_ID}
    return signed({**usual, **claims}, which=which, alg=alg)


def bearer(token: str, scheme: str = "Bearer") -> dict[str, str]:
    return {"Authorization": f"{scheme} {token}"}


async def test_the_app_finds_its_installation_on_a_repository_or_an_organization(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    on_repo = gh.apps.install(APP_ID, "pytorch", repos=(REPO,))
    on_org = gh.apps.install(APP_ID, "meta")

    by_repo = await http.get(f"/repos/{REPO}/installation", headers=bearer(jwt(clock.now)))
    by_org = await http.get("/orgs/meta/installation", headers=bearer(jwt(clock.now)))
    # By its client ID too: GitHub recommends it as `iss`.
    by_client = await http.get(
        f"/repos/{REPO}/installation", headers=bearer(jwt(clock.now, iss=CLIENT_ID))
    )
    elsewhere = await http.get(
        "/repos/pytorch/pytorch/installation", headers=bearer(jwt(clock.now))
    )

    assert by_repo.status_code == 200 and by_repo.json()["id"] == on_repo.id
    assert by_repo.json()["repository_selection"] == "selected"
    assert by_repo.json()["account"]["login"] == "pytorch"
    assert by_repo.json()["permissions"] == {"issues": "write", "metadata": "read",
                                             "actions": "read"}  # fmt: skip
    assert by_org.json()["id"] == on_org.id and by_org.json()["repository_selection"] == "all"
    assert by_client.json()["id"] == on_repo.id
    assert elsewhere.status_code == 404  # installed on another of pytorch's repositories


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (lambda now: bearer(jwt(now, exp=int(now) + 601)), TOO_FAR),
        (lambda now: bearer(jwt(now, iat=int(now) - 700, exp=int(now) - 1)), EXPIRED),
        (lambda now: bearer(jwt(now, exp=str(int(now) + 60))), EXPIRED),
        (lambda now: bearer(jwt(now, iat=int(now) + 30)), NOT_ISSUED),
        # Signed by a key the App does not have, or naming another App: not decoded either.
        (lambda now: bearer(jwt(now, which="other")), NOT_DECODED),
        (lambda now: bearer(jwt(now, iss="999")), NOT_DECODED),
        (lambda now: bearer(jwt(now, alg="HS256")), NOT_DECODED),
        # A JWT goes as Bearer only; a token is no JWT.
        (lambda now: bearer(jwt(now), scheme="token"), NOT_DECODED),
        (lambda now: bearer("ghp_a-personal-token"), NOT_DECODED),
        (lambda now: bearer("e30.e30.e30"), NOT_DECODED),
    ],
)
async def test_a_jwt_github_would_not_take_is_refused_with_its_words(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock, authorization: Any, message: str
) -> None:
    installation = gh.apps.install(APP_ID, "pytorch")

    for path in (f"/repos/{REPO}/installation", "/orgs/pytorch/installation"):
        answer = await http.get(path, headers=authorization(clock.now))
        assert answer.status_code == 401, path
        assert answer.json()["message"] == message
    minted = await http.post(
        f"/app/installations/{installation.id}/access_tokens", headers=authorization(clock.now)
    )
    assert minted.status_code == 401 and minted.json()["message"] == message
    assert gh.apps.minted == 0


async def test_an_installation_token_lasts_an_hour_with_the_installations_permissions(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    installation = gh.apps.install(APP_ID, "pytorch", repos=(REPO,))

    answer = await http.post(
        f"/app/installations/{installation.id}/access_tokens", headers=bearer(jwt(clock.now))
    )

    assert answer.status_code == 201
    body = answer.json()
    assert body["token"].startswith("ghs_")
    assert body["expires_at"] == "2025-06-15T16:06:40Z"  # START and an hour
    assert body["permissions"] == installation.permissions
    assert body["repository_selection"] == "selected"
    token = bearer(body["token"])
    created = await http.post(f"/repos/{REPO}/issues", json={"title": "t"}, headers=token)
    assert created.status_code == 201
    # Its repositories only: another one is hidden, as GitHub hides what a token may not see.
    assert (await http.get("/repos/pytorch/pytorch/issues", headers=token)).status_code == 404
    clock.now += 3599
    assert (await http.get(f"/repos/{REPO}/issues", headers=token)).status_code == 200
    clock.now += 1
    lapsed = await http.get(f"/repos/{REPO}/issues", headers=token)
    assert lapsed.status_code == 401 and lapsed.json()["message"] == "Bad credentials"


async def test_an_installation_with_issues_read_may_not_write_them(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    installation = gh.apps.install(
        APP_ID, "pytorch", permissions={"issues": "read", "metadata": "read"}
    )
    body = (
        await http.post(
            f"/app/installations/{installation.id}/access_tokens", headers=bearer(jwt(clock.now))
        )
    ).json()
    token = bearer(body["token"])

    listed = await http.get(f"/repos/{REPO}/issues", headers=token)
    refused = await http.post(f"/repos/{REPO}/issues", json={"title": "t"}, headers=token)

    assert listed.status_code == 200
    assert refused.status_code == 403
    assert refused.json()["message"] == "Resource not accessible by integration"
    assert refused.headers["x-accepted-github-permissions"] == "issues=write"


async def test_a_token_is_minted_only_for_the_apps_own_installation(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    gh.apps.register("777", public_pem("other"))
    theirs = gh.apps.install("777", "pytorch")

    answer = await http.post(
        f"/app/installations/{theirs.id}/access_tokens", headers=bearer(jwt(clock.now))
    )
    unknown = await http.post("/app/installations/1/access_tokens", headers=bearer(jwt(clock.now)))

    assert answer.status_code == 404 and unknown.status_code == 404
    assert gh.apps.minted == 0


async def test_a_revoked_token_is_bad_credentials(
    gh: GithubIssues, http: httpx.AsyncClient, clock: Clock
) -> None:
    installation = gh.apps.install(APP_ID, "pytorch")
    url = f"/app/installations/{installation.id}/access_tokens"
    token = (await http.post(url, headers=bearer(jwt(clock.now)))).json()["token"]

    gh.apps.revoke(token)

    answer = await http.get(f"/repos/{REPO}/issues", headers=bearer(token))
    assert answer.status_code == 401 and answer.json()["message"] == "Bad credentials"
