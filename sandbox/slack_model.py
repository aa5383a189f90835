"""The Slack emulator's data model: the records its layers pass around and the ids they carry.

Plain data with no rules beyond their own shape: the workspace (`slack_state`) decides what
happens to them, and tests read `Message` and `Call` copies through `slack_api.SlackEmulator`.
The bot's identity is fixed so tests and transcripts can recognise its messages.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TEAM_ID = "T0QUEUE"
TEAM_NAME = "queuepilot-sandbox"
BOT_USER_ID = "U0QUEUEBOT"
BOT_USER_NAME = "queuepilot"
BOT_ID = "B0QUEUEBOT"
APP_ID = "A0QUEUEBOT"


class SlackError(Exception):
    """A Slack-style failure: becomes `{"ok": false, "error": ...}` with `status`."""

    def __init__(
        self,
        error: str,
        *,
        status: int = 200,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


def invalid_arguments(*messages: str) -> SlackError:
    """Slack reports missing/malformed arguments with details in response_metadata."""
    return SlackError("invalid_arguments", extra={"response_metadata": {"messages": [*messages]}})


def invalid_blocks(*messages: str) -> SlackError:
    """Blocks Slack refuses, each `messages` item "[ERROR] <why> [json-pointer:/blocks/...]".

    Slack says each twice: bare in a top-level `errors`, and with the "[ERROR] " prefix in
    `response_metadata.messages`, e.g. `{"ok": false, "error": "invalid_blocks", "errors":
    ["downloading image failed [json-pointer:/blocks/0/image_url]"], "response_metadata":
    {"messages": ["[ERROR] downloading image failed [json-pointer:/blocks/0/image_url]"]}}`
    (python-slack-sdk#1782; the same shape in #1797 and bolt-python#1016).
    """
    errors = [message.removeprefix("[ERROR] ") for message in messages]
    metadata = {"messages": [*messages]}
    return SlackError("invalid_blocks", extra={"errors": errors, "response_metadata": metadata})


@dataclass
class Message:
    """A message as tests see it; mutable because chat.update edits it in place."""

    ts: str
    channel: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    user: str | None
    edits: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    broadcast: bool = False


@dataclass
class Call:
    """One request the emulator received, whatever its outcome."""

    method: str
    params: dict[str, Any]
    status: int
    ok: bool
    error: str | None
    at: float
    client: str = ""  # "host:port" of the connection it came on, as an access log has it
    # Slack's whole answer when it refused the call (None when it went through), so a test can
    # read what the caller was told: `response_metadata.messages`, `needed`, ...
    refusal: dict[str, Any] | None = None


@dataclass
class Fault:
    """A failure queued by a test for an upcoming call.

    `messages` are Slack's explanation (`response_metadata.messages`), which it gives with every
    invalid_blocks and invalid_arguments; `extra` the answer's other fields (missing_scope's
    `needed` and `provided`). Only a call whose arguments `when` accepts takes the fault (any
    call when None), so a test can refuse, say, the next message that holds a chart.
    """

    status: int
    retry_after: int
    error: str | None
    messages: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    when: Callable[[Mapping[str, Any]], bool] | None = None

    def applies(self, params: Mapping[str, Any]) -> bool:
        return self.when is None or self.when(params)

    def to_error(self) -> SlackError:
        if self.status == 429:
            return SlackError(
                self.error or "ratelimited",
                status=429,
                headers={"Retry-After": str(self.retry_after)},
            )
        error = self.error or _default_fault_error(self.status)
        if error == "invalid_blocks":
            return invalid_blocks(*self.messages)
        extra = dict(self.extra)
        if self.messages:
            extra["response_metadata"] = {"messages": [*self.messages]}
        return SlackError(error, status=self.status, extra=extra)


def _default_fault_error(status: int) -> str:
    if status >= 500:
        return "service_unavailable" if status == 503 else "internal_error"
    return "fatal_error"


@dataclass
class Channel:
    """A conversation: top-level timeline, threads keyed by root ts, and ephemerals."""

    id: str
    member: bool = True  # the bot's membership
    archived: bool = False
    # The people in the channel; None: everyone in the workspace (the default, so tests that
    # do not care about membership need not spell it out).
    members: set[str] | None = None
    timeline: list[Message] = field(default_factory=list)
    replies: dict[str, list[Message]] = field(default_factory=dict)
    ephemerals: list[Message] = field(default_factory=list)
    by_ts: dict[str, Message] = field(default_factory=dict)

    def has_member(self, user: str) -> bool:
        return self.members is None or user in self.members

    def clear(self) -> None:
        self.timeline.clear()
        self.replies.clear()
        self.ephemerals.clear()
        self.by_ts.clear()


@dataclass
class StoredFile:
    """A file reserved by files.getUploadURLExternal; `data` arrives with the upload POST."""

    id: str
    name: str
    length: int
    title: str = ""
    data: bytes | None = None
    channels: list[str] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title or self.name,
            "size": len(self.data) if self.data is not None else self.length,
            "mimetype": _sniff(self.data),
            "user": BOT_USER_ID,
            "channels": list(self.channels),
        }


def _sniff(data: bytes | None) -> str:
    """Slack reports the type it detected; the page shows images inline by it."""
    if data is not None and data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    return "application/octet-stream"


class TsClock:
    """Issues Slack-like message timestamps that are unique and strictly increasing.

    Real ts values are wall-clock seconds plus a 6-digit suffix; tests and the bot compare
    and sort them, so the suffix is a counter rather than a random number.
    """

    def __init__(self) -> None:
        self._seconds = 0
        self._seq = 0

    def next(self) -> str:
        now = int(time.time())
        if now > self._seconds:
            self._seconds, self._seq = now, 0
        self._seq += 1
        if self._seq > 999_999:
            self._seconds, self._seq = self._seconds + 1, 1
        return f"{self._seconds}.{self._seq:06d}"


class IdSource:
    """Sequential Slack-looking ids ("V0000000001"), readable in test failures."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = defaultdict(int)

    def next(self, prefix: str) -> str:
        self._counters[prefix] += 1
        return f"{prefix}{self._counters[prefix]:010d}"
