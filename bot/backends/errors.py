"""The one failure type every backend raises, so the core handles backend failures in one place."""

from __future__ import annotations


class BackendError(Exception):
    """A backend call that failed. The message is fit to show a user in Slack.

    `retryable` says whether the same call may succeed later (a timeout, a 5xx, a 429) or will
    fail the same way again (bad credentials, an unknown target, a refused request).
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable
