"""Structured logs: one JSON object per line, secrets scrubbed. Where work on one incident or
channel starts (`about`, `tag`), every line beneath, the bot's or a library's, names it."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

# Slack tokens, bearer credentials and a URL's password, wherever a message carries them.
_SECRET = re.compile(r"(xox[abposr]-[\w-]+|xapp-[\w-]+|(?i:bearer|basic)\s+[\w.~+/=-]+)")
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s:@]*):[^/\s@]*@")


_INCIDENT: ContextVar[str | None] = ContextVar("log_incident", default=None)
_CHANNEL: ContextVar[str | None] = ContextVar("log_channel", default=None)


def tag(*, incident: str | None = None, channel: str | None = None) -> None:
    """From here on in this task (and those it starts), lines name this incident and channel; a
    name not given is left as it was."""
    if incident is not None:
        _INCIDENT.set(incident or None)
    if channel is not None:
        _CHANNEL.set(channel or None)


@contextmanager
def about(incident: str | None = None, *, channel: str | None = None) -> Iterator[None]:
    """Lines logged inside name this incident and channel; a `tag` inside stays inside."""
    tokens = (_INCIDENT.set(incident), _CHANNEL.set(channel))
    try:
        yield
    finally:
        _CHANNEL.reset(tokens[1])
        _INCIDENT.reset(tokens[0])


def scrub(text: str) -> str:
    return _URL_PASSWORD.sub(r"\1:[redacted]@", _SECRET.sub("[redacted]", text))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": scrub(record.getMessage()),
        }
        if (incident := _INCIDENT.get()) is not None:
            entry["incident"] = incident
        if (channel := _CHANNEL.get()) is not None:
            entry["channel"] = channel
        if record.exc_info:
            entry["error"] = scrub(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Warnings and the error that ends the process are JSON lines too, not bare text.
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    # Per-request and per-call lines (URLs included) are noise: the bot logs what it did itself.
    for noisy in ("uvicorn.access", "slack_sdk", "httpx", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _log_uncaught(kind: type[BaseException], error: BaseException, trace: Any) -> None:
    logging.getLogger("queuepilot").critical(
        "stopped by %s", kind.__name__, exc_info=(kind, error, trace)
    )
