"""GitHub's REST API as every queuepilot client of it speaks it: the token (`TokenSource`), the API
version, ETags, `link` pagination and GitHub's rate limits, in one place.

The readings (`metrics/github.py`) and the alert's issue (`issues.py`) both call through a
`GithubApi`. A token's limits are GitHub's per token, so whoever meets one stops every call of
that client until GitHub allows them again, and says until when (`BackendError.retry_after_s`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from bot.backends.errors import BackendError
from bot.backends.github_auth import HEADERS, UNEXPECTED, StaticToken, TokenSource
from bot.backends.http import backend_client, bearer, error_of, json_object, json_of, request
from bot.backoff import Backoff
from bot.config import Settings

# A secondary limit that names no time: GitHub says wait at least a minute, and exponentially
# longer while it continues. The cap keeps the readings from stopping for more than a quarter
# of an hour at a time: each wait ends in one call, not a burst.
SECONDARY_FIRST_S = 60.0
SECONDARY_MAX_S = 900.0


@dataclass(frozen=True)
class Listing:
    """A listing's items, and whether they are all of it: `max_pages`, or GitHub's own cap of
    1,000 results for a run listing filtered by status, can cut it short."""

    items: list[Any]
    complete: bool


class GithubApi:
    """GET with ETags, `link` pagination and the rate limits; one instance per backend."""

    def __init__(
        self,
        config: Settings,
        client: httpx.AsyncClient | None = None,
        *,
        auth: TokenSource | None = None,
        concurrency: int = 4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """GITHUB_API_URL (GitHub Enterprise: `https://HOST/api/v3`); `auth` by default
        GITHUB_TOKEN, as it is."""
        timeout = config.backend_timeout_seconds
        self._client = client or backend_client(config.github_api_url, timeout, HEADERS)
        token = config.github_token
        self._auth = auth or StaticToken(token.get_secret_value() if token is not None else "")
        self._cache: dict[str, tuple[str, Any, str | None]] = {}  # url: etag, body, next url
        self._clock = clock  # epoch seconds, as GitHub's `x-ratelimit-reset`
        self._blocked_until = 0.0
        # When the last rate limit was met: an answer to a call sent before it tells nothing new.
        self._limited_at = float("-inf")
        self._secondary = Backoff(SECONDARY_MAX_S, first=SECONDARY_FIRST_S)
        self._slots = asyncio.Semaphore(concurrency)
        self.calls = 0  # requests sent, for the tests and the logs
        self.not_modified = 0

    async def pages(self, url: str, key: str | None, *, max_pages: int = 20) -> Listing:
        """The `key` list of every page (the page itself when `key` is None: GitHub's plain
        listings, such as issues), following `rel="next"`, and whether that was all."""
        items: list[Any] = []
        next_url: str | None = url
        total: Any = None
        for _ in range(max_pages):
            if next_url is None:
                break
            body, next_url = await self.get(next_url)
            if key is None and isinstance(body, list):
                items.extend(body)
            elif key is not None and isinstance(body, dict) and isinstance(body.get(key), list):
                items.extend(body[key])
                total = body.get("total_count")
            else:
                raise BackendError(UNEXPECTED, retryable=True)
        # `total_count` counts every page: fewer items means the listing stopped short (the
        # 1,000-result cap ends the `link` chain without saying so).
        short = isinstance(total, int) and not isinstance(total, bool) and len(items) < total
        return Listing(items, next_url is None and not short)

    async def get(self, url: str) -> tuple[Any, str | None]:
        """One page: its JSON and the next page's URL."""
        cached = self._cache.get(url)
        headers = {"If-None-Match": cached[0]} if cached else {}
        response = await self._call("GET", url, headers=headers, expect=(200, 304))
        if response.status_code == 304 and cached is not None:
            self.not_modified += 1
            return cached[1:]
        body = json_of(response, "GitHub")
        next_url = response.links.get("next", {}).get("url")  # as given, never built by hand
        if response.headers.get("etag"):
            self._cache[url] = (response.headers["etag"], body, next_url)
        return body, next_url

    async def send(
        self, method: str, url: str, body: Mapping[str, Any], *, expect: tuple[int, ...] = (200,)
    ) -> dict[str, Any]:
        """A write (POST, PATCH): the JSON object GitHub answered. Not retried here: a write whose
        answer was lost may have been made, and only its caller can look."""
        return json_object(await self._call(method, url, json_body=body, expect=expect), "GitHub")

    async def _call(
        self,
        method: str,
        url: str,
        *,
        expect: tuple[int, ...],
        headers: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> httpx.Response:
        """The call with the token of the moment; once more with a new one when GitHub refused
        it (401) and another may be had (an App's token revoked or lapsed early: GitHub refuses
        a token before doing anything, so a write is safe to send again)."""

        async def send(token: str) -> httpx.Response:
            self.calls += 1
            return await request(
                self._client, "GitHub", method, url, json_body=json_body,
                headers={**(headers or {}), **bearer(token)}, expect=(*expect, 401, 403, 429),
            )  # fmt: skip

        async with self._slots:
            # Checked in the slot: a call waiting for one sees a limit hit meanwhile.
            sent = self._clock()
            wait = self._blocked_until - sent
            if wait > 0:
                message = f"GitHub's rate limit: no calls for another {wait:.0f} s"
                raise BackendError(message, retryable=True, retry_after_s=wait)
            token = await self._auth.token()
            response = await send(token)
            if response.status_code == 401 and self._auth.invalidate(token):
                response = await send(await self._auth.token())
        if response.status_code == 401:
            raise error_of("GitHub", response)
        after_limit = sent > self._limited_at
        if response.status_code in (403, 429):
            raise self._limited(response, after_limit=after_limit)
        if after_limit:
            self._secondary.reset()  # answered since the last limit: the next waits a minute
        return response

    def _limited(self, response: httpx.Response, *, after_limit: bool) -> BackendError:
        """A 403/429: a rate limit (no calls until GitHub allows them) or a refusal.

        As GitHub's "Exceeding the rate limit" asks: `retry-after` seconds when given; else, with
        `x-ratelimit-remaining: 0`, until `x-ratelimit-reset`; else (a secondary limit naming no
        time) a minute, doubling while secondary limits continue. Concurrent calls meet one limit
        together: an answer to a call sent before the last limit (`after_limit` false) is that
        limit, and grows no wait.
        """
        headers = response.headers
        now = self._clock()
        retry_after = _float(headers.get("retry-after"))
        reset = _float(headers.get("x-ratelimit-reset"))
        exhausted = headers.get("x-ratelimit-remaining") == "0"
        says_secondary = "secondary rate limit" in response.text.lower()
        if not (
            says_secondary or exhausted or retry_after is not None or response.status_code == 429
        ):
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
        when = datetime.fromtimestamp(self._blocked_until, UTC).strftime("%H:%M:%S UTC")
        return BackendError(
            f"GitHub's {which} until {when}",
            retryable=True,
            status=response.status_code,
            retry_after_s=max(self._blocked_until - now, 0.0),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
