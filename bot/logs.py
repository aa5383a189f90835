"""Structured logs: one JSON object per line, with secrets scrubbed from every message."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

# Slack tokens and bearer credentials, wherever they end up in a message (an exception's text,
# a URL a library logs), and the password of a URL's userinfo (`https://user:password@host`).
_SECRET = re.compile(r"(xox[abposr]-[\w-]+|xapp-[\w-]+|(?i:bearer|basic)\s+[\w.~+/=-]+)")
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s:@]*):[^/\s@]*@")


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
        if record.exc_info:
            entry["error"] = scrub(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Per-request and per-call lines (URLs included) are noise: the bot logs what it did itself.
    for noisy in ("uvicorn.access", "slack_sdk", "httpx", "apscheduler"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
