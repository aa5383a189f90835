"""GitHub's REST API as the readings and the alert's issue speak it: ETags, `link` pagination, rate
limits (one met stops every call of the client), a token or a GitHub App's installation token. No
key, JWT or token ever goes into a message or a log."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import httpx

from bot.backends.http import (
    BackendError,
    Counted,
    HttpBackend,
    backend_client,
    bearer,
    error_of,
    json_object,
    json_of,
    number_of,
    request,
    uncounted,
)
from bot.config import Settings
from bot.config.memory import DEFAULT_CACHES
from bot.domain.alerting.alerts import time_of
from bot.pacing import Backoff

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

# GitHub refuses a request without a User-Agent, and asks for the app's name in it.
HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "queuepilot",
}
# GitHub's advice: `iat` a minute back, for clocks ahead of GitHub's; `exp` ten minutes on.
CLOCK_DRIFT_S = 60
JWT_LIFETIME_S = 600
# An installation token lasts an hour: renewed early, so no call goes out with one about to lapse.
RENEW_BEFORE_S = 300.0
UNEXPECTED = "GitHub answered with an unexpected shape"
CACHE_BYTES = DEFAULT_CACHES["github_readings"]
# A secondary limit that names no time: GitHub says wait at least a minute, exponentially longer
# while it continues. The backoff waits half its step to all of it: two minutes wait at least one.
SECONDARY_FIRST_S = 120.0
SECONDARY_MAX_S = 900.0
# A reading asks for one `/jobs` page per active run: a busy organization has hundreds, rarely past
# a thousand. A page is kept as GitHub's bytes (100-300 KB for 100 jobs), within its memory share.
MAX_ENTRIES = 4096


@dataclass(frozen=True)
class Rate:
    """GitHub's primary rate limit as its answers state it (`x-ratelimit-*`)."""

    limit: int
    remaining: int
    reset: float  # epoch seconds


def rate_of(headers: Mapping[str, str]) -> Rate | None:
    """The `core` quota an answer states; None for none, another resource's, or nonsense."""
    resource = headers.get("x-ratelimit-resource", "core")
    limit, remaining, reset = (
        _count(headers.get(f"x-ratelimit-{name}")) for name in ("limit", "remaining", "reset")
    )
    if resource != "core" or limit is None or remaining is None or reset is None or limit < 1:
        return None
    return Rate(limit, min(remaining, limit), float(reset))


def _count(value: str | None) -> int | None:
    said = (value or "").strip()
    return int(said) if said.isascii() and said.isdigit() else None


@dataclass(frozen=True)
class Page:
    etag: str
    content: bytes  # as GitHub sent it
    next_url: str | None


class EtagCache:
    """The pages GitHub answered, kept for their ETag (a 304 costs no quota). Bounded, least
    recently used first out: a finished run's `/jobs` never comes back, so an unbounded cache
    would grow with every run the organization ever had."""

    def __init__(self, *, max_bytes: int, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._pages: OrderedDict[str, Page] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._pages)

    def get(self, url: str) -> Page | None:
        if (page := self._pages.get(url)) is not None:
            self._pages.move_to_end(url)
        return page

    def put(self, url: str, page: Page) -> None:
        self.discard(url)
        if len(page.content) > self.max_bytes:
            return  # a page past the whole budget would evict everything and stay alone
        self._pages[url] = page
        self.bytes += len(page.content)
        while len(self._pages) > self.max_entries or self.bytes > self.max_bytes:
            _, oldest = self._pages.popitem(last=False)
            self.bytes -= len(oldest.content)

    def discard(self, url: str) -> None:
        if (page := self._pages.pop(url, None)) is not None:
            self.bytes -= len(page.content)


@dataclass(frozen=True)
class Listing:
    """A listing's items, whether they are all of it, and the requests GitHub counted for it."""

    items: list[Any]
    complete: bool
    counted: int = 0


