"""What the two AWS scalers share: a boto3 client from explicit settings, run off the event loop,
its errors told as every backend's are. boto3 is the optional `aws` extra."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from bot.backends.errors import BackendError
from bot.backends.http import Counted
from bot.config import Settings

T = TypeVar("T")
THROTTLED = frozenset({"Throttling", "ThrottlingException", "RequestThrottled", "SlowDown"})


def client(service: str, config: Settings, *, region: str | None = None) -> Any:
    """A boto3 client in AWS_REGION (else `region`, else AWS's chain), at AWS_ENDPOINT_URL."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise BackendError(
            "the AWS scalers need boto3: install queuepilot with the `aws` extra", retryable=False
        ) from None
    timeout = config.backend_timeout_seconds
    retries = {"max_attempts": 2, "mode": "standard"}
    return boto3.client(
        service,
        region_name=config.aws_region or region,
        endpoint_url=config.aws_endpoint_url,
        config=Config(connect_timeout=timeout, read_timeout=timeout, retries=retries),
    )


async def call(service: str, counted: Counted, fn: Callable[..., T], **kwargs: Any) -> T:
    """`fn(**kwargs)` in a thread (boto3 blocks), its failures as `BackendError`."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        ReadTimeoutError,
    )

    try:
        answer = await asyncio.to_thread(fn, **kwargs)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "error")
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        message = str(error.get("Message") or code)
        throttled = code in THROTTLED
        refused = "server_error" if status >= 500 else "refused"
        counted(service, "rate_limited" if throttled else refused)
        retryable = throttled or status >= 500
        raise BackendError(f"{service} refused: {code}: {message}", retryable=retryable) from None
    except (ConnectTimeoutError, ReadTimeoutError) as exc:
        counted(service, "timeout")
        sent = isinstance(exc, ReadTimeoutError)
        message = f"{service} did not answer in time"
        raise BackendError(message, retryable=True, unanswered=sent) from None
    except EndpointConnectionError:
        counted(service, "unreachable")
        raise BackendError(f"{service} is unreachable", retryable=True) from None
    except BotoCoreError as exc:
        counted(service, "error")
        raise BackendError(f"{service}: {type(exc).__name__}", retryable=False) from None
    counted(service, "ok")
    return answer
