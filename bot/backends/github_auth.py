"""Where `GithubApi` gets each call's token: `GITHUB_TOKEN` as it is, or a GitHub App's
installation token, minted with a JSON Web Token signed by the App's key and renewed before it
expires, as GitHub's "Generating a JWT for a GitHub App" and "Generating an installation access
token" describe. Signing needs `cryptography` (the `github-app` extra), imported only when an App
is configured. No key, JWT or token ever goes into a message or a log.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import backend_client, bearer, iso_time, json_object, request
from bot.config import Settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

# GitHub refuses a request without a User-Agent, and asks for the app's name in it.
HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "queuepilot",
}
# GitHub's advice: `iat` a minute in the past, for clocks a little ahead of GitHub's; `exp` ten
# minutes after `iat`, GitHub's most.
CLOCK_DRIFT_S = 60
JWT_LIFETIME_S = 600
# An installation token lasts an hour: a new one is minted this long before it expires, so no
# call goes out with a token about to lapse (nor waits on a mint at the last moment).
RENEW_BEFORE_S = 300.0
UNEXPECTED = "GitHub answered with an unexpected shape"


class TokenSource(Protocol):
    async def token(self) -> str: ...

    def invalidate(self, token: str) -> bool:
        """GitHub refused `token` (401): forget it; whether another may be had, and so whether
        the call is worth one more try (a token as given: no)."""
        ...


class StaticToken:
    """`GITHUB_TOKEN`: the same token for every call, until an operator replaces it."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __repr__(self) -> str:
        return "StaticToken(•••)"

    async def token(self) -> str:
        return self._token

    def invalidate(self, token: str) -> bool:
        return False


def installation_of(config: Settings) -> str:
    """Where the App's installation is asked for without GITHUB_APP_INSTALLATION_ID: on
    GITHUB_ISSUES_REPO, else the first of GITHUB_REPOS, else GITHUB_ORG; "" when none is set."""
    repo = config.github_issues_repo or next(iter(config.github_repos), "")
    if repo:
        return f"/repos/{repo}/installation"
    return f"/orgs/{config.github_org}/installation" if config.github_org else ""


@dataclass(frozen=True)
class Grant:
    """What GitHub granted the installation token, for `queuepilot check`."""

    installation_id: int
    permissions: Mapping[str, str]
    repository_selection: str
    expires_at: float  # epoch seconds


class AppInstallationToken:
    """A GitHub App installation's token, minted when first asked for and reused until a few
    minutes before it expires (or GitHub refuses it): one mint at a time, shared by whoever asks
    meanwhile."""

    def __init__(
        self,
        config: Settings,
        *,
        clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        key = config.github_app_private_key
        self._config = config
        self._key = _private_key(key.get_secret_value() if key is not None else "")
        self._clock = clock  # epoch seconds, as the JWT's claims and `expires_at`
        self._transport = transport
        self._installation_id = config.github_app_installation_id
        self._token: str | None = None
        self._lock = asyncio.Lock()
        self.grant: Grant | None = None
        self.minted = 0

    def __repr__(self) -> str:
        return f"AppInstallationToken(app_id={self._config.github_app_id!r})"

    async def token(self) -> str:
        async with self._lock:  # a caller waiting here takes the token just minted
            renew_at = self.grant.expires_at - RENEW_BEFORE_S if self.grant else 0.0
            if self._token is None or self._clock() >= renew_at:
                await self._mint()
            return self._token  # type: ignore[return-value]

    def invalidate(self, token: str) -> bool:
        # A refusal of a token already replaced (a concurrent call's) leaves the new one be.
        if token == self._token:
            self._token = None
        return True

    async def _mint(self) -> None:
        config, timeout = self._config, self._config.backend_timeout_seconds
        github = backend_client(config.github_api_url, timeout, HEADERS, transport=self._transport)
        async with github:
            installation = self._installation_id or await self._find_installation(github)
            self._installation_id = installation
            url = f"/app/installations/{installation}/access_tokens"
            answer = await self._app_call(github, "POST", url, expect=(201,))
        token, expires_at = answer.get("token"), iso_time(answer.get("expires_at"))
        if not isinstance(token, str) or not token or expires_at is None:
            raise BackendError(UNEXPECTED, retryable=True)
        granted = answer.get("permissions")
        granted = granted if isinstance(granted, dict) else {}
        permissions = {str(name): str(level) for name, level in granted.items()}
        selection = str(answer.get("repository_selection") or "")
        self.grant = Grant(installation, permissions, selection, expires_at.timestamp())
        self._token = token
        self.minted += 1

    async def _find_installation(self, github: httpx.AsyncClient) -> int:
        where = installation_of(self._config)
        if not where:
            raise BackendError(
                "the GitHub App's installation is unknown: set GITHUB_APP_INSTALLATION_ID",
                retryable=False,
            )
        try:
            answer = await self._app_call(github, "GET", where, expect=(200,))
        except BackendError as exc:
            if exc.status != 404:
                raise
            on = where.removesuffix("/installation").split("/", 2)[-1]
            raise BackendError(
                f"the GitHub App is not installed on {on} (GET {where} answered 404): install "
                "it there, or set GITHUB_APP_INSTALLATION_ID",
                retryable=False,
                status=404,
            ) from None
        found = answer.get("id")
        if not isinstance(found, int) or isinstance(found, bool):
            raise BackendError(UNEXPECTED, retryable=True)
        return found

    async def _app_call(
        self, github: httpx.AsyncClient, method: str, url: str, *, expect: tuple[int, ...]
    ) -> dict[str, Any]:
        """A call as the App itself, with a JWT of its own (a JWT lasts minutes, a mint an
        instant: one per call keeps none lying about)."""
        jwt = app_jwt(self._config.github_app_id, self._key, self._clock())
        try:
            response = await request(
                github, "GitHub", method, url, headers=bearer(jwt), expect=expect
            )
        except BackendError as exc:
            raise BackendError(
                f"the GitHub App's token: {exc}",
                retryable=exc.retryable,
                status=exc.status,
                retry_after_s=exc.retry_after_s,
            ) from None
        return json_object(response, "GitHub")


def app_jwt(app_id: str, key: RSAPrivateKey, now: float) -> str:
    """RS256, `iat` a minute back, `exp` ten minutes on from `iat`, `iss` the App."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    issued = int(now) - CLOCK_DRIFT_S
    header = {"alg": "RS256", "typ": "JWT"}
    claims = {"iat": issued, "exp": issued + JWT_LIFETIME_S, "iss": app_id}
    signed = ".".join(
        _b64(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)
    )
    signature = key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signed}.{_b64(signature)}"


def _private_key(pem: str) -> RSAPrivateKey:
    """The App's key, which the settings checked is an RSA PEM (`bot.config.values`)."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    return cast("RSAPrivateKey", load_pem_private_key(pem.encode(), password=None))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
