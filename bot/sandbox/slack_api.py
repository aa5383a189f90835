"""A local Slack Web API emulator served over real HTTP.

The bot talks to Slack through slack_sdk's `AsyncWebClient`; pointing its `base_url` here
lets tests and the local demo exercise the real client (serialisation, retries, error
mapping) without a workspace. State lives in `slack_state.Workspace`; this module is the
HTTP layer: it decodes parameters the way Slack accepts them, applies auth, injected
faults, stalls and rate limits, dispatches to per-method handlers, and logs every call.

The emulator runs in a server thread while tests read it from the main thread, so all
state access goes through one lock and inspection methods hand out deep copies.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot.sandbox.slack_state import (
    BOT_ID,
    BOT_USER_ID,
    BOT_USER_NAME,
    MAX_VIEW_BLOCKS,
    TEAM_ID,
    TEAM_NAME,
    Call,
    Channel,
    Fault,
    Message,
    SlackError,
    Workspace,
    check_content,
    invalid_arguments,
    validate_blocks,
)

__all__ = ["UPLOAD_METHOD", "Call", "Message", "SlackEmulator"]

DEFAULT_USERS: Mapping[str, str] = {"U0ALICE": "alice", "U0BOB": "bob"}
DEFAULT_USERGROUPS: Mapping[str, Sequence[str]] = {"S0ONCALL": ["U0ALICE"]}

# The byte upload of files.upload v2 goes to a URL, not a Web API method; it is logged
# (and fault-injectable) under this name so tests can see all three upload steps.
UPLOAD_METHOD = "files.upload_bytes"

# Parameters that slack_sdk (or a curl user) may send as JSON strings inside a form post.
_JSON_FIELDS = ("blocks", "attachments", "files", "view", "metadata")

Params = dict[str, Any]
Handler = Callable[[Workspace, Params, str], dict[str, Any]]


@dataclass
class _Outcome:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def failure(cls, exc: SlackError) -> _Outcome:
        return cls(exc.status, {"ok": False, "error": exc.error, **exc.extra}, exc.headers)

    @property
    def error(self) -> str | None:
        return None if self.body.get("ok") else self.body.get("error")


# -- parameter decoding --------------------------------------------------------------------


async def read_params(request: Request) -> Params:
    """Merge query string and body (JSON or urlencoded form), like Slack accepts them."""
    params: Params = dict(request.query_params)
    body = await request.body()
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if body:
        if content_type == "application/json":
            params.update(_json_body(body))
        elif content_type in ("", "application/x-www-form-urlencoded"):
            params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        else:
            raise SlackError("invalid_form_data")
    for name in _JSON_FIELDS:
        value = params.get(name)
        if isinstance(value, str) and value:
            # Undecodable values stay strings so the handler reports a field-specific error.
            with contextlib.suppress(ValueError):
                params[name] = json.loads(value)
    return params


def _json_body(body: bytes) -> Params:
    try:
        decoded = json.loads(body)
    except ValueError:
        raise SlackError("invalid_json") from None
    if not isinstance(decoded, dict):
        raise SlackError("invalid_json")
    return decoded


def _bearer_token(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credentials.strip() or None


def _required(p: Params, name: str) -> str:
    value = p.get(name)
    if value is None or value == "":
        raise invalid_arguments(f"[ERROR] missing required field: {name}")
    return str(value)


def _optional(p: Params, name: str) -> str | None:
    value = p.get(name)
    return None if value is None or value == "" else str(value)


def _flag(p: Params, name: str) -> bool:
    return str(p.get(name, "")).lower() in ("1", "true")


def _integer(p: Params, name: str, default: int) -> int:
    value = p.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise invalid_arguments(f"[ERROR] {name} must be an integer") from None


def _blocks(p: Params) -> list[dict[str, Any]] | None:
    blocks = p.get("blocks")
    if blocks is None or isinstance(blocks, list):
        return blocks
    raise SlackError("invalid_blocks_format")


def _metadata(p: Params) -> dict[str, Any] | None:
    metadata = p.get("metadata")
    if metadata is None or isinstance(metadata, dict):
        return metadata
    raise SlackError("invalid_metadata_format")


def _text_and_blocks(p: Params) -> tuple[str, list[dict[str, Any]] | None]:
    blocks = _blocks(p)
    text = str(p.get("text") or "")
    check_content(text, blocks, has_other=bool(p.get("attachments")))
    return text, blocks


# -- chat.* and conversations.* ----------------------------------------------------------


def _auth_test(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    return {
        "url": base_url,
        "team": TEAM_NAME,
        "user": BOT_USER_NAME,
        "team_id": TEAM_ID,
        "user_id": BOT_USER_ID,
        "bot_id": BOT_ID,
        "is_enterprise_install": False,
    }


def _chat_post_message(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel = _required(p, "channel")
    ws.writable_channel(channel)  # Slack reports channel problems before content problems
    text, blocks = _text_and_blocks(p)
    message = ws.post(
        channel,
        text=text,
        blocks=blocks or [],
        thread_ts=_optional(p, "thread_ts"),
        metadata=_metadata(p),
        broadcast=_flag(p, "reply_broadcast"),
    )
    return {"channel": channel, "ts": message.ts, "message": ws.render(message)}


def _chat_update(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel, ts = _required(p, "channel"), _required(p, "ts")
    ws.find(channel, ts)
    text, blocks = _text_and_blocks(p)
    new_text = text if "text" in p else None
    message = ws.update(channel, ts, text=new_text, blocks=blocks, metadata=_metadata(p))
    return {"channel": channel, "ts": ts, "text": message.text, "message": ws.render(message)}


def _chat_post_ephemeral(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel, user = _required(p, "channel"), _required(p, "user")
    ws.writable_channel(channel)
    text, blocks = _text_and_blocks(p)
    message = ws.post_ephemeral(
        channel, user, text=text, blocks=blocks or [], thread_ts=_optional(p, "thread_ts")
    )
    return {"message_ts": message.ts}


def _chat_get_permalink(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel, ts = _required(p, "channel"), _required(p, "message_ts")
    message = ws.find(channel, ts)
    link = f"{base_url}archives/{channel}/p{ts.replace('.', '')}"
    if message.thread_ts is not None:
        link += f"?thread_ts={message.thread_ts}&cid={channel}"
    return {"channel": channel, "permalink": link}


def _conversations_history(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel = ws.channel(_required(p, "channel"))
    if not channel.member:
        raise SlackError("not_in_channel")
    inclusive = _flag(p, "inclusive")
    oldest, latest = _ts_bound(p, "oldest"), _ts_bound(p, "latest")
    newest_first = [
        m for m in reversed(channel.timeline) if _in_window(m.ts, oldest, latest, inclusive)
    ]
    page, paging = _paginate(newest_first, p, default_limit=100)
    return {"messages": [ws.render(m) for m in page], "pin_count": 0, **paging}


def _conversations_replies(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    channel_id, ts = _required(p, "channel"), _required(p, "ts")
    if not ws.channel(channel_id).member:
        raise SlackError("not_in_channel")
    page, paging = _paginate(ws.thread(channel_id, ts), p, default_limit=1000)
    return {"messages": [ws.render(m) for m in page], **paging}


def _ts_bound(p: Params, name: str) -> Decimal | None:
    value = _optional(p, name)
    if value is None:
        return None
    try:
        return Decimal(value)
    except InvalidOperation:
        raise invalid_arguments(f"[ERROR] {name} must be a timestamp") from None


def _in_window(ts: str, oldest: Decimal | None, latest: Decimal | None, inclusive: bool) -> bool:
    value = Decimal(ts)
    if oldest is not None and (value < oldest or (value == oldest and not inclusive)):
        return False
    return latest is None or value < latest or (value == latest and inclusive)


def _paginate(
    items: list[Message], p: Params, *, default_limit: int
) -> tuple[list[Message], Params]:
    """Offset cursors, base64-wrapped so clients treat them as opaque like Slack's."""
    limit = _integer(p, "limit", default_limit)
    limit = limit if limit > 0 else default_limit
    start = _decode_cursor(_optional(p, "cursor"))
    end = start + limit
    next_cursor = base64.b64encode(f"offset:{end}".encode()).decode() if end < len(items) else ""
    paging = {"has_more": bool(next_cursor), "response_metadata": {"next_cursor": next_cursor}}
    return items[start:end], paging


