"""The Slack gateway: every Web API call the core makes goes through here.

One place decides pacing, retries and what an error means, so no caller retries on its own:
- pacing: at most one `chat.postMessage` per channel per interval and one `chat.update` per
  interval, across all replicas (a Redis key with a PX expiry marks the slot as taken);
- rate limits: a 429 holds that method for its `Retry-After` on every replica (a Redis key),
  then the call is retried; slack_sdk's retry handlers back off and retry 5xx answers and
  refused connections;
- classification: what still fails becomes `SlackError`, `retryable` or not. Errors such as
  `channel_not_found` or `invalid_auth` will fail the same way again, so callers report them and
  stop; retryable ones are left for a later attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientConnectorError, ClientError
from redis.asyncio import Redis
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from bot.telemetry import Telemetry

log = logging.getLogger(__name__)

# Slack's transient errors, answered with HTTP 200 and ok=false.
_TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class SlackError(Exception):
    """A Slack call that failed after retries. `error` is Slack's code, e.g. `channel_not_found`.

    `uncertain` marks failures after which Slack may still have acted (a timeout, a dropped
    connection), as opposed to an answer that says it did not.
    """

    def __init__(
        self, method: str, error: str, *, retryable: bool, uncertain: bool = False
    ) -> None:
        super().__init__(f"{method}: {error}")
        self.method = method
        self.error = error
        self.retryable = retryable
        self.uncertain = uncertain


@dataclass(frozen=True)
class SlackConfig:
    token: str
    base_url: str = "https://slack.com/api/"
    timeout_s: int = 10
    max_retries: int = 3
    post_interval_ms: int = 1000
    update_interval_ms: int = 1200


class _ServerErrorRetry(AsyncRetryHandler):
    """Every 5xx, not only the 500 and 503 that slack_sdk's own handler covers."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is not None and response.status_code >= 500


def _retry_after_s(headers: Mapping[str, Any]) -> float:
    """Slack's Retry-After in seconds (1 when absent or unreadable, at most 5 minutes)."""
    for name, value in headers.items():
        if name.lower() == "retry-after":
            raw = value[0] if isinstance(value, list | tuple) else value
            try:
                return min(max(float(raw), 0.0), 300.0)
            except (TypeError, ValueError):
                break
    return 1.0


def build_client(config: SlackConfig) -> AsyncWebClient:
    """The one AsyncWebClient of the process, shared by the gateway and Bolt.

    Only failures that prove Slack did not act are retried here: a refused connection and 5xx
    answers. A timeout or a dropped connection may follow a message Slack did post, so it goes
    up as an uncertain failure instead of a second copy of the message. 429s are the gateway's.
    """
    return AsyncWebClient(
        token=config.token,
        base_url=config.base_url,
        timeout=config.timeout_s,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(
                max_retry_count=config.max_retries, error_types=[ClientConnectorError]
            ),
            _ServerErrorRetry(max_retry_count=config.max_retries),
        ],
    )


class SlackGateway:
    def __init__(
        self,
        client: AsyncWebClient,
        redis: Redis,
        *,
        config: SlackConfig,
        telemetry: Telemetry,
        prefix: str,
    ) -> None:
        self.client = client
        self._redis = redis
        self._config = config
        self._telemetry = telemetry
        self._prefix = prefix

    async def post(
        self, channel: str, text: str, blocks: list[dict[str, Any]], *, thread_ts: str | None = None
    ) -> str:
        """Post a message (a thread reply when `thread_ts` is given); returns its ts."""
        await self._pace(f"post:{channel}", self._config.post_interval_ms)
        response = await self._call(
            "chat.postMessage",
            channel=channel,
            text=text,
            blocks=blocks,
            thread_ts=thread_ts,
            unfurl_links=False,
            unfurl_media=False,
        )
        return str(response["ts"])

    async def update(self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None:
        await self._pace("update", self._config.update_interval_ms)
        await self._call("chat.update", channel=channel, ts=ts, text=text, blocks=blocks)

    async def post_ephemeral(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None
    ) -> None:
        await self._call(
            "chat.postEphemeral", channel=channel, user=user, text=text, thread_ts=thread_ts
        )

    async def _call(self, method: str, **params: Any) -> Any:
        params = {k: v for k, v in params.items() if v is not None}
        for attempt in range(self._config.max_retries + 1):
            await self._wait_out_rate_limit(method)
            try:
                response = await self.client.api_call(method, json=params)
            except SlackApiError as exc:
                if exc.response.status_code == 429 and attempt < self._config.max_retries:
                    await self._rate_limited(method, exc.response.headers)
                    continue
                raise self._failure(method, exc) from None
            except ClientConnectorError as exc:
                self._telemetry.slack_calls.labels(method, "connection_error").inc()
                raise SlackError(method, type(exc).__name__, retryable=True) from None
            except (ClientError, TimeoutError) as exc:
                self._telemetry.slack_calls.labels(method, "connection_error").inc()
                raise SlackError(
                    method, type(exc).__name__, retryable=True, uncertain=True
                ) from None
            self._telemetry.slack_calls.labels(method, "ok").inc()
            return response
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _failure(self, method: str, exc: SlackApiError) -> SlackError:
        status = exc.response.status_code
        error = str(exc.response.get("error") or f"http_{status}")
        self._telemetry.slack_calls.labels(method, error).inc()
        retryable = status == 429 or status >= 500 or error in _TRANSIENT_ERRORS
        return SlackError(method, error, retryable=retryable)

    async def _rate_limited(self, method: str, headers: Mapping[str, Any]) -> None:
        """Slack said 429: hold every replica's calls of this method for `Retry-After` seconds."""
        self._telemetry.slack_rate_limited.labels(method).inc()
        hold_ms = int(_retry_after_s(headers) * 1000)
        log.warning("Slack rate-limited %s; holding it for %d ms", method, hold_ms)
        await self._redis.set(f"{self._prefix}:pace:hold:{method}", "1", px=max(hold_ms, 1))

    async def _wait_out_rate_limit(self, method: str) -> None:
        remaining_ms = await self._redis.pttl(f"{self._prefix}:pace:hold:{method}")
        while remaining_ms > 0:
            await asyncio.sleep(remaining_ms / 1000)
            remaining_ms = await self._redis.pttl(f"{self._prefix}:pace:hold:{method}")

    async def _pace(self, key: str, interval_ms: int) -> None:
        """Wait for this key's slot; replicas share the slots through Redis."""
        if interval_ms <= 0:
            return
        slot = f"{self._prefix}:pace:{key}"
        while not await self._redis.set(slot, "1", nx=True, px=interval_ms):
            remaining_ms = await self._redis.pttl(slot)
            await asyncio.sleep(max(remaining_ms, 5) / 1000)
