"""The one failure type, deadline, HTTP call and classification of failures of every backend (as
Alertmanager's `notify/util.go`): whether a failure is worth another try, and what users read."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from bot.domain import shortened as cut

T = TypeVar("T")
MAX_DETAIL = 200
# Past a backend's own timeout: its client answers first with the precise reason (connect, read);
# the deadline catches what a client timeout cannot (retries, a thread running boto3).
MARGIN_S = 2.0

# Where a call's outcome is counted, `(service, outcome)`: the serving app's telemetry.
Counted = Callable[[str, str], None]


class BackendError(Exception):
    """A failed backend call, its message fit to show a user (escaped: it may quote the backend).
    `unanswered`: sent, but its answer never came, so it may have been carried out."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after_s: float | None = None,
        unanswered: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s
        self.unanswered = unanswered


def deadline_of(timeout_s: float) -> float:
    return timeout_s + MARGIN_S


async def within(
    call: Awaitable[T], timeout_s: float, service: str, *, margin_s: float = MARGIN_S
) -> T:
    """`call`, or a retryable `BackendError` once it overran `timeout_s` plus the margin (none for
    a caller with no time to spare: a modal within Slack's 3 s)."""
    try:
        return await asyncio.wait_for(call, timeout_s + margin_s)
    except TimeoutError:
        message = f"{service} did not answer within {timeout_s:g} s"
        raise BackendError(message, retryable=True, unanswered=True) from None


def uncounted(service: str, outcome: str) -> None:
    """For callers with no /metrics to count on: `queuepilot check`, the tests."""


def backend_client(
    base_url: str | None, timeout_s: float, headers: Mapping[str, str] | None = None, **options: Any
) -> httpx.AsyncClient:
    base = (base_url or "").rstrip("/")
    return httpx.AsyncClient(base_url=base, timeout=timeout_s, headers=headers, **options)


class HttpBackend:
    """A backend over HTTP: its client and where its calls are counted. `service` names it in
    its errors ("The HUD")."""

    service: str

    def __init__(
        self,
        client: httpx.AsyncClient | None,
        base_url: str | None,
        timeout_s: float,
        headers: Mapping[str, str] | None = None,
        *,
        counted: Counted = uncounted,
    ) -> None:
        self._counted = counted
        self._client = client or backend_client(base_url, timeout_s, headers)

    async def _request(self, method: str, url: str, **options: Any) -> httpx.Response:
        return await request(
            self._client, self.service, method, url, counted=self._counted, **options
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def bearer(token: SecretStr | str | None) -> dict[str, str]:
    if isinstance(token, SecretStr):
        token = token.get_secret_value()
    return {"Authorization": f"Bearer {token}"} if token else {}


async def request(
    client: httpx.AsyncClient,
    service: str,
    method: str,
    url: str,
    *,
    counted: Counted,
    expect: Collection[int] = (200,),
    json_body: Any = None,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
) -> httpx.Response:
    """The answer with one of the `expect`ed statuses, or a `BackendError` naming `service` (no
    credential: those travel in headers, never in URLs)."""
    try:
        response = await client.request(
            method, url, json=json_body, content=content, headers=headers, params=params
        )
    except httpx.HTTPError as exc:
        timeout, where = client.timeout.read or client.timeout.connect, client.base_url.join(url)
        raise unanswered(exc, service, counted, timeout_s=timeout, url=str(where)) from None
    counted(service, outcome_of(response, expect))
    if response.status_code in expect:
        return response
    raise error_of(service, response)


def unanswered(
    exc: httpx.HTTPError, service: str, counted: Counted, *, timeout_s: float | None, url: str
) -> BackendError:
    """A call that got no answer, counted and said (a timeout once sent may have been done)."""
    if isinstance(exc, httpx.TimeoutException):
        counted(service, "timeout")
        within = f" within {timeout_s:g} s" if timeout_s else ""
        sent = not isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
        return BackendError(f"{service} did not answer{within}", retryable=True, unanswered=sent)
    if isinstance(exc, httpx.ConnectError):
        counted(service, "unreachable")
        return BackendError(f"{service} is unreachable at {_origin(url)}", retryable=True)
    counted(service, "error")
    return BackendError(f"{service}: {type(exc).__name__}", retryable=True)


def outcome_of(response: httpx.Response, expect: Collection[int] = (200,)) -> str:
    """The answer as `queuepilot_backend_calls_total` counts it: an expected 4xx (a silence's 404)
    is an answer, a refused credential never is; a 403 with rate limit headers is GitHub's limit."""
    status = response.status_code
    limited = status == 403 and (
        "retry-after" in response.headers or response.headers.get("x-ratelimit-remaining") == "0"
    )
    if status == 429 or limited:
        return "rate_limited"
    if status >= 500:
        return "server_error"
    if status in (401, 403) or (status >= 400 and status not in expect):
        return "refused"
    return "ok"


def json_of(response: httpx.Response, service: str) -> Any:
    """The body's JSON, or a retryable `BackendError` (a proxy's HTML error page)."""
    try:
        return response.json()
    except ValueError:
        said = f"{service} answered with something that is not JSON"
        raise BackendError(said, retryable=True) from None


def json_object(response: httpx.Response, service: str) -> dict[str, Any]:
    data = json_of(response, service)
    if not isinstance(data, dict):
        raise BackendError(f"{service} answered with an unexpected shape", retryable=True)
    return data


def error_of(service: str, response: httpx.Response) -> BackendError:
    """A refusal as a user reads it: who, the status, and the backend's own short reason."""
    status, detail = response.status_code, _detail(response)
    message = f"{service} answered {status}" + (f": {detail}" if detail else "")
    return BackendError(message, retryable=status >= 500 or status == 429, status=status)


def _detail(response: httpx.Response) -> str:
    """A JSON `message`/`error` field, else the start of the body."""
    text = response.text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        reasons = (data.get(key) for key in ("message", "error", "msg", "reason"))
        text = next((r.strip() for r in reasons if isinstance(r, str) and r.strip()), text)
    elif isinstance(data, str):
        text = data
    return shortened(text, MAX_DETAIL)


def shortened(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters between words, "…" where it was cut: a
    backend's reason keeps as much as fits (who was refused is often in its last clause)."""
    said = " ".join(text.split())
    if len(said) <= limit:
        return said
    head = said[: limit - len(cut.ELLIPSIS) + 1]
    words = head.rsplit(" ", 1)[0] if " " in head else head[:-1]
    return words.rstrip(",;:") + cut.ELLIPSIS


def number_of(value: object) -> float | None:
    """A number in a backend's answer, or one quoted as text (ClickHouse's 64-bit integers, HTTP
    headers); None for anything else, infinity and NaN too: no count, wait or moment is endless."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):  # an integer past a float's range is no count either
        return None
    return number if math.isfinite(number) else None


def _origin(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    except ValueError:  # a malformed port or bracket: name no address rather than fail
        return "its configured address"
