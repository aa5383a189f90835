"""In-memory model of a Slack workspace, the state behind the local Web API emulator.

This module knows nothing about HTTP: it holds channels, messages, threads, views, files,
users and usergroups, plus the bookkeeping tests inspect (call log, queued faults, stalls,
rate-limit buckets). The rules that depend on that state (unknown or archived channel,
missing thread, hash conflict...) live here; rules about a payload alone are in
`slack_limits`, so the HTTP layer only has to translate parameters in and JSON out.

Nothing here is thread-safe on its own: `SlackEmulator` serialises all access with one lock.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sandbox.slack_limits import HistoryTier, RateLimiter
from sandbox.slack_model import (
    APP_ID,
    BOT_ID,
    BOT_USER_ID,
    BOT_USER_NAME,
    TEAM_ID,
    Call,
    Channel,
    Fault,
    IdSource,
    Message,
    SlackError,
    StoredFile,
    TsClock,
)
from sandbox.slack_ui_state import UiState

# transcript.py imports the bot's identity and Message from here (they are defined in slack_model).
__all__ = ["BOT_USER_ID", "BOT_USER_NAME", "Message", "Workspace"]


class Workspace:
    """The whole emulated workspace; see the module docstring for the division of labour."""

    def __init__(
        self,
        channels: Iterable[str],
        users: Mapping[str, str],
        usergroups: Mapping[str, Sequence[str]],
        *,
        history: HistoryTier | None = None,
        channel_names: Mapping[str, str] | None = None,
    ) -> None:
        self.channels: dict[str, Channel] = {cid: Channel(cid) for cid in channels}
        self.channel_names = dict(channel_names or {})
        self.users = {BOT_USER_ID: BOT_USER_NAME, **users}
        self.usergroups = {gid: list(members) for gid, members in usergroups.items()}
        self.clock = TsClock()
        self.ids = IdSource()
        self.views: dict[str, dict[str, Any]] = {}
        # Each person's Home tab: the view last published to them (views.publish).
        self.homes: dict[str, dict[str, Any]] = {}
        # Whether the app has its Home tab turned on (App Home settings, `home_tab_enabled`).
        self.home_enabled = True
        self.files: dict[str, StoredFile] = {}
        self.calls: list[Call] = []
        self.faults: dict[str, deque[Fault]] = defaultdict(deque)
        self.stalls: dict[str, float] = {}
        # Posts Slack answers `ok` but shows nowhere (a thread_ts naming no message; see post).
        self.unseen: list[Message] = []
        # How this app reads history: Tier 3 (internal app) unless the emulator says otherwise.
        self.rate_limits = RateLimiter(history or HistoryTier.of(3))
        # Whether this workspace takes Slack's `data_visualization` block (see SlackEmulator).
        self.chart_blocks = True
        self.ui = UiState()
        # Bumped on every change a client would show (the local page refreshes on it).
        self.version = 0

    def reset(self) -> None:
        """Forget activity but keep the cast (channels, their flags, users, groups)."""
        for channel in self.channels.values():
            channel.clear()
        self.views.clear()
        self.homes.clear()
        self.files.clear()
        self.calls.clear()
        self.faults.clear()
        self.stalls.clear()
        self.unseen.clear()
        self.rate_limits.reset()
        self.ui.reset()

    @property
    def history(self) -> HistoryTier:
        """The tier this app's history reads are served at (page sizes and call rate)."""
        return self.rate_limits.history

    # -- channels and messages -------------------------------------------------------

    def channel_name(self, channel_id: str) -> str:
        """The name Slack's clients and `conversations.info` give the channel."""
        return self.channel_names.get(channel_id, channel_id.lower())

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

    def set_members(self, channel_id: str, users: Iterable[str] | None) -> None:
        """Who is in a channel; None (the default) is everyone in the workspace."""
        self.channel(channel_id).members = None if users is None else set(users)

    def thread_root(self, channel: Channel, ts: str) -> Message:
        """Resolve `ts` (a root or a reply) to its thread's root message."""
        root = _root_of(channel, ts)
        if root is None:
            raise SlackError("thread_not_found")
        return root

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
        """Post a bot message (top-level or into a thread) after Slack's channel checks.

        A `thread_ts` naming no message is no error: chat.postMessage's documented errors have
        none for it (only `cannot_reply_to_message`, for message types that take no replies).
        Where the message goes Slack's docs do not say; people who sent one (a float that lost
        the ts's trailing zeros) all report an ordinary `ok` answer and a message shown
        nowhere, neither in the channel nor in a thread: node-slack-sdk#780 ("will succeed in
        posting to the channel but the message won't thread and won't be visible"),
        python-slack-sdk#840 ("the incorrect thread_ts messages are nowhere to be seen"),
        jolicode/slack-php-api#40. So it is answered and kept in `unseen`, out of every
        conversation (an emulator's guess from those reports). A reply's ts joins the reply's
        thread: Slack's docs only advise against it ("Avoid using a reply's ts value; use its
        parent instead", chat.postMessage `thread_ts`), and it "did work"
        (discourse-chat-integration#159, which moved to the parent's ts all the same).
        """
        channel = self.writable_channel(channel_id)
        root = _root_of(channel, thread_ts) if thread_ts else None
        unseen = bool(thread_ts) and root is None
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
        if unseen:
            self.unseen.append(message)
            return message
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
        message = self.find(channel_id, ts)
        if self.channels[channel_id].archived:
            raise SlackError("is_archived")
        if message.user != BOT_USER_ID:  # an app edits only its own messages
            raise SlackError("cant_update_message")
        # Counted first: a reader in another thread that sees the new content sees the edit too.
        message.edits += 1
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = blocks
        if metadata is not None:
            message.metadata = metadata
        return message

    def delete(self, channel_id: str, ts: str) -> None:
        """Remove a message (and, for a root, its thread) as chat.delete would."""
        channel = self.channel(channel_id)
        message = self.find(channel_id, ts)
        del channel.by_ts[ts]
        if message.thread_ts is None:
            channel.timeline.remove(message)
            for reply in channel.replies.pop(ts, []):
                channel.by_ts.pop(reply.ts, None)
        else:
            channel.replies[message.thread_ts].remove(message)

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
        # chat.postEphemeral's documented errors have no user_not_found: a user who is not in
        # the workspace is not in the channel either.
        if user not in self.users or not channel.has_member(user):
            raise SlackError("user_not_in_channel")
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
        replies = self._replies(root)
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
        view = {**view, "blocks": kept_inputs(current.get("blocks"), view.get("blocks"))}
        current.clear()
        current.update(view, **keep)
        current.setdefault("private_metadata", "")
        current.setdefault("callback_id", "")
        current.update(state={"values": {}}, hash=self._view_hash(), previous_view_id=None)
        return current

    def publish_home(
        self, user: str, view: dict[str, Any], *, expected_hash: str | None
    ) -> dict[str, Any]:
        """`user`'s Home tab shows `view` from now on: the same view ID as before for that person,
        a new hash each time. A `hash` that is not the current one's is `hash_conflict`: someone
        published in between."""
        current = self.homes.get(user)
        if expected_hash and current is not None and expected_hash != current["hash"]:
            raise SlackError("hash_conflict")
        external_id = view.get("external_id") or ""
        if external_id:
            others = [*self.views.values(), *(v for u, v in self.homes.items() if u != user)]
            if any(v.get("external_id") == external_id for v in others):
                raise SlackError("duplicate_external_id")
        view_id = current["id"] if current is not None else self.ids.next("V")
        published = {
            **view,
            "id": view_id,
            "team_id": TEAM_ID,
            "type": "home",
            "close": None,
            "submit": None,
            "external_id": external_id,
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": self._view_hash(),
            "clear_on_close": False,
            "notify_on_close": False,
            "root_view_id": view_id,
            "previous_view_id": None,
            "app_id": APP_ID,
            "app_installed_team_id": TEAM_ID,
            "bot_id": BOT_ID,
        }
        self.homes[user] = published
        return published

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

    # -- users and faults -------------------------------------------------------------

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

    def take_fault(self, method: str, params: Mapping[str, Any]) -> Fault | None:
        """The first fault queued for `method` that applies to a call with `params`."""
        queue = self.faults.get(method, deque())
        fault = next((f for f in queue if f.applies(params)), None)
        if fault is not None:
            queue.remove(fault)
        return fault

    # -- the whole state as JSON, for out-of-process users ----------------------------

    def snapshot(self) -> dict[str, Any]:
        """Everything a test in another process may check, as JSON (GET /_emulator/state)."""
        return {
            "channels": {cid: self.channel_json(cid) for cid in self.channels},
            "views": list(self.views.values()),
            "homes": dict(self.homes),
            "files": [f.public() for f in self.files.values()],
            "calls": [
                {"method": c.method, "status": c.status, "ok": c.ok, "error": c.error}
                for c in self.calls
            ],
        }

    def channel_json(self, channel_id: str) -> dict[str, Any]:
        """One channel as a client shows it: roots with their replies, and ephemerals."""
        channel = self.channels[channel_id]
        roots = [m for m in channel.timeline if m.thread_ts is None]
        return {
            "archived": channel.archived,
            "member": channel.member,
            "messages": [
                {**self.render(m), "edits": m.edits, "replies": self._replies_json(m)}
                for m in roots
            ],
            "ephemerals": [_ephemeral_json(m) for m in channel.ephemerals],
        }

    def _replies_json(self, root: Message) -> list[dict[str, Any]]:
        return [{**self.render(m), "edits": m.edits} for m in self._replies(root)]

    def _replies(self, root: Message) -> list[Message]:
        return self.channels[root.channel].replies.get(root.ts, [])