class GithubApi(HttpBackend):
    service = "GitHub"

    def __init__(
        self,
        config: Settings,
        client: httpx.AsyncClient | None = None,
        *,
        auth: AppInstallationToken | None = None,
        concurrency: int = 4,
        clock: Callable[[], float] = time.time,
        counted: Counted = uncounted,
        cache_size: int = CACHE_BYTES,
    ) -> None:
        timeout = config.backend_timeout_seconds
        super().__init__(client, config.github_api_url, timeout, HEADERS, counted=counted)
        # GITHUB_TOKEN, unless a GitHub App's installation token (`auth`) is minted instead.
        self._token = config.github_token.get_secret_value() if config.github_token else ""
        self._auth = auth
        self.etags = EtagCache(max_bytes=cache_size)  # its share of the memory limit
        self._clock = clock  # epoch seconds, as GitHub's `x-ratelimit-reset`
        self._blocked_until = 0.0
        # When the last rate limit was met: an answer to a call sent before it tells nothing new.
        self._limited_at = float("-inf")
        self._secondary = Backoff(SECONDARY_MAX_S, first=SECONDARY_FIRST_S)
        self._slots = asyncio.Semaphore(concurrency)
        self.calls = 0  # requests sent, for the tests
        self.not_modified = 0
        self.rate: Rate | None = None  # the quota as GitHub's latest answer states it

    async def pages(self, url: str, key: str | None, *, max_pages: int = 20) -> Listing:
        """The `key` list of every page (the page itself when `key` is None)."""
        items: list[Any] = []
        next_url: str | None = url
        total: Any = None
        counted = 0
        for _ in range(max_pages):
            if next_url is None:
                break
            body, next_url, fresh = await self._page(next_url)
            counted += fresh
            if key is None and isinstance(body, list):
                items.extend(body)
            elif key is not None and isinstance(body, dict) and isinstance(body.get(key), list):
                items.extend(body[key])
                total = body.get("total_count")
            else:
                raise BackendError(UNEXPECTED, retryable=True)
        # Fewer items than `total_count`: the 1,000-result cap ended the `link` chain unsaid.
        short = isinstance(total, int) and not isinstance(total, bool) and len(items) < total
        return Listing(items, next_url is None and not short, counted)

    async def get(self, url: str) -> tuple[Any, str | None]:
        """The page at `url` (or where a 301 moved it: a transferred issue), and the next's URL."""
        body, next_url, _ = await self._page(url)
        return body, next_url

    async def _page(self, url: str, *, follow: bool = True) -> tuple[Any, str | None, bool]:
        """`get`, and whether GitHub counted it (not a 304)."""
        # GitHub's ETags are the token's (`Vary: Authorization`): a renewed installation token
        # pays each page once.
        cached = self.etags.get(url)
        headers = {"If-None-Match": cached.etag} if cached else {}
        response = await self._call("GET", url, headers=headers, expect=(200, 301, 304))
        if response.status_code == 301:
            location = response.headers.get("location")
            if not follow or not location:
                raise error_of("GitHub", response)
            body, next_url, _ = await self._page(location, follow=False)
            return body, next_url, True
        if response.status_code == 304 and cached is not None:
            self.not_modified += 1
            return json.loads(cached.content), cached.next_url, False  # JSON when it came
        body = json_of(response, "GitHub")
        next_url = response.links.get("next", {}).get("url")  # as given, never built by hand
        if etag := response.headers.get("etag"):
            self.etags.put(url, Page(etag, response.content, next_url))
        else:
            self.etags.discard(url)
        return body, next_url, True

    async def send(
        self, method: str, url: str, body: Mapping[str, Any], *, expect: tuple[int, ...] = (200,)
    ) -> dict[str, Any]:
        """Not retried: a write whose lost answer may have been made is its caller's to look for."""
        response = await self._call(method, url, json_body=body, expect=(*expect, 422))
        if response.status_code == 422:
            raise BackendError(_invalid(response), retryable=False, status=422)
        return json_object(response, "GitHub")

    async def _call(
        self,
        method: str,
        url: str,
        *,
        expect: tuple[int, ...],
        headers: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> httpx.Response:
        """Once more with a new token when GitHub refused an installation token (401): it refuses
        before doing anything, so a write is safe to send again."""

        async def send(token: str) -> httpx.Response:
            self.calls += 1
            return await self._request(
                method, url, json_body=json_body, headers={**(headers or {}), **bearer(token)},
                expect=(*expect, 401, 403, 429),
            )  # fmt: skip

        async with self._slots:
            # Checked in the slot: a call waiting for one sees a limit hit meanwhile.
            sent = self._clock()
            if (wait := self._blocked_until - sent) > 0:
                said = f"GitHub's rate limit: no calls until {_hms(self._blocked_until)} "
                said += f"(another {wait:.0f} s)"
                raise BackendError(said, retryable=True, retry_after_s=wait)
            token = await self._auth.token() if self._auth is not None else self._token
            response = await send(token)
            if response.status_code == 401 and self._auth is not None:
                self._auth.invalidate(token)
                response = await send(await self._auth.token())
        self._observe(rate_of(response.headers))
        if response.status_code == 401:
            raise error_of("GitHub", response)
        after_limit = sent > self._limited_at
        if response.status_code in (403, 429):
            raise self._limited(response, after_limit=after_limit)
        if after_limit:
            self._secondary.reset()  # answered since the last limit: the next waits 1 to 2 min
        return response

    def _limited(self, response: httpx.Response, *, after_limit: bool) -> BackendError:
        """A 403/429 as GitHub's "Exceeding the rate limit" asks: `retry-after`, else the quota's
        reset, else one to two minutes, doubling (not for a call sent before the last limit)."""
        headers, status, now = response.headers, response.status_code, self._clock()
        retry_after = number_of(headers.get("retry-after"))
        reset = number_of(headers.get("x-ratelimit-reset"))
        exhausted = headers.get("x-ratelimit-remaining") == "0"
        says_secondary = "secondary rate limit" in response.text.lower()
        if not (says_secondary or exhausted or retry_after is not None or status == 429):
            return error_of("GitHub", response)  # a token without the permission
        primary = exhausted and reset is not None and not says_secondary
        new = after_limit or now >= self._blocked_until
        grown = self._secondary.next() if new and not primary else None
        if retry_after is not None:
            until = now + retry_after
        elif exhausted and reset is not None:
            until = reset
        elif grown is not None:
            until = now + grown
        else:
            until = self._blocked_until  # the limit already met: its wait stands
        if new:
            self._limited_at = now
        self._blocked_until = max(self._blocked_until, until)
        which = "rate limit is exhausted" if primary else "secondary rate limit stops calls"
        wait = max(self._blocked_until - now, 0.0)
        said = f"GitHub's {which} until {_hms(self._blocked_until)}"
        return BackendError(said, retryable=True, status=status, retry_after_s=wait)

    def _observe(self, rate: Rate | None) -> None:
        """Answers may come out of order: within one window the lowest `remaining` stands."""
        known = self.rate
        if rate is not None and (
            known is None or (rate.reset, -rate.remaining) > (known.reset, -known.remaining)
        ):
            self.rate = rate


def _hms(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")


def _invalid(response: httpx.Response) -> str:
    """GitHub's 422 and each field it refused (`errors[]`: resource, field, code, message)."""
    said = str(error_of("GitHub", response))
    try:
        errors = response.json().get("errors")
    except (ValueError, AttributeError):
        return said
    refused = [
        f"{e.get('resource', '')} {e.get('field', '')} {e.get('code', '')}".strip()
        + (f": {e['message']}" if e.get("message") else "")
        + (f" ({str(e['value'])[:80]!r})" if e.get("value") is not None else "")
        for e in (errors if isinstance(errors, list) else [])
        if isinstance(e, dict)
    ]
    return f"{said} ({'; '.join(refused)})" if refused else said


def installation_of(config: Settings) -> str:
    """Where the App's installation is looked up without GITHUB_APP_INSTALLATION_ID: on
    GITHUB_ISSUES_REPO, else the first of GITHUB_REPOS, else GITHUB_ORG."""
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
    """Minted when first asked for, reused until shortly before it expires; one mint at a time."""

    def __init__(
        self,
        config: Settings,
        *,
        clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
        counted: Counted = uncounted,
    ) -> None:
        self._counted = counted
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

    async def token(self) -> str:
        async with self._lock:  # a caller waiting here takes the token just minted
            renew_at = self.grant.expires_at - RENEW_BEFORE_S if self.grant else 0.0
            if self._token is None or self._clock() >= renew_at:
                await self._mint()
            return self._token  # type: ignore[return-value]

    def invalidate(self, token: str) -> bool:
        """Whether another token may be had; a concurrent call's replacement is left be."""
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
        token, expires_at = answer.get("token"), time_of(answer.get("expires_at"))
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
            said = "the GitHub App's installation is unknown: set GITHUB_APP_INSTALLATION_ID"
            raise BackendError(said, retryable=False)
        try:
            answer = await self._app_call(github, "GET", where, expect=(200,))
        except BackendError as exc:
            if exc.status != 404:
                raise
            on = where.removesuffix("/installation").split("/", 2)[-1]
            said = f"the GitHub App is not installed on {on} (GET {where} answered 404): install "
            said += "it there, or set GITHUB_APP_INSTALLATION_ID"
            raise BackendError(said, retryable=False, status=404) from None
        found = answer.get("id")
        if not isinstance(found, int) or isinstance(found, bool):
            raise BackendError(UNEXPECTED, retryable=True)
        return found

    async def _app_call(
        self, github: httpx.AsyncClient, method: str, url: str, *, expect: tuple[int, ...]
    ) -> dict[str, Any]:
        """A call as the App itself, with a JWT of its own (one per call keeps none lying about)."""
        jwt = app_jwt(self._config.github_app_id, self._key, self._clock())
        try:
            response = await request(
                github, "GitHub", method, url, counted=self._counted, headers=bearer(jwt),
                expect=expect,
            )  # fmt: skip
        except BackendError as exc:
            exc.args = (f"the GitHub App's token: {exc}",)
            raise
        return json_object(response, "GitHub")


def app_jwt(app_id: str, key: RSAPrivateKey, now: float) -> str:
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
    """The settings checked it is an RSA PEM (`bot.config.values`)."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    return cast("RSAPrivateKey", load_pem_private_key(pem.encode(), password=None))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")
