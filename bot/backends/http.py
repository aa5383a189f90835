"""One HTTP call to a backend, and one classification of what went wrong.

Like Alertmanager's `notify/util.go`, the decision "is this worth another try, and what do we tell
the user" is made here once, for every backend that speaks HTTP (Alertmanager, Grafana, the
Kubernetes API, a scaler webhook), so no backend classifies failures on its own.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from bot.backends.errors import BackendError

MAX_DETAIL = 200


async def request(
    client: httpx.AsyncClient,
    service: str,
    method: str,
    url: str,
    *,
    expect: Collection[int] = (200,),
    json_body: Any = None,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
) -> httpx.Response:
    """`method url`, answered with one of the `expect`ed statuses, or a `BackendError`.

    `service` names the backend in messages ("Alertmanager did not answer within 10 s"); the
    message never carries credentials (they travel in headers, never in URLs).
    """
    try:
        response = await client.request(
            method, url, json=json_body, content=content, headers=headers, params=params
        )
    except httpx.TimeoutException:
        timeout = client.timeout.read or client.timeout.connect
        within = f" within {timeout:g} s" if timeout else ""
        raise BackendError(f"{service} did not answer{within}", retryable=True) from None
    except httpx.ConnectError:
        where = _origin(str(client.base_url.join(url)))
        raise BackendError(f"{service} is unreachable at {where}", retryable=True) from None
    except httpx.HTTPError as exc:
        raise BackendError(f"{service}: {type(exc).__name__}", retryable=True) from None
    if response.status_code in expect:
        return response
    raise error_of(service, response)


def json_object(response: httpx.Response, service: str) -> dict[str, Any]:
    """The body as a JSON object, or a retryable `BackendError` (a proxy's HTML error page)."""
    try:
        data = response.json()
    except ValueError:
        raise BackendError(
            f"{service} answered with something that is not JSON", retryable=True
        ) from None
    if not isinstance(data, dict):
        raise BackendError(f"{service} answered with an unexpected shape", retryable=True)
    return data


def error_of(service: str, response: httpx.Response) -> BackendError:
    """A refusal as a user reads it: who, the status, and the backend's own short reason.

    5xx and 429 may pass; any other 4xx will fail the same way again (a bad token, an unknown
    target, a request the backend refuses).
    """
    status = response.status_code
    detail = _detail(response)
    message = f"{service} answered {status}" + (f": {detail}" if detail else "")
    return BackendError(message, retryable=status >= 500 or status == 429, status=status)


def _detail(response: httpx.Response) -> str:
    """The backend's reason, short: a JSON `message`/`error` field, else the start of the body."""
    text = response.text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("message", "error", "msg", "reason"):
            if isinstance(data.get(key), str) and data[key].strip():
                text = data[key].strip()
                break
    elif isinstance(data, str):
        text = data.strip()
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _origin(url: str) -> str:
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    except ValueError:  # a malformed port or bracket: name no address rather than fail
        return "its configured address"
