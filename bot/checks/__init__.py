"""`queuepilot check`: every misconfiguration found before the first alert, not at it.

Each dependency's module (`slack`, `redis`, `prometheus`, `silence`, `kubernetes`, `github`, `aws`)
makes the calls the bot itself will make, through its own clients, and says what it found as
`Finding`s; `run` runs those of what is configured at once and prints one line per finding. A
finding that is not ok says how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but something an operator should know (no persistence, say)
    FAIL = "fail"  # will not work as configured: `check` exits 1


@dataclass(frozen=True)
class Finding:
    """One line of the report: `subject` names the dependency ("slack", "redis"), `fix` says
    what to do (empty when ok)."""

    verdict: Verdict
    subject: str
    detail: str
    fix: str = ""


def ok(subject: str, detail: str) -> Finding:
    return Finding(Verdict.OK, subject, detail)


def warn(subject: str, detail: str, fix: str = "") -> Finding:
    return Finding(Verdict.WARN, subject, detail, fix)


def fail(subject: str, detail: str, fix: str = "") -> Finding:
    return Finding(Verdict.FAIL, subject, detail, fix)


def shown_url(url: str) -> str:
    """A URL as a report shows it: without the user and password a URL may carry."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{parts.hostname}{port}{parts.path.rstrip('/')}"
    except ValueError:
        return "(an unreadable URL)"
