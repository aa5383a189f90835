"""The one failure type every backend raises, so the core handles backend failures in one place."""

from __future__ import annotations


class BackendError(Exception):
    """A backend call that failed. The message is fit to show a user in Slack (escape it: it may
    quote the backend's own words).

    `retryable` says whether the same call may succeed later (a timeout, a 5xx, a 429) or will
    fail the same way again (bad credentials, an unknown target, a refused request). `status` is
    the HTTP status when the backend answered one.
    """

    def __init__(self, message: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
