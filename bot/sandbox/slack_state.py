"""In-memory model of a Slack workspace, the state behind the local Web API emulator.

This module knows nothing about HTTP: it holds channels, messages, threads, views, files,
users and usergroups, plus the bookkeeping tests inspect (call log, queued faults, stalls,
rate-limit buckets). Every rule that decides *which Slack error* a request earns lives here,
so the HTTP layer only has to translate parameters in and JSON out.

Nothing here is thread-safe on its own: `SlackEmulator` serialises all access with one lock.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.models.blocks import Block

TEAM_ID = "T0QUEUE"
TEAM_NAME = "queuepilot-sandbox"
BOT_USER_ID = "U0QUEUEBOT"
BOT_USER_NAME = "queuepilot"
BOT_ID = "B0QUEUEBOT"
APP_ID = "A0QUEUEBOT"

MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
MAX_TEXT_CHARS = 40_000

# (burst, sustained calls per second) per (method, channel), mirroring Slack's documented
# "1 message per second per channel" special limit and Tier 3 (50/min) for chat.update.
RATE_LIMITS: dict[str, tuple[int, float]] = {
    "chat.postMessage": (3, 1.0),
    "chat.update": (5, 50 / 60),
}


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


@dataclass
class Fault:
    """A failure queued by a test for an upcoming call."""

    status: int
    retry_after: int
    error: str | None

    def to_error(self) -> SlackError:
        if self.status == 429:
            return SlackError(
                self.error or "ratelimited",
                status=429,
                headers={"Retry-After": str(self.retry_after)},
            )
        return SlackError(self.error or _default_fault_error(self.status), status=self.status)


def _default_fault_error(status: int) -> str:
    if status >= 500:
        return "service_unavailable" if status == 503 else "internal_error"
    return "fatal_error"


@dataclass
class Channel:
    """A conversation: top-level timeline, threads keyed by root ts, and ephemerals."""

    id: str
    member: bool = True
    archived: bool = False
    timeline: list[Message] = field(default_factory=list)
    replies: dict[str, list[Message]] = field(default_factory=dict)
    ephemerals: list[Message] = field(default_factory=list)
    by_ts: dict[str, Message] = field(default_factory=dict)

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
            "mimetype": "application/octet-stream",
            "user": BOT_USER_ID,
            "channels": list(self.channels),
        }


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


class TokenBucket:
    """Classic token bucket: `burst` immediate calls, then `per_second` refill."""

    def __init__(self, burst: int, per_second: float) -> None:
        self._capacity = float(burst)
        self._rate = per_second
        self._tokens = float(burst)
        self._updated = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        elapsed = now - self._updated
        self._tokens = min(self._capacity, self._tokens + elapsed * self._rate)
        self._updated = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


def validate_blocks(blocks: object, *, limit: int = MAX_MESSAGE_BLOCKS) -> list[str]:
    """Return Slack-style error strings for `blocks`; empty means valid.

    slack_sdk's own models carry Slack's length/count rules, so reusing them keeps the
    emulator as strict as the real API without duplicating the rulebook.
    """
    if not isinstance(blocks, list):
        return ["[ERROR] blocks must be an array [json-pointer:/blocks]"]
    if len(blocks) > limit:
        return [f"[ERROR] no more than {limit} items allowed [json-pointer:/blocks]"]
    errors = []
    for index, block in enumerate(blocks):
        problem = _block_problem(block)
        if problem is not None:
            errors.append(f"[ERROR] {problem} [json-pointer:/blocks/{index}]")
    return errors


def _block_problem(block: object) -> str | None:
    if not isinstance(block, dict):
        return "block must be an object"
    try:
        parsed = Block.parse(dict(block))
        if parsed is None:
            return f"unsupported block type {block.get('type')!r}"
        parsed.validate_json()
        # to_dict() validates nested elements (buttons, text objects) too.
        parsed.to_dict()
    except Exception as exc:  # the SDK raises several types for malformed input
        return str(exc) or type(exc).__name__
    return None


def check_content(text: str, blocks: list[dict[str, Any]] | None, *, has_other: bool) -> None:
    """Apply chat.* content rules: something to show, not too long, valid blocks."""
    if not text and not blocks and not has_other:
        raise SlackError("no_text")
    if len(text) > MAX_TEXT_CHARS:
        raise SlackError("msg_too_long")
    if blocks is not None:
        errors = validate_blocks(blocks)
        if errors:
            raise SlackError("invalid_blocks", extra={"errors": errors})


class IdSource:
    """Sequential Slack-looking ids ("V0000000001"), readable in test failures."""

    def __init__(self) -> None:
        self._counters: dict[str, int] = defaultdict(int)

    def next(self, prefix: str) -> str:
        self._counters[prefix] += 1
        return f"{prefix}{self._counters[prefix]:010d}"


class Workspace:
    """The whole emulated workspace; see the module docstring for the division of labour."""

    def __init__(
        self,
        channels: Iterable[str],
        users: Mapping[str, str],
        usergroups: Mapping[str, Sequence[str]],
    ) -> None:
        self.channels: dict[str, Channel] = {cid: Channel(cid) for cid in channels}
        self.users = {BOT_USER_ID: BOT_USER_NAME, **users}
        self.usergroups = {gid: list(members) for gid, members in usergroups.items()}
        self.clock = TsClock()
        self.ids = IdSource()
        self.views: dict[str, dict[str, Any]] = {}
        self.files: dict[str, StoredFile] = {}
        self.calls: list[Call] = []
        self.faults: dict[str, deque[Fault]] = defaultdict(deque)
        self.stalls: dict[str, float] = {}
        self.buckets: dict[tuple[str, str], TokenBucket] = {}

    def reset(self) -> None:
        """Forget activity but keep the cast (channels, their flags, users, groups)."""
        for channel in self.channels.values():
            channel.clear()
        self.views.clear()
        self.files.clear()
        self.calls.clear()
        self.faults.clear()
        self.stalls.clear()
        self.buckets.clear()

    # -- channels and messages -------------------------------------------------------

    def channel(self, channel_id: str) -> Channel:
        try:
            return self.channels[channel_id]
        except KeyError:
            raise SlackError("channel_not_found") from None

    def writable_channel(self, channel_id: str) -> Channel:
        channel = self.channel(channel_id)
        if channel.archived:
            raise SlackError("is_archived")
        if not channel.member:
            raise SlackError("not_in_channel")
        return channel

    def thread_root(self, channel: Channel, ts: str) -> Message:
        """Resolve `ts` (a root or a reply) to its thread's root message."""
        message = channel.by_ts.get(ts)
        if message is None:
            raise SlackError("thread_not_found")
        if message.thread_ts is not None:
            return channel.by_ts[message.thread_ts]
        return message

    def post(
        self,
        channel_id: str,
        *,
        text: str,
        blocks: list[dict[str, Any]],
        thread_ts: str | None = None,
        metadata: dict[str, Any] | None = None,
        files: list[dict[str, Any]] | None = None,
        broadcast: bool = False,
    ) -> Message:
        """Post a bot message (top-level or into a thread) after Slack's channel checks."""
        channel = self.writable_channel(channel_id)
        root = self.thread_root(channel, thread_ts) if thread_ts else None
        message = Message(
            ts=self.clock.next(),
            channel=channel_id,
            text=text,
            blocks=blocks,
            thread_ts=root.ts if root else None,
            user=BOT_USER_ID,
            files=files or [],
            metadata=metadata,
            broadcast=broadcast and root is not None,
        )
        channel.by_ts[message.ts] = message
        if root is None:
            channel.timeline.append(message)
        else:
            channel.replies.setdefault(root.ts, []).append(message)
            if message.broadcast:
                channel.timeline.append(message)
        return message

    def update(
        self,
        channel_id: str,
        ts: str,
        *,
        text: str | None,
        blocks: list[dict[str, Any]] | None,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        channel = self.channel(channel_id)
        message = channel.by_ts.get(ts)
        if message is None:
            raise SlackError("message_not_found")
        if channel.archived:
            raise SlackError("is_archived")
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = blocks
        if metadata is not None:
            message.metadata = metadata
        message.edits += 1
        return message

    def post_ephemeral(
        self,
        channel_id: str,
        user: str,
        *,
        text: str,
        blocks: list[dict[str, Any]],
        thread_ts: str | None,
    ) -> Message:
        channel = self.writable_channel(channel_id)
        if user not in self.users:
            raise SlackError("user_not_found")
        message = Message(
            ts=self.clock.next(),
            channel=channel_id,
            text=text,
            blocks=blocks,
            thread_ts=thread_ts,
            user=user,
        )
        channel.ephemerals.append(message)
        return message

    def find(self, channel_id: str, ts: str) -> Message:
        message = self.channel(channel_id).by_ts.get(ts)
        if message is None:
            raise SlackError("message_not_found")
        return message

    def thread(self, channel_id: str, ts: str) -> list[Message]:
        channel = self.channel(channel_id)
        root = self.thread_root(channel, ts)
        return [root, *channel.replies.get(root.ts, [])]

    def render(self, message: Message) -> dict[str, Any]:
        """Slack's JSON shape for a message, including thread summary fields on roots."""
        out: dict[str, Any] = {
            "type": "message",
            "ts": message.ts,
            "text": message.text,
            "user": message.user,
            "team": TEAM_ID,
        }
        if message.user == BOT_USER_ID:
            out.update(bot_id=BOT_ID, app_id=APP_ID)
        if message.blocks:
            out["blocks"] = message.blocks
        if message.files:
            out.update(files=message.files, upload=False)
        if message.metadata:
            out["metadata"] = message.metadata
        if message.broadcast:
            out["subtype"] = "thread_broadcast"
        if message.thread_ts is not None:
            root = self.channels[message.channel].by_ts[message.thread_ts]
            out.update(thread_ts=message.thread_ts, parent_user_id=root.user)
        else:
            out.update(self._thread_summary(message))
        return out

    def _thread_summary(self, root: Message) -> dict[str, Any]:
        replies = self.channels[root.channel].replies.get(root.ts, [])
        if not replies:
            return {}
        reply_users = list(dict.fromkeys(r.user for r in replies if r.user))
        return {
            "thread_ts": root.ts,
            "reply_count": len(replies),
            "reply_users": reply_users,
            "reply_users_count": len(reply_users),
            "latest_reply": replies[-1].ts,
        }

    # -- views ------------------------------------------------------------------------

    def open_view(self, view: dict[str, Any], *, root_view_id: str | None = None) -> dict[str, Any]:
        external_id = view.get("external_id") or ""
        if external_id and self._view_by_external_id(external_id) is not None:
            raise SlackError("duplicate_external_id")
        view_id = self.ids.next("V")
        stored = {
            **view,
            "id": view_id,
            "team_id": TEAM_ID,
            "app_id": APP_ID,
            "bot_id": BOT_ID,
            "external_id": external_id,
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": self._view_hash(),
            "root_view_id": root_view_id or view_id,
            "previous_view_id": None,
        }
        self.views[view_id] = stored
        return stored

    def update_view(
        self,
        view: dict[str, Any],
        *,
        view_id: str | None,
        external_id: str | None,
        expected_hash: str | None,
    ) -> dict[str, Any]:
        current = self.views.get(view_id) if view_id else self._view_by_external_id(external_id)
        if current is None:
            raise SlackError("not_found")
        if expected_hash and expected_hash != current["hash"]:
            raise SlackError("hash_conflict")
        keep = {k: current[k] for k in ("id", "team_id", "app_id", "bot_id", "root_view_id")}
        # The external id is the caller's handle on the view; a payload without one keeps it.
        keep["external_id"] = view.get("external_id") or current["external_id"]
        current.clear()
        current.update(view, **keep)
        current.setdefault("private_metadata", "")
        current.setdefault("callback_id", "")
        current.update(state={"values": {}}, hash=self._view_hash(), previous_view_id=None)
        return current

    def latest_modal_root(self) -> str | None:
        modals = [v for v in self.views.values() if v.get("type") == "modal"]
        return modals[-1]["root_view_id"] if modals else None

    def _view_by_external_id(self, external_id: str | None) -> dict[str, Any] | None:
        if not external_id:
            return None
        return next((v for v in self.views.values() if v["external_id"] == external_id), None)

    def _view_hash(self) -> str:
        return f"{int(time.time())}.{self.ids.next('H')[1:]}"

    # -- files ------------------------------------------------------------------------

    def reserve_file(self, name: str, length: int) -> StoredFile:
        stored = StoredFile(id=self.ids.next("F"), name=name, length=length)
        self.files[stored.id] = stored
        return stored

    def receive_upload(self, file_id: str, data: bytes) -> bool:
        stored = self.files.get(file_id)
        if stored is None:
            return False
        stored.data = data
        return True

    def complete_upload(self, entries: list[dict[str, Any]]) -> list[StoredFile]:
        completed = []
        for entry in entries:
            stored = self.files.get(str(entry.get("id")))
            if stored is None or stored.data is None:
                raise SlackError("file_not_found")
            stored.title = str(entry.get("title") or stored.name)
            completed.append(stored)
        return completed

    def share_files(
        self,
        files: list[StoredFile],
        channel_id: str,
        *,
        comment: str,
        thread_ts: str | None,
    ) -> Message:
        """Files shared into a conversation appear as one message carrying them."""
        self.writable_channel(channel_id)
        for stored in files:
            stored.channels.append(channel_id)
        return self.post(
            channel_id,
            text=comment,
            blocks=[],
            thread_ts=thread_ts,
            files=[stored.public() for stored in files],
        )

    # -- users, faults, limits --------------------------------------------------------

    def user(self, user_id: str) -> dict[str, Any]:
        name = self.users.get(user_id)
        if name is None:
            raise SlackError("user_not_found")
        return {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": name,
            "real_name": name.title(),
            "tz": "Etc/UTC",
            "tz_offset": 0,
            "deleted": False,
            "is_bot": user_id == BOT_USER_ID,
            "profile": {"display_name": name, "real_name": name.title()},
        }

    def usergroup_members(self, group_id: str) -> list[str]:
        members = self.usergroups.get(group_id)
        if members is None:
            raise SlackError("no_such_subteam")
        return list(members)

    def take_fault(self, method: str) -> Fault | None:
        queue = self.faults.get(method)
        return queue.popleft() if queue else None

    def within_rate_limit(self, method: str, channel_id: str) -> bool:
        limits = RATE_LIMITS.get(method)
        if limits is None:
            return True
        bucket = self.buckets.setdefault((method, channel_id), TokenBucket(*limits))
        return bucket.take()
