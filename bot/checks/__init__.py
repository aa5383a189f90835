"""`queuepilot check`: every misconfiguration found before the first alert, not at it. Each module
probes one dependency through the bot's own clients."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from urllib.parse import urlsplit


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but something an operator should know (no persistence, say)
    FAIL = "fail"  # will not work as configured: `check` exits 1


@dataclass(frozen=True)
class Finding:
    verdict: Verdict
    subject: str  # the dependency: "slack", "redis"
    detail: str
    fix: str = ""


ok = partial(Finding, Verdict.OK)
warn = partial(Finding, Verdict.WARN)
fail = partial(Finding, Verdict.FAIL)


def shown_url(url: str) -> str:
    """A URL without the user and password it may carry."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}{parts.path.rstrip('/')}"
    except ValueError:
        return "(an unreadable URL)"
