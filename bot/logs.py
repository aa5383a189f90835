"""Structured logs: one JSON object per line, with secrets scrubbed from every message, naming
the incident and channel being worked on where there is one.

The few places where work on one incident or channel starts say so (`about`, `tag`); every line
logged beneath them, by the bot or a library, carries it, so nobody writes it into a message."""

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

# Slack tokens and bearer credentials, wherever they end up in a message (an exception's text,
# a URL a library logs), and the password of a URL's userinfo (`https://user:password@host`).
_SECRET = re.compile(r"(xox[abposr]-[\w-]+|xapp-[\w-]+|(?i:bearer|basic)\s+[\w.~+/=-]+)")
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s:@]*):[^/\s@]*@")


_INCIDENT: ContextVar[str | None] = ContextVar("log_incident", default=None)
_CHANNEL: ContextVar[str | None] = ContextVar("log_channel", default=None)


def tag(*, incident: str | None = None, channel: str | None = None) -> None:
    """From here on in this task (and the tasks it starts), lines name this incident and channel;
    for a task that works on one only (an intake lane, a request, a channel's sender), or inside
    `about`. A name not given is left as it was."""
    if incident is not None:
        _INCIDENT.set(incident or None)
    if channel is not None:
        _CHANNEL.set(channel or None)


@contextmanager
def about(incident: str | None = None, *, channel: str | None = None) -> Iterator[None]:
    """Lines logged inside name this incident and channel (None: none), and whatever `tag` says
    inside stays inside."""
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
    # A library's DeprecationWarning or RuntimeWarning is a line like any other, not bare text,
    # and so is the traceback of an error that ends the process.
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    # Per-request and per-call lines (URLs included) are noise: the bot logs what it did itself.
    for noisy in ("uvicorn.access", "slack_sdk", "httpx", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _log_uncaught(kind: type[BaseException], error: BaseException, trace: Any) -> None:
    logging.getLogger("queuepilot").critical(
        "stopped by %s", kind.__name__, exc_info=(kind, error, trace)
    )
