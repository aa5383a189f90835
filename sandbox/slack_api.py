"""A local Slack Web API emulator served over real HTTP.

The bot talks to Slack through slack_sdk's `AsyncWebClient`; pointing its `base_url` here
lets tests and the local demo exercise the real client (serialisation, retries, error
mapping) without a workspace. State lives in `slack_state.Workspace` and each Web API
method in `slack_methods`; this module is the HTTP layer: it decodes parameters the way
Slack accepts them, applies auth, injected faults, stalls and rate limits, dispatches to
the method's handler, and logs every call.

The emulator runs in a server thread while tests read it from the main thread, so all
state access goes through one lock and inspection methods hand out deep copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import pickle
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from sandbox.slack_interactions import AppLink, Person
from sandbox.slack_limits import HistoryTier
from sandbox.slack_methods import (
    ALL_SCOPES,
    METHODS,
    SCOPES,
    Params,
    check_required,
    check_scope,
    optional,
    takes_json,
)
from sandbox.slack_model import Call, Channel, Fault, Message, SlackError
from sandbox.slack_socket import SocketLink, SocketMode, socket_routes
from sandbox.slack_state import Workspace

__all__ = ["UPLOAD_METHOD", "Call", "Message", "SlackEmulator"]

DEFAULT_USERS: Mapping[str, str] = {"U0ALICE": "alice", "U0BOB": "bob"}
DEFAULT_USERGROUPS: Mapping[str, Sequence[str]] = {"S0ONCALL": ["U0ALICE"]}

# The byte upload of files.upload v2 goes to a URL, not a Web API method; it is logged
# (and fault-injectable) under this name so tests can see all three upload steps.
UPLOAD_METHOD = "files.upload_bytes"

# Calls that change nothing a client shows; every other successful call refreshes the page.
_READ_ONLY = frozenset(
    {
        "auth.test",
        "chat.getPermalink",
        "conversations.history",
        "conversations.replies",
        "users.info",
        "usergroups.users.list",
        "files.info",
        "files.getUploadURLExternal",
    }
)

# Parameters that slack_sdk (or a curl user) may send as JSON strings inside a form post.
_JSON_FIELDS = ("blocks", "attachments", "files", "view", "metadata")

T = TypeVar("T")


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
    """The call's arguments where Slack reads them: the query string always, a form body for
    every method, a JSON body only for the methods that take one (`takes_json`). For any other
    method a JSON body reaches Slack as no arguments, so the call fails for a missing required
    argument, as it does on Slack."""
    if "token" in request.query_params:
        # Apps created after 2021-02-24 may not send tokens in the query string (changelog
        # 2020-11 "no more tokens in querystrings for newly created apps"); Slack answers
        # invalid_auth even beside a good Authorization header (slack-rs/slack-rs-api#107).
        raise SlackError("invalid_auth")
    params: Params = dict(request.query_params)
    body = await request.body()
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if body:
        if content_type == "application/json":
            if takes_json(request.path_params.get("method", "")):
                decoded = _json_body(body)
                # Nor is a JSON body's token read: JSON calls present it in the Authorization
                # header (changelog 2017-10 "keeping up with the JSONs").
                decoded.pop("token", None)
                params.update(decoded)
        elif content_type == "application/x-www-form-urlencoded":
            params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        elif content_type == "":
            raise SlackError("missing_post_type")
        elif content_type == "multipart/form-data":
            # Slack takes multipart forms too, but slack_sdk sends none of the methods served
            # here that way, and reading one needs python-multipart.
            raise SlackError("invalid_form_data")
        elif content_type != "text/plain":  # a type Slack lists as valid, read as nothing
            raise SlackError("invalid_post_type")
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
        raise SlackError("json_not_object")
    return decoded


def _peer(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else ""


def _bearer_token(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credentials.strip() or None


# -- the emulator ------------------------------------------------------------------------


class SlackEmulator:
    """Slack Web API stand-in: an ASGI `app` plus inspection and fault-injection hooks.

    `enforce_rate_limits` is a plain attribute so a test can switch it on for one case
    without standing up a second server; so are `history_tier`, how Slack serves this app's
    history reads (`slack_limits.HistoryTier`: 3 for an internal app, 1 for a commercially
    distributed app outside the Marketplace, whose one call a minute holds even with
    `enforce_rate_limits` off), and `history_interval_s`, the length of that minute.
    `chart_blocks` says whether the workspace takes Slack's `data_visualization` block: False is
    a workspace that does not (yet) support it, where chat.postMessage, chat.postEphemeral and
    chat.update answer `invalid_blocks` to any message holding one, as Slack does for a block
    type it does not support; `reset()` puts it back as constructed, since a test that refuses
    charts must not leave the next test's workspace refusing them.
    `home_tab` says whether the app has its Home tab turned on (views.publish answers
    `not_enabled` without it), read at each call like `chart_blocks`.
    `scopes` are the bot token's, as the workspace granted them at install (by default every
    scope a fully featured install has): each answer to the bot token carries them in Slack's
    `x-oauth-scopes` header (and the method's in `x-accepted-oauth-scopes`), and a method whose
    scope is not among them answers `missing_scope`. `reset()` grants the constructed ones again.
    """

    def __init__(
        self,
        *,
        token: str = "xoxb-queuepilot-test",
        channels: Iterable[str] = ("C0QUEUE",),
        users: Mapping[str, str] | None = None,
        usergroups: Mapping[str, Sequence[str]] | None = None,
        enforce_rate_limits: bool = False,
        channel_names: Mapping[str, str] | None = None,
        page_user: str = "U0ALICE",
        command: str = "/queue",
        app_token: str | None = None,
        history_tier: int = 3,
        history_interval_s: float = 60.0,
        chart_blocks: bool = True,
        scopes: Iterable[str] | None = None,
        home_tab: bool = True,
    ) -> None:
        self.token = token
        self.enforce_rate_limits = enforce_rate_limits
        self.history_tier = history_tier
        self.history_interval_s = history_interval_s
        self.chart_blocks = chart_blocks
        self._constructed_chart_blocks = chart_blocks
        self.home_tab = home_tab
        self.scopes = frozenset(ALL_SCOPES if scopes is None else scopes)
        self._constructed_scopes = self.scopes
        self._lock = threading.Lock()
        self._ws = Workspace(
            channels,
            DEFAULT_USERS if users is None else users,
            DEFAULT_USERGROUPS if usergroups is None else usergroups,
            history=HistoryTier.of(history_tier, interval_s=history_interval_s),
            channel_names=channel_names,
        )
        self._stalled: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._watchers: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self.closing = False
        self.command = command
        self.person = Person(page_user, self._ws.users.get(page_user, page_user))
        # The app that interactions and commands go to; set once it is listening.
        self.app_link: AppLink | SocketLink | None = None
        # With an app-level token the app is in Socket Mode: its traffic goes over the socket.
        self.socket = SocketMode(app_token) if app_token else None
        if self.socket is not None:
            self.app_link = SocketLink(self.socket)
        from sandbox.slack_page import page_routes  # the page builds on this class

        self.app = Starlette(
            routes=[
                *page_routes(self),
                Route("/api/{method:str}", self._api, methods=["GET", "POST"]),
                Route("/_emulator/upload/{file_id:str}", self._upload, methods=["POST"]),
                Route("/_emulator/state", self._state_endpoint, methods=["GET"]),
                Route("/_emulator/faults", self._faults_endpoint, methods=["POST"]),
                Route("/_emulator/stalls", self._stalls_endpoint, methods=["POST"]),
                Route("/_emulator/reset", self._reset_endpoint, methods=["POST"]),
                Route("/_emulator/healthz", self._healthz_endpoint, methods=["GET"]),
                *(socket_routes(self.socket) if self.socket else []),
            ]
        )

    # -- inspection (main thread) --------------------------------------------------------

    def file_bytes(self, file_id: str) -> bytes | None:
        """What was uploaded for a file (files.upload v2's second step), None if nothing."""
        with self._lock:
            stored = self._ws.files.get(file_id)
            return None if stored is None else stored.data

    def channel_messages(self, channel: str) -> list[Message]:
        """Top-level messages in post order; raises KeyError for an unknown channel."""
        with self._lock:
            timeline = self._known_channel(channel).timeline
            return _copied([m for m in timeline if m.thread_ts is None])

    def unseen(self) -> list[Message]:
        """Posts answered `ok` that Slack shows nowhere (a thread_ts naming no message)."""
        with self._lock:
            return _copied(self._ws.unseen)

    def thread(self, channel: str, ts: str) -> list[Message]:
        """The root message followed by its replies; raises KeyError if there is no such ts."""
        with self._lock:
            self._known_channel(channel)
            try:
                return _copied(self._ws.thread(channel, ts))
            except SlackError:
                raise KeyError(f"no message {ts} in {channel}") from None

    def ephemerals(self, channel: str | None = None) -> list[Message]:
        """Ephemeral messages (user = the recipient), for one channel or all in ts order."""
        with self._lock:
            if channel is not None:
                return _copied(self._known_channel(channel).ephemerals)
            found = [m for c in self._ws.channels.values() for m in c.ephemerals]
            return _copied(sorted(found, key=lambda m: Decimal(m.ts)))

    def views(self) -> list[dict[str, Any]]:
        """Every view opened or pushed, in that order, each in its latest (updated) state."""
        with self._lock:
            return _copied(list(self._ws.views.values()))

    def home(self, user: str) -> dict[str, Any] | None:
        """The Home tab's view last published to `user` (views.publish), None before any."""
        with self._lock:
            return _copied(self._ws.homes.get(user))

    def calls(self, method: str | None = None) -> list[Call]:
        """Every request received (failed and faulted ones too), in arrival order."""
        with self._lock:
            return _copied([c for c in self._ws.calls if method in (None, c.method)])

    def _known_channel(self, channel: str) -> Channel:
        # A typo in a test's channel id should fail loudly, not read as "no messages".
        if channel not in self._ws.channels:
            raise KeyError(f"unknown channel {channel!r}")
        return self._ws.channels[channel]

    # -- the local page's side (see slack_page) ----------------------------------------------

    def connect_app(self, request_url: str, signing_secret: str) -> None:
        """Where the page's clicks, submissions and commands go, signed like Slack signs them."""
        self.app_link = AppLink(request_url, signing_secret)

    @contextlib.contextmanager
    def workspace(self) -> Iterator[Workspace]:
        """The workspace under the emulator's lock, for the page's handlers; changes made inside
        are shown to the page."""
        with self._lock:
            yield self._ws
            self._changed()

    @contextlib.contextmanager
    def reading(self) -> Iterator[Workspace]:
        """The workspace under the lock, for reads that change nothing."""
        with self._lock:
            yield self._ws

    def close(self) -> None:
        """End the page's event streams, so the server stops at once instead of waiting on them
        (call it before stopping the server)."""
        with self._lock:
            self.closing = True
            _wake(self._watchers)

    async def wait_for_change(self, version: int, within_s: float) -> int:
        """The workspace's version once it differs from `version` (or after `within_s`)."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            if self._ws.version != version:
                return self._ws.version
            self._watchers.add(waiter)
        try:
            await asyncio.wait_for(waiter[1].wait(), timeout=within_s)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._watchers.discard(waiter)
        with self._lock:
            return self._ws.version

    def _changed(self) -> None:
        """Under the lock: the workspace moved; the page's event streams say so."""
        self._ws.version += 1
        _wake(self._watchers)

    # -- control ---------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int = 1,
        error: str | None = None,
        count: int = 1,
        messages: Sequence[str] = (),
        when: Callable[[Params], bool] | None = None,
    ) -> None:
        """Queue `count` failures for the next calls of `method` (see `Fault.to_error`), in
        Slack's shape: `messages` are its `response_metadata.messages`, which it always gives
        with invalid_blocks and invalid_arguments ("[ERROR] <why> [json-pointer:/blocks/0/text]"),
        and a missing_scope names the method's scope and the token's. With `when`, only a call
        whose arguments it accepts fails; the others go through."""
        if status == 200 and not error:
            raise ValueError("a status-200 fault needs an error code, e.g. 'channel_not_found'")
        if error in ("invalid_blocks", "invalid_arguments") and not messages:
            raise ValueError(
                f"Slack says why with {error}: give its messages, e.g. "
                "'[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]'"
            )
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            extra = self._fault_fields(method, error)
            queue = self._ws.faults[method]
            queue.extend(
                Fault(status, retry_after, error, tuple(messages), extra, when)
                for _ in range(count)
            )

    def _fault_fields(self, method: str, error: str | None) -> dict[str, Any]:
        """Under the lock: what Slack's answer carries beside `error`, as `check_scope` says it."""
        if error != "missing_scope":
            return {}
        needed = SCOPES.get(method, "")
        return {"needed": needed, "provided": ",".join(sorted(self.scopes - {needed}))}

    def clear_faults(self) -> None:
        """Drop every queued failure: Slack is healthy again (messages are kept)."""
        with self._lock:
            self._ws.faults.clear()

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
                _wake(self._stalled)

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
        """Forget messages, views, files, calls, faults and stalls, take chart blocks again if
        constructed so and grant the scopes constructed with; keep channels and users."""
        with self._lock:
            self.chart_blocks = self._constructed_chart_blocks
            self.scopes = self._constructed_scopes
            self._ws.reset()
            _wake(self._stalled)
            self._changed()

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
        token = _bearer_token(request) or optional(params, "token")
        if "token" in params:
            params["token"] = "[redacted]"
        with self._lock:
            if read_error is not None:
                outcome = _Outcome.failure(read_error)
            else:
                outcome = self._answer(method, params, token, str(request.base_url))
            self._log(method, params, outcome, at, _peer(request))
            if outcome.error is None and method not in _READ_ONLY:
                self._changed()
        await self._stall(method)
        return JSONResponse(outcome.body, status_code=outcome.status, headers=outcome.headers)

    def _answer(self, method: str, params: Params, token: str | None, base_url: str) -> _Outcome:
        outcome = self._outcome(method, params, token, base_url)
        if token is not None and token == self.token:
            # Slack tells every call made with a token which scopes the token has.
            outcome.headers["x-oauth-scopes"] = ",".join(sorted(self.scopes))
            if method in SCOPES:
                outcome.headers["x-accepted-oauth-scopes"] = SCOPES[method]
        return outcome

    def _outcome(self, method: str, params: Params, token: str | None, base_url: str) -> _Outcome:
        try:
            fault = self._ws.take_fault(method, params)
            if fault is not None:
                raise fault.to_error()
            if method == "apps.connections.open":
                answer = self._open_socket(token, base_url)
                return _Outcome(
                    200, {"ok": True, **answer}, {"x-oauth-scopes": "connections:write"}
                )
            if token is not None and token.startswith("xapp-"):
                raise SlackError("not_allowed_token_type")  # an app-level token opens sockets only
            handler = METHODS.get(method)
            if handler is None:
                raise SlackError("unknown_method")
            if token is None:
                raise SlackError("not_authed")
            if token != self.token:
                raise SlackError("invalid_auth")
            check_scope(method, self.scopes)
            # Which Slack checks first, the rate limit or the arguments, it does not document
            # (its rate-limit pages, the method pages and their error lists say nothing of the
            # order); the limit first here, as before, until a source says otherwise.
            self._check_rate_limit(method, params)
            check_required(method, params)
            self._ws.chart_blocks = self.chart_blocks  # as the attributes say now
            self._ws.home_enabled = self.home_tab
            return _Outcome(200, {"ok": True, **handler(self._ws, params, base_url)})
        except SlackError as exc:
            return _Outcome.failure(exc)

    def _open_socket(self, token: str | None, base_url: str) -> dict[str, Any]:
        if self.socket is None:  # no app-level token here: Socket Mode is off for the app
            raise SlackError("invalid_auth" if token else "not_authed")
        return self.socket.open_connection(token, base_url)

    def _check_rate_limit(self, method: str, params: Params) -> None:
        channel = str(params.get("channel", ""))
        limits = self._ws.rate_limits
        # The history tier as the attributes say now (a test may switch it between calls).
        limits.use_history(HistoryTier.of(self.history_tier, interval_s=self.history_interval_s))
        wait = limits.retry_after(method, channel, enforce=self.enforce_rate_limits)
        if wait:
            raise SlackError("ratelimited", status=429, headers={"Retry-After": str(wait)})

    def _log(
        self, method: str, params: Params, outcome: _Outcome, at: float, client: str = ""
    ) -> None:
        ok = outcome.status == 200 and outcome.error is None
        refusal = None if ok else copy.deepcopy(outcome.body)
        call = Call(
            method, copy.deepcopy(params), outcome.status, ok, outcome.error, at, client, refusal
        )
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
            params = {"file_id": file_id, "length": len(data)}
            fault = self._ws.take_fault(UPLOAD_METHOD, params)
            if fault is not None:
                outcome = _Outcome.failure(fault.to_error())
            elif self._ws.receive_upload(file_id, data):
                outcome = _Outcome(200, {"ok": True})
            else:
                outcome = _Outcome(404, {"ok": False, "error": "file_not_found"})
            self._log(UPLOAD_METHOD, params, outcome, at, _peer(request))
        await self._stall(UPLOAD_METHOD)
        if outcome.status == 200:
            return PlainTextResponse(f"OK - {len(data)}")
        return JSONResponse(outcome.body, status_code=outcome.status, headers=outcome.headers)

    # -- control endpoints for out-of-process users ------------------------------------------

    async def _state_endpoint(self, request: Request) -> Response:
        with self._lock:
            return JSONResponse(self._ws.snapshot())

    async def _faults_endpoint(self, request: Request) -> Response:
        def fail_next(spec: dict[str, Any]) -> None:
            self.fail_next(
                str(spec["method"]),
                status=int(spec.get("status", 429)),
                retry_after=int(spec.get("retry_after", 1)),
                error=spec.get("error"),
                count=int(spec.get("count", 1)),
                messages=[str(m) for m in spec.get("messages", [])],
            )

        return await _control(request, fail_next)

    async def _stalls_endpoint(self, request: Request) -> Response:
        return await _control(
            request, lambda spec: self.stall(str(spec["method"]), float(spec.get("seconds", 0)))
        )

    async def _reset_endpoint(self, request: Request) -> Response:
        self.reset()
        return JSONResponse({"ok": True})

    async def _healthz_endpoint(self, request: Request) -> Response:
        return JSONResponse({"ok": True})


def _wake(waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
    """Set each waiter's event from whatever thread we are on (stalled calls, page streams)."""
    for loop, event in waiters:
        with contextlib.suppress(RuntimeError):  # that server's loop is already closed
            loop.call_soon_threadsafe(event.set)


async def _control(request: Request, apply: Callable[[dict[str, Any]], None]) -> Response:
    """Apply a JSON control request; a malformed one is a 400 that says what was wrong."""
    try:
        apply(_json_body(await request.body()))
    except (SlackError, KeyError, TypeError, ValueError) as exc:
        return JSONResponse({"ok": False, "error": "invalid_arguments", "detail": str(exc)}, 400)
    return JSONResponse({"ok": True})


def _copied(value: T) -> T:
    """A deep copy of what a test reads (messages, calls, views), made by pickling: several
    times faster than `copy.deepcopy` on a busy channel's hundreds of messages, which tests poll
    every few milliseconds while the bot under test shares the interpreter."""
    return cast(T, pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL)))