def _root_of(channel: Channel, ts: str) -> Message | None:
    """The root of the thread `ts` (a root or a reply) is in; None if no message has that ts."""
    message = channel.by_ts.get(ts)
    if message is None or message.thread_ts is None:
        return message
    return channel.by_ts[message.thread_ts]


def _ephemeral_json(message: Message) -> dict[str, Any]:
    return {
        "ts": message.ts,
        "user": message.user,
        "text": message.text,
        "blocks": message.blocks,
        "thread_ts": message.thread_ts,
    }


def kept_inputs(before: object, after: object) -> object:
    """The blocks of an updated view as Slack shows them: an input whose block ID and action ID
    the view had already keeps what it showed (its `initial_*`), whatever the update says. Only
    a new block or action ID shows the update's initial value (Slack's behaviour, as its SDKs'
    maintainers describe it: bolt-js#290). The person's own typing is the page's, not kept
    here; an untouched input keeps its first initial value, as in Slack."""
    if not isinstance(before, list) or not isinstance(after, list):
        return after
    shown = {
        key: element
        for block in before
        if (key := _input_key(block)) is not None
        and isinstance(element := block.get("element"), dict)
    }
    blocks = []
    for block in after:
        key = _input_key(block)
        if key is not None and key in shown:
            element = {k: v for k, v in block["element"].items() if not k.startswith("initial_")}
            element.update({k: v for k, v in shown[key].items() if k.startswith("initial_")})
            block = {**block, "element": element}
        blocks.append(block)
    return blocks


def _input_key(block: object) -> tuple[str, str] | None:
    """An input block's (block ID, its element's action ID); None for any other block, or one
    without both."""
    if not isinstance(block, dict) or block.get("type") != "input":
        return None
    element = block.get("element")
    block_id = block.get("block_id")
    action_id = element.get("action_id") if isinstance(element, dict) else None
    if not isinstance(block_id, str) or not block_id or not isinstance(action_id, str):
        return None
    return block_id, action_id
