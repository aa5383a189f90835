"""The emulator's Socket Mode: what Slack does on the websocket an app opens instead of a
Request URL.

As Slack documents it (Socket Mode and its implementation guide; slack_sdk's `socket_mode`
client reads the same messages):
- `apps.connections.open`, called with the app-level token (`xapp-`, scope `connections:write`),
  answers a websocket URL holding a one-time ticket; a bot token is refused
  (`not_allowed_token_type`), any other token too (`invalid_auth`). A ticket used once, or never
  issued, is refused at the handshake.
- On connecting the app gets `hello` (`num_connections`, `debug_info`, `connection_info.app_id`).
  An app may hold about 10 connections; one more is told `too_many_websockets` and closed.
- Each interaction, slash command or event goes to ONE open connection as an envelope
  (`envelope_id`, `type`, `payload`, `accepts_response_payload`; events also carry
  `retry_attempt` and `retry_reason`). The app acknowledges it on the socket within 3 seconds
  with `{"envelope_id": ...}`, plus a `payload` when the envelope accepts one (a slash command's
  answer, a view submission's `response_action`).
- An event not acknowledged in time is delivered again, to the next connection, with
  `retry_attempt` counting up and `retry_reason` set, at most 3 times: nearly at once, after a
  minute, after five (the Events API's schedule; `retry_delays_s` shortens it for tests). An
  interaction or command is not retried: the person is told the app did not respond.
- Before closing a connection Slack sends `disconnect` with a `reason` (`refresh_requested`,
  `warning`, `link_disabled`) and gives the app a moment to connect again and go.

The connections live on the emulator server's event loop; the record of envelopes is read from
any thread under a lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from sandbox.slack_interactions import ACK_TIMEOUT_S, AppAnswer, event_callback
from sandbox.slack_model import APP_ID, SlackError

EnvelopeType = Literal["interactive", "slash_commands", "events_api"]
LINK_PATH = "/link/"
MAX_CONNECTIONS = 10
# The Events API's retries: nearly at once, after 1 minute, after 5 minutes.
EVENT_RETRY_DELAYS_S: tuple[float, ...] = (0.0, 60.0, 300.0)
RETRY_REASON = "timeout"
DISCONNECT_REASONS = frozenset({"refresh_requested", "warning", "link_disabled"})
# How long a connection told `disconnect` stays open for the app to connect again first.
DISCONNECT_GRACE_S = 5.0
# Interactive payloads whose ack may carry an answer (Slack sets accepts_response_payload).
_ANSWERED_INTERACTIONS = frozenset({"view_submission", "block_suggestion"})
_HOST = "applink-emulator"


@dataclass
class _Connection:
    number: int
    socket: WebSocket
    closing: bool = False


@dataclass
class Envelope:
    """One delivery of an envelope, as the emulator sent it and what became of it."""

    envelope_id: str
    type: str
    connection: int
    retry_attempt: int
    acked: bool = False
    payload: dict[str, Any] = field(default_factory=dict)


class SocketMode:
    """Slack's side of Socket Mode for one app (see the module docstring)."""

    def __init__(
        self,
        app_token: str,
        *,
        ack_timeout_s: float = ACK_TIMEOUT_S,
        retry_delays_s: Sequence[float] = EVENT_RETRY_DELAYS_S,
        disconnect_grace_s: float = DISCONNECT_GRACE_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.app_token = app_token
        self.ack_timeout_s = ack_timeout_s
        self.retry_delays_s = tuple(retry_delays_s)
        self.disconnect_grace_s = disconnect_grace_s
        self.max_connections = max_connections
        self._lock = threading.Lock()
        self._tickets: set[str] = set()
        self._connections: dict[int, _Connection] = {}
        self._numbers = itertools.count(1)
        self._turn = itertools.count()
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._sent: list[Envelope] = []

    # -- apps.connections.open ---------------------------------------------------------------

    def open_connection(self, token: str | None, base_url: str) -> dict[str, Any]:
        """`apps.connections.open`'s answer for this token (raises Slack's error)."""
        if token is None:
            raise SlackError("not_authed")
        if not token.startswith("xapp-"):
            raise SlackError("not_allowed_token_type")
        if token != self.app_token:
            raise SlackError("invalid_auth")
        ticket = secrets.token_hex(16)
        with self._lock:
            self._tickets.add(ticket)
        origin = base_url.rstrip("/").replace("http://", "ws://", 1).replace("https://", "wss://")
        return {"url": f"{origin}{LINK_PATH}?ticket={ticket}&app_id={APP_ID}"}

    # -- inspection (any thread) ---------------------------------------------------------------

    def connections(self) -> int:
        """Open connections that are not being closed."""
        with self._lock:
            return sum(not c.closing for c in self._connections.values())

    def envelopes(self) -> list[Envelope]:
        """Every envelope sent (a retry is one more), in sending order."""
        with self._lock:
            return copy.deepcopy(self._sent)

    # -- the websocket (server loop) -----------------------------------------------------------

    async def endpoint(self, websocket: WebSocket) -> None:
        ticket = websocket.query_params.get("ticket", "")
        with self._lock:
            known = ticket in self._tickets
            self._tickets.discard(ticket)
            full = sum(not c.closing for c in self._connections.values()) >= self.max_connections
        if not known:
            await websocket.close(code=1008)  # before accepting: the handshake gets a 403
            return
        await websocket.accept()
        if full:
            await websocket.send_json(_disconnect("too_many_websockets"))
            await websocket.close()
            return
        connection = _Connection(next(self._numbers), websocket)
        with self._lock:
            self._connections[connection.number] = connection
            count = len(self._connections)
        try:
            await websocket.send_json(_hello(count))
            await self._read_acks(websocket)
        except (WebSocketDisconnect, RuntimeError):
            pass  # the app went away; its unacknowledged envelopes time out
        finally:
            with self._lock:
                self._connections.pop(connection.number, None)

    async def _read_acks(self, websocket: WebSocket) -> None:
        while True:
            text = await websocket.receive_text()
            try:
                message = json.loads(text)
            except ValueError:
                continue  # Slack ignores what it cannot read; the envelope then times out
            envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
            waiting = self._acks.get(envelope_id) if isinstance(envelope_id, str) else None
            if waiting is not None and not waiting.done():
                payload = message.get("payload")
                waiting.set_result(payload if isinstance(payload, dict) else {})

    # -- delivering (server loop) ------------------------------------------------------------

    async def deliver(
        self, kind: EnvelopeType, payload: dict[str, Any], *, accepts_response_payload: bool
    ) -> dict[str, Any] | None:
        """The ack's payload ({} for a plain ack), None when no ack came (after the retries an
        event is owed)."""
        envelope_id = secrets.token_hex(12)
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = waiting
        delays = self.retry_delays_s if kind == "events_api" else ()
        try:
            for attempt in range(len(delays) + 1):
                if attempt:
                    await asyncio.sleep(delays[attempt - 1])
                envelope = {
                    "envelope_id": envelope_id,
                    "type": kind,
                    "payload": payload,
                    "accepts_response_payload": accepts_response_payload,
                }
                if kind == "events_api":
                    envelope["retry_attempt"] = attempt
                    envelope["retry_reason"] = RETRY_REASON if attempt else ""
                if await self._send(envelope, attempt) and await _within(
                    waiting, self.ack_timeout_s
                ):
                    self._mark_acked(envelope_id)
                    answer = waiting.result()
                    return answer if accepts_response_payload else {}
            return None
        finally:
            self._acks.pop(envelope_id, None)

    async def _send(self, envelope: dict[str, Any], attempt: int) -> bool:
        """Sent to the next open connection in turn; False when none is open."""
        with self._lock:
            open_ = [c for c in self._connections.values() if not c.closing]
            if not open_:
                return False
            connection = open_[next(self._turn) % len(open_)]
            self._sent.append(
                Envelope(
                    envelope["envelope_id"],
                    envelope["type"],
                    connection.number,
                    attempt,
                    payload=copy.deepcopy(envelope["payload"]),
                )
            )
        try:
            await connection.socket.send_json(envelope)
        except (WebSocketDisconnect, RuntimeError, OSError):
            return False
        return True

    def _mark_acked(self, envelope_id: str) -> None:
        with self._lock:
            for sent in reversed(self._sent):
                if sent.envelope_id == envelope_id:
                    sent.acked = True
                    return

    async def send_event(self, event: dict[str, Any]) -> bool:
        """An Events API event for the app (wrapped as Slack wraps it); True once acknowledged."""
        answer = await self.deliver(
            "events_api", event_callback(event), accepts_response_payload=False
        )
        return answer is not None

    # -- closing connections (server loop) -----------------------------------------------------

    async def disconnect(self, reason: str = "refresh_requested") -> int:
        """Tell every open connection `disconnect` and close each after the grace period, as
        Slack does to refresh them; how many were told."""
        if reason not in DISCONNECT_REASONS:
            raise ValueError(f"reason must be one of {sorted(DISCONNECT_REASONS)}")
        with self._lock:
            told = [c for c in self._connections.values() if not c.closing]
            for connection in told:
                connection.closing = True
        for connection in told:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await connection.socket.send_json(_disconnect(reason))
            asyncio.get_running_loop().create_task(self._close_later(connection))
        return len(told)

    async def _close_later(self, connection: _Connection) -> None:
        deadline = time.monotonic() + self.disconnect_grace_s
        while time.monotonic() < deadline:
            with self._lock:
                if connection.number not in self._connections:
                    return  # the app closed it itself
            await asyncio.sleep(0.05)
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
            await connection.socket.close(code=1000)


class SocketLink:
    """The page's way to the app when the app is connected by Socket Mode: the same answers an
    HTTP Request URL gives (`AppLink`), carried by envelopes and their acks."""

    def __init__(self, socket: SocketMode) -> None:
        self._socket = socket

    async def send_payload(self, payload: dict[str, Any]) -> AppAnswer:
        accepts = payload.get("type") in _ANSWERED_INTERACTIONS
        return await self._send("interactive", payload, accepts)

    async def send_command(self, form: dict[str, str]) -> AppAnswer:
        return await self._send("slash_commands", dict(form), True)

    async def send_event(self, event: dict[str, Any]) -> AppAnswer:
        return await self._send("events_api", event_callback(event), False)

    async def _send(self, kind: EnvelopeType, payload: dict[str, Any], accepts: bool) -> AppAnswer:
        if self._socket.connections() == 0:
            return AppAnswer(None, problem="the app is not connected (Socket Mode)")
        answer = await self._socket.deliver(kind, payload, accepts_response_payload=accepts)
        if answer is None:
            return AppAnswer(None, problem="the app did not answer within 3 seconds")
        return AppAnswer(200, json.dumps(answer).encode() if answer else b"")

    async def aclose(self) -> None:
        """Nothing to close: the connections belong to the emulator's server."""


def socket_routes(socket: SocketMode) -> list[BaseRoute]:
    """The websocket, and control endpoints for tests in another process."""

    async def disconnect(request: Request) -> Response:
        try:
            reason = (await _json(request)).get("reason", "refresh_requested")
            told = await socket.disconnect(str(reason))
        except ValueError as exc:
            return _invalid(exc)
        return JSONResponse({"ok": True, "connections": told})

    async def event(request: Request) -> Response:
        try:
            sent = (await _json(request)).get("event")
            if not isinstance(sent, dict):
                raise ValueError("event must be an object")
        except ValueError as exc:
            return _invalid(exc)
        return JSONResponse({"ok": True, "acknowledged": await socket.send_event(sent)})

    async def state(request: Request) -> Response:
        envelopes = [vars(e) for e in socket.envelopes()]
        return JSONResponse({"connections": socket.connections(), "envelopes": envelopes})

    return [
        WebSocketRoute(LINK_PATH, socket.endpoint),
        Route("/_emulator/socket/disconnect", disconnect, methods=["POST"]),
        Route("/_emulator/socket/event", event, methods=["POST"]),
        Route("/_emulator/socket/state", state, methods=["GET"]),
    ]


def _invalid(exc: Exception) -> Response:
    """A control call a test got wrong (not JSON, not an object, no event object)."""
    return JSONResponse({"ok": False, "error": "invalid_arguments", "detail": str(exc)}, 400)


async def _json(request: Request) -> dict[str, Any]:
    body = await request.body()
    decoded = json.loads(body) if body.strip() else {}
    if not isinstance(decoded, dict):
        raise ValueError("the body must be a JSON object")
    return decoded


async def _within(waiting: asyncio.Future[dict[str, Any]], seconds: float) -> bool:
    try:
        await asyncio.wait_for(asyncio.shield(waiting), timeout=seconds)
    except TimeoutError:
        return False
    return True


def _hello(num_connections: int) -> dict[str, Any]:
    return {
        "type": "hello",
        "num_connections": num_connections,
        "debug_info": {
            "host": _HOST,
            "build_number": 1,
            "approximate_connection_time": 18060,
        },
        "connection_info": {"app_id": APP_ID},
    }


def _disconnect(reason: str) -> dict[str, Any]:
    return {"type": "disconnect", "reason": reason, "debug_info": {"host": _HOST}}
