"""Slack's requests to `/slack/events`, checked before anything else touches them.

Order matters: the signature is verified on the raw bytes first (an unsigned body is never
parsed), then the body is parsed strictly into the shapes the listeners rely on. Every problem
is a `SlackRequestError` carrying the HTTP status and a message, so no input can reach a
framework that would answer 500 or log a traceback for it:
- 401: missing, malformed, stale or wrong signature (`X-Slack-Request-Timestamp` must be plain
  digits within five minutes of now);
- 400: a signed body that is not what Slack sends (bad encoding, duplicate fields, a payload
  that is not an object, an action without an `action_id`, ...);
- kinds queuepilot does not handle (shortcuts, other event types) are `Ignored`: Slack expects
  a 200 for those.
"""

from __future__ import annotations

import hmac
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from slack_sdk.signature import SignatureVerifier

MAX_SKEW_S = 300
M = TypeVar("M", bound=BaseModel)
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")


class SlackRequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SlackRequest:
    """A verified, well-formed request: `kind` says what it is, `body` is for Bolt."""

    kind: Literal["command", "interactive", "event", "url_verification", "ssl_check", "ignored"]
    body: dict[str, Any] = field(default_factory=dict)
    event_id: str | None = None


def verify(headers: dict[str, str], body: bytes, secret: str, *, now: float) -> None:
    """Slack's signing scheme (v0 HMAC-SHA256 of `v0:<timestamp>:<body>`), strict on format."""
    timestamp = headers.get("x-slack-request-timestamp")
    signature = headers.get("x-slack-signature")
    if not timestamp or not signature:
        raise SlackRequestError(401, "missing Slack signature headers")
    if not _TIMESTAMP.fullmatch(timestamp) or not _SIGNATURE.fullmatch(signature):
        raise SlackRequestError(401, "malformed Slack signature headers")
    if abs(now - int(timestamp)) > MAX_SKEW_S:
        raise SlackRequestError(401, "stale Slack request timestamp")
    text = _utf8(body)
    expected = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=text)
    if expected is None or not hmac.compare_digest(expected, signature):
        raise SlackRequestError(401, "invalid Slack signature")


def _utf8(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise SlackRequestError(400, "body is not UTF-8") from None


# -- the shapes listeners and Bolt read ---------------------------------------------------------

_LOOSE = ConfigDict(extra="allow")


class _User(BaseModel):
    model_config = _LOOSE
    id: str = Field(min_length=1, max_length=64)
    username: str | None = None
    name: str | None = None


class _Option(BaseModel):
    model_config = _LOOSE
    value: str


class _Action(BaseModel):
    model_config = _LOOSE
    action_id: str = Field(min_length=1, max_length=255)
    block_id: str | None = Field(None, max_length=255)
    type: str | None = None
    value: str | None = Field(None, max_length=2000)
    selected_option: _Option | None = None
    action_ts: str | None = None


class _Container(BaseModel):
    model_config = _LOOSE
    message_ts: str | None = None
    channel_id: str | None = None


class _Channel(BaseModel):
    model_config = _LOOSE
    id: str


class _Team(BaseModel):
    model_config = _LOOSE
    id: str | None = None


class _Message(BaseModel):
    model_config = _LOOSE
    blocks: list[Any] = Field(default_factory=list)
    ts: str | None = None


class _Interactive(BaseModel):
    """What every interactive payload must have for the listeners to read it."""

    model_config = _LOOSE
    type: str
    user: _User
    team: _Team | None = None
    channel: _Channel | None = None
    container: _Container | None = None
    message: _Message | None = None
    response_url: str | None = None
    trigger_id: str | None = None


class _BlockActions(_Interactive):
    type: Literal["block_actions"]
    actions: list[_Action] = Field(min_length=1, max_length=25)


class _View(BaseModel):
    model_config = _LOOSE
    id: str
    callback_id: str = ""
    private_metadata: str = ""
    state: dict[str, Any] = Field(default_factory=dict)


class _ViewSubmission(_Interactive):
    type: Literal["view_submission"]
    view: _View


class _Event(BaseModel):
    model_config = _LOOSE
    type: str


class _EventCallback(BaseModel):
    model_config = _LOOSE
    type: Literal["event_callback"]
    event_id: str = Field(min_length=1, max_length=100)
    event: _Event


_INTERACTIVE: dict[str, type[_Interactive]] = {
    "block_actions": _BlockActions,
    "view_submission": _ViewSubmission,
}
_COMMAND_FIELDS = ("command", "user_id", "channel_id")


def parse(body: bytes, content_type: str) -> SlackRequest:
    """The kind and validated body of a verified request."""
    text = _utf8(body)
    media = content_type.split(";")[0].strip().lower()
    if media == "application/json" or text.lstrip().startswith("{"):
        return _json_request(text)
    form = _form(text)
    if form.get("ssl_check") == "1":
        return SlackRequest("ssl_check")
    if "payload" in form:
        return checked("interactive", _json_object(form["payload"], "payload"))
    if "command" in form:
        return checked("command", form)
    raise SlackRequestError(400, "neither a slash command nor an interaction payload")


def checked(kind: Literal["interactive", "command", "event"], data: dict[str, Any]) -> SlackRequest:
    """An already-decoded payload checked into the shapes the listeners read: the one check
    for both ways Slack's traffic arrives (an HTTP request here, a Socket Mode envelope)."""
    if kind == "interactive":
        return _interactive(data)
    if kind == "command":
        missing = [name for name in _COMMAND_FIELDS if not data.get(name)]
        command = data.get("command")
        if missing or not isinstance(command, str) or not command.startswith("/"):
            raise SlackRequestError(400, f"slash command without {', '.join(missing) or 'a /name'}")
        return SlackRequest("command", data)
    if data.get("type") == "event_callback":
        event = _validate(_EventCallback, data, "body")
        return SlackRequest("event", data, event_id=event.event_id)
    return SlackRequest("ignored")


def _form(text: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(text, keep_blank_values=True, errors="strict", max_num_fields=100)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SlackRequestError(400, f"malformed form body: {type(exc).__name__}") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            raise SlackRequestError(400, f"form field {name[:40]!r} given twice")
        form[name] = value
    return form


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise SlackRequestError(400, f"{what} is not valid JSON") from None
    if not isinstance(data, dict):
        raise SlackRequestError(400, f"{what} must be a JSON object")
    return data


def _interactive(data: dict[str, Any]) -> SlackRequest:
    kind = data.get("type")
    model = _INTERACTIVE.get(kind) if isinstance(kind, str) else None
    if not isinstance(kind, str):
        raise SlackRequestError(400, "payload.type must be a string")
    if model is None:
        return SlackRequest("ignored")
    _validate(model, data, "payload")
    return SlackRequest("interactive", data)


def _json_request(text: str) -> SlackRequest:
    data = _json_object(text, "body")
    kind = data.get("type")
    if kind == "url_verification":
        if not isinstance(data.get("challenge"), str):
            raise SlackRequestError(400, "url_verification without a challenge")
        return SlackRequest("url_verification", data)
    return checked("event", data)


def _validate(model: type[M], data: dict[str, Any], what: str) -> M:
    try:
        return model.model_validate(data)
    except (ValidationError, RecursionError) as exc:
        if isinstance(exc, RecursionError):
            raise SlackRequestError(400, f"{what} is nested too deeply") from None
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or what
        raise SlackRequestError(400, f"{what}.{where}: {first['msg']}") from None