def _decode_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        prefix, _, offset = base64.b64decode(cursor).decode().partition(":")
        if prefix == "offset":
            return max(0, int(offset))
    except ValueError:
        pass
    raise SlackError("invalid_cursor")


# -- views.* -----------------------------------------------------------------------------


def _view(p: Params) -> dict[str, Any]:
    """Structural checks Slack applies to a view payload, reported as invalid_arguments."""
    view = p.get("view")
    if not isinstance(view, dict):
        raise invalid_arguments("[ERROR] missing required field: view")
    if view.get("type") not in ("modal", "home"):
        raise invalid_arguments("[ERROR] view type must be modal or home [json-pointer:/view/type]")
    if view["type"] == "modal" and not view.get("title"):
        raise invalid_arguments("[ERROR] missing required field: title [json-pointer:/view]")
    errors = validate_blocks(view.get("blocks", []), limit=MAX_VIEW_BLOCKS)
    if errors:
        raise invalid_arguments(*(e.replace("/blocks", "/view/blocks") for e in errors))
    return view


def _views_open(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    _required(p, "trigger_id")
    return {"view": ws.open_view(_view(p))}


def _views_push(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    _required(p, "trigger_id")
    return {"view": ws.open_view(_view(p), root_view_id=ws.latest_modal_root())}


def _views_update(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    view = _view(p)
    view_id, external_id = _optional(p, "view_id"), _optional(p, "external_id")
    if view_id is None and external_id is None:
        raise invalid_arguments("[ERROR] either view_id or external_id is required")
    updated = ws.update_view(
        view, view_id=view_id, external_id=external_id, expected_hash=_optional(p, "hash")
    )
    return {"view": updated}


# -- users.*, usergroups.*, files.* --------------------------------------------------------


def _users_info(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    return {"user": ws.user(_required(p, "user"))}


def _usergroups_users_list(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    return {"users": ws.usergroup_members(_required(p, "usergroup"))}


def _files_get_upload_url(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    filename = _required(p, "filename")
    length = _integer(p, "length", -1)
    if length < 0:
        raise invalid_arguments("[ERROR] missing required field: length")
    stored = ws.reserve_file(filename, length)
    return {"upload_url": f"{base_url}_emulator/upload/{stored.id}", "file_id": stored.id}


def _files_complete_upload(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    entries = p.get("files")
    if not isinstance(entries, list) or not entries:
        raise invalid_arguments("[ERROR] missing required field: files")
    channel_id = _optional(p, "channel_id")
    targets = (
        [channel_id] if channel_id else [c for c in str(p.get("channels", "")).split(",") if c]
    )
    thread_ts = _optional(p, "thread_ts")
    for target in targets:  # check every destination before changing anything
        channel = ws.writable_channel(target)
        if thread_ts:
            ws.thread_root(channel, thread_ts)
    files = ws.complete_upload(entries)
    comment = str(p.get("initial_comment") or "")
    for target in targets:
        ws.share_files(files, target, comment=comment, thread_ts=thread_ts)
    return {"files": [stored.public() for stored in files]}


def _files_info(ws: Workspace, p: Params, base_url: str) -> dict[str, Any]:
    stored = ws.files.get(_required(p, "file"))
    if stored is None:
        raise SlackError("file_not_found")
    return {"file": stored.public()}


METHODS: dict[str, Handler] = {
    "auth.test": _auth_test,
    "chat.postMessage": _chat_post_message,
    "chat.update": _chat_update,
    "chat.postEphemeral": _chat_post_ephemeral,
    "chat.getPermalink": _chat_get_permalink,
    "conversations.history": _conversations_history,
    "conversations.replies": _conversations_replies,
    "views.open": _views_open,
    "views.push": _views_push,
    "views.update": _views_update,
    "users.info": _users_info,
    "usergroups.users.list": _usergroups_users_list,
    "files.getUploadURLExternal": _files_get_upload_url,
    "files.completeUploadExternal": _files_complete_upload,
    "files.info": _files_info,
}


# -- the emulator ------------------------------------------------------------------------


class SlackEmulator:
    """Slack Web API stand-in: an ASGI `app` plus inspection and fault-injection hooks.

    `enforce_rate_limits` is a plain attribute so a test can switch it on for one case
    without standing up a second server.
    """

    def __init__(
        self,
        *,
        token: str = "xoxb-queuepilot-test",
        channels: Iterable[str] = ("C0QUEUE",),
        users: Mapping[str, str] | None = None,
        usergroups: Mapping[str, Sequence[str]] | None = None,
        enforce_rate_limits: bool = False,
    ) -> None:
        self.token = token
        self.enforce_rate_limits = enforce_rate_limits
        self._lock = threading.Lock()
        self._ws = Workspace(
            channels,
            DEFAULT_USERS if users is None else users,
            DEFAULT_USERGROUPS if usergroups is None else usergroups,
        )
        self._stalled: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self.app = Starlette(
            routes=[
                Route("/api/{method:str}", self._api, methods=["GET", "POST"]),
                Route("/_emulator/upload/{file_id:str}", self._upload, methods=["POST"]),
                Route("/_emulator/state", self._state_endpoint, methods=["GET"]),
                Route("/_emulator/faults", self._faults_endpoint, methods=["POST"]),
                Route("/_emulator/stalls", self._stalls_endpoint, methods=["POST"]),
                Route("/_emulator/reset", self._reset_endpoint, methods=["POST"]),
                Route("/_emulator/healthz", self._healthz_endpoint, methods=["GET"]),
            ]
        )

    # -- inspection (main thread) --------------------------------------------------------

    def channel_messages(self, channel: str) -> list[Message]:
        """Top-level messages in post order; raises KeyError for an unknown channel."""
        with self._lock:
            timeline = self._known_channel(channel).timeline
            return copy.deepcopy([m for m in timeline if m.thread_ts is None])

    def thread(self, channel: str, ts: str) -> list[Message]:
        """The root message followed by its replies; raises KeyError if there is no such ts."""
        with self._lock:
            self._known_channel(channel)
            try:
                return copy.deepcopy(self._ws.thread(channel, ts))
            except SlackError:
                raise KeyError(f"no message {ts} in {channel}") from None

    def ephemerals(self, channel: str | None = None) -> list[Message]:
        """Ephemeral messages (user = the recipient), for one channel or all in ts order."""
        with self._lock:
            if channel is not None:
                return copy.deepcopy(self._known_channel(channel).ephemerals)
            found = [m for c in self._ws.channels.values() for m in c.ephemerals]
            return copy.deepcopy(sorted(found, key=lambda m: Decimal(m.ts)))

    def views(self) -> list[dict[str, Any]]:
        """Every view opened or pushed, in that order, each in its latest (updated) state."""
        with self._lock:
            return copy.deepcopy(list(self._ws.views.values()))

    def calls(self, method: str | None = None) -> list[Call]:
        """Every request received (failed and faulted ones too), in arrival order."""
        with self._lock:
            return copy.deepcopy([c for c in self._ws.calls if method in (None, c.method)])

    def _known_channel(self, channel: str) -> Channel:
        # A typo in a test's channel id should fail loudly, not read as "no messages".
        if channel not in self._ws.channels:
            raise KeyError(f"unknown channel {channel!r}")
        return self._ws.channels[channel]

    # -- control ---------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int = 1,
        error: str | None = None,
        count: int = 1,
    ) -> None:
        """Queue `count` failures for the next calls of `method` (see `Fault.to_error`)."""
        if status == 200 and not error:
            raise ValueError("a status-200 fault needs an error code, e.g. 'channel_not_found'")
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            queue = self._ws.faults[method]
            queue.extend(Fault(status, retry_after, error) for _ in range(count))

    def stall(self, method: str, seconds: float) -> None:
        """Delay responses to `method` by `seconds`; 0 clears it and releases held calls.

        The call takes effect before the delay, modelling the nastiest timeout for a
        client: Slack did the work but the answer never arrived.
        """
        with self._lock:
            if seconds > 0:
                self._ws.stalls[method] = seconds
            else:
                self._ws.stalls.pop(method, None)
                self._release_stalled()

    def archive(self, channel: str) -> None:
        """Archive a channel: later posts fail with is_archived, reads still work."""
        with self._lock:
            self._known_channel(channel).archived = True

    def add_channel(self, channel: str, *, member: bool = True) -> None:
        """Create a channel, or change the bot's membership of an existing one."""
        with self._lock:
            existing = self._ws.channels.setdefault(channel, Channel(channel))
            existing.member = member

    def reset(self) -> None:
        """Forget messages, views, files, calls, faults and stalls; keep channels and users."""
        with self._lock:
            self._ws.reset()
            self._release_stalled()

    def _release_stalled(self) -> None:
        for loop, released in self._stalled:
            with contextlib.suppress(RuntimeError):  # the server loop may already be closed
                loop.call_soon_threadsafe(released.set)

    # -- HTTP pipeline (server thread) ------------------------------------------------------

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        at = time.monotonic()
        params: Params = {}
        read_error: SlackError | None = None
        try:
            params = await read_params(request)
        except SlackError as exc:
            read_error = exc
        token = _bearer_token(request) or _optional(params, "token")
        if "token" in params:
            params["token"] = "[redacted]"
        with self._lock:
            if read_error is not None:
                outcome = _Outcome.failure(read_error)
            else:
                outcome = self._answer(method, params, token, str(request.base_url))
            self._log(method, params, outcome, at)
        await self._stall(method)
        return JSONResponse(outcome.body, status_code=outcome.status, headers=outcome.headers)

    def _answer(self, method: str, params: Params, token: str | None, base_url: str) -> _Outcome:
        try:
            fault = self._ws.take_fault(method)
            if fault is not None:
                raise fault.to_error()
            handler = METHODS.get(method)
            if handler is None:
                raise SlackError("unknown_method")
            if token is None:
                raise SlackError("not_authed")
            if token != self.token:
                raise SlackError("invalid_auth")
            self._check_rate_limit(method, params)
            return _Outcome(200, {"ok": True, **handler(self._ws, params, base_url)})
        except SlackError as exc:
            return _Outcome.failure(exc)

    def _check_rate_limit(self, method: str, params: Params) -> None:
        channel = str(params.get("channel", ""))
        if self.enforce_rate_limits and not self._ws.within_rate_limit(method, channel):
            raise SlackError("ratelimited", status=429, headers={"Retry-After": "1"})

    def _log(self, method: str, params: Params, outcome: _Outcome, at: float) -> None:
        ok = outcome.status == 200 and outcome.error is None
        call = Call(method, copy.deepcopy(params), outcome.status, ok, outcome.error, at)
        self._ws.calls.append(call)

    async def _stall(self, method: str) -> None:
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:  # read and register together so stall(m, 0) cannot slip between
            seconds = self._ws.stalls.get(method, 0.0)
            if seconds <= 0:
                return
            self._stalled.add(waiter)
        try:
            await asyncio.wait_for(waiter[1].wait(), timeout=seconds)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._stalled.discard(waiter)

    async def _upload(self, request: Request) -> Response:
        """The presigned upload URL: stores raw bytes and answers in plain text like Slack."""
        file_id = request.path_params["file_id"]
        at = time.monotonic()
        data = await request.body()
        with self._lock:
            fault = self._ws.take_fault(UPLOAD_METHOD)
            if fault is not None:
                outcome = _Outcome.failure(fault.to_error())
            elif self._ws.receive_upload(file_id, data):
                outcome = _Outcome(200, {"ok": True})
            else:
                outcome = _Outcome(404, {"ok": False, "error": "file_not_found"})
            self._log(UPLOAD_METHOD, {"file_id": file_id, "length": len(data)}, outcome, at)
        await self._stall(UPLOAD_METHOD)
        if outcome.status == 200:
            return PlainTextResponse(f"OK - {len(data)}")
        return JSONResponse(outcome.body, status_code=outcome.status, headers=outcome.headers)

    # -- control endpoints for out-of-process users ------------------------------------------

    async def _state_endpoint(self, request: Request) -> Response:
        with self._lock:
            return JSONResponse(self._snapshot())

    def _snapshot(self) -> dict[str, Any]:
        ws = self._ws
        channels = {}
        for cid, channel in ws.channels.items():
            roots = [m for m in channel.timeline if m.thread_ts is None]
            channels[cid] = {
                "archived": channel.archived,
                "member": channel.member,
                "messages": [
                    {**ws.render(m), "edits": m.edits, "replies": _replies(ws, m)} for m in roots
                ],
                "ephemerals": [_ephemeral_json(m) for m in channel.ephemerals],
            }
        return {
            "channels": channels,
            "views": list(ws.views.values()),
            "files": [f.public() for f in ws.files.values()],
            "calls": [
                {"method": c.method, "status": c.status, "ok": c.ok, "error": c.error}
                for c in ws.calls
            ],
        }

    async def _faults_endpoint(self, request: Request) -> Response:
        try:
            spec = _json_body(await request.body())
            self.fail_next(
                str(spec["method"]),
                status=int(spec.get("status", 429)),
                retry_after=int(spec.get("retry_after", 1)),
                error=spec.get("error"),
                count=int(spec.get("count", 1)),
            )
        except (SlackError, KeyError, TypeError, ValueError) as exc:
            return JSONResponse(
                {"ok": False, "error": "invalid_arguments", "detail": str(exc)}, 400
            )
        return JSONResponse({"ok": True})

    async def _stalls_endpoint(self, request: Request) -> Response:
        try:
            spec = _json_body(await request.body())
            self.stall(str(spec["method"]), float(spec.get("seconds", 0)))
        except (SlackError, KeyError, TypeError, ValueError) as exc:
            return JSONResponse(
                {"ok": False, "error": "invalid_arguments", "detail": str(exc)}, 400
            )
        return JSONResponse({"ok": True})

    async def _reset_endpoint(self, request: Request) -> Response:
        self.reset()
        return JSONResponse({"ok": True})

    async def _healthz_endpoint(self, request: Request) -> Response:
        return JSONResponse({"ok": True})


def _replies(ws: Workspace, root: Message) -> list[dict[str, Any]]:
    replies = ws.channels[root.channel].replies.get(root.ts, [])
    return [{**ws.render(m), "edits": m.edits} for m in replies]


def _ephemeral_json(message: Message) -> dict[str, Any]:
    return {
        "ts": message.ts,
        "user": message.user,
        "text": message.text,
        "blocks": message.blocks,
        "thread_ts": message.thread_ts,
    }
