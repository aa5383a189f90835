"""The one failure type every backend raises, and the one deadline every backend call runs under."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

# Past a backend's own timeout: its client answers first with the precise reason (connect, read);
# the deadline catches what a client timeout cannot (retries, a thread running boto3).
MARGIN_S = 2.0


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
