"""One HTTP call to a backend, and one classification of what went wrong (as Alertmanager's
`notify/util.go`): whether a failure is worth another try, and what the user is told."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from bot.backends.errors import BackendError
from bot.domain.alerts import parse_timestamp

MAX_DETAIL = 200

# Where a call's outcome is counted, `(service, outcome)`: the serving app's telemetry.
Counted = Callable[[str, str], None]


def uncounted(service: str, outcome: str) -> None:
    """For callers with no /metrics to count on: `queuepilot check`, the tests."""


def backend_client(
    base_url: str | None, timeout_s: float, headers: Mapping[str, str] | None = None, **options: Any
) -> httpx.AsyncClient:
    base = (base_url or "").rstrip("/")
    return httpx.AsyncClient(base_url=base, timeout=timeout_s, headers=headers, **options)


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
        timeout = client.timeout.read or client.timeout.connect
        where = str(client.base_url.join(url))
        raise unanswered(exc, service, counted, timeout_s=timeout, url=where) from None
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
    """The answer as `queuepilot_backend_calls_total` counts it: a 4xx the caller expected (a
    silence's 404) is an answer, a refused credential (401, 403) never is; a 403 with a rate
    limit's headers is how GitHub answers its limits."""
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
        message = f"{service} answered with something that is not JSON"
        raise BackendError(message, retryable=True) from None


def json_object(response: httpx.Response, service: str) -> dict[str, Any]:
    data = json_of(response, service)
    if not isinstance(data, dict):
        raise BackendError(f"{service} answered with an unexpected shape", retryable=True)
    return data


def time_of(value: object) -> datetime | None:
    """A time in a backend's JSON as UTC; None when it is not one."""
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def error_of(service: str, response: httpx.Response) -> BackendError:
    """A refusal as a user reads it: who, the status, and the backend's own short reason."""
    status = response.status_code
    detail = _detail(response)
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
    """`text` on one line, cut to `limit` characters."""
    said = " ".join(text.split())
    return said if len(said) <= limit else said[: limit - 1] + "…"


def number_of(value: object) -> float | None:
    """A number in a backend's answer, or one quoted as text (ClickHouse's 64-bit integers,
    HTTP headers); None for anything else. Infinity and NaN are none either: no count, wait or
    moment is endless, and arithmetic on them fails far from the answer that carried them."""
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
