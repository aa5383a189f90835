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
from typing import Annotated, Any, Literal, TypeVar
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
# Bolt reads these before any listener runs, for every kind of request (`build_async_context`:
# the user, team, enterprise, channel, thread, function and response_url fields, at the top and
# inside `event`, `message`, `item`, `authorizations[0]`, `view`), then its matchers and argument
# builders (`payload_utils`: `actions[0]`, `view.callback_id` and `view.type`, `event.type`).
# It indexes and calls `.get` on them unchecked: a string where Slack sends a list (`response_urls`)
# raises inside Bolt. So each is checked here to be what Slack sends, or absent/null. Strict: no
# coercion, `"1"` is not a bool and `1` is not a string. Unknown fields are let through untouched.

_LOOSE = ConfigDict(extra="allow", strict=True)
Id = Annotated[str, Field(max_length=255)]
Url = Annotated[str, Field(max_length=2000, pattern=r"^https?://")]
Text = Annotated[str, Field(max_length=40_000)]


class _Shape(BaseModel):
    model_config = _LOOSE


class _Named(_Shape):
    """An object Bolt reads an `id` from: a team, an enterprise, a channel, a user."""

    id: Id | None = None


class _User(_Named):
    id: Id = Field(min_length=1, max_length=64)
    username: Id | None = None
    name: Id | None = None
    team_id: Id | None = None


class _ResponseUrl(_Shape):
    response_url: Url
    block_id: Id | None = None
    action_id: Id | None = None
    channel_id: Id | None = None


class _FunctionData(_Shape):
    execution_id: Id | None = None
    inputs: dict[str, Any] | None = None


class _Context(_Shape):
    """The fields Bolt's context extraction reads at any level it recurses into."""

    user: Id | _Named | None = None
    user_id: Id | None = None
    team: Id | _Named | None = None
    team_id: Id | None = None
    enterprise: Id | _Named | None = None
    enterprise_id: Id | None = None
    channel: Id | _Named | None = None
    channel_id: Id | None = None
    thread_ts: Id | None = None
    is_enterprise_install: bool | None = None
    # Bolt reads `authorizations[0]` as a payload of its own, recursing while it has one.
    authorizations: list[_Context] | None = Field(None, max_length=100)
    function_execution_id: Id | None = None
    bot_access_token: Id | None = None


class _Message(_Context):
    blocks: list[dict[str, Any]] = Field(default_factory=list)
    ts: Id | None = None
    bot_id: Id | None = None


class _Option(_Shape):
    value: Annotated[str, Field(max_length=2000)]


class _ElementState(_Shape):
    """An input's state in `view.state.values[block][action]`, as the modal listener reads it."""

    type: Id | None = None
    value: Text | None = None
    selected_option: _Option | None = None


class _State(_Shape):
    values: dict[str, dict[str, _ElementState]] = Field(default_factory=dict)


class _Action(_Shape):
    action_id: str = Field(min_length=1, max_length=255)
    block_id: Id | None = None
    type: Id | None = None
    value: str | None = Field(None, max_length=2000)
    selected_option: _Option | None = None
    action_ts: Id | None = None


class _Container(_Shape):
    type: Id | None = None
    message_ts: Id | None = None
    channel_id: Id | None = None
    is_ephemeral: bool | None = None


class _View(_Shape):
    id: Id
    type: Id  # Bolt reads `view.type` of every view with a `callback_id` (`is_workflow_step_save`)
    callback_id: Id = ""
    private_metadata: Annotated[str, Field(max_length=3000)] = ""
    hash: Id | None = None
    team_id: Id | None = None
    app_installed_team_id: Id | None = None
    state: _State = Field(default_factory=_State)


class _Common(_Context):
    """What every request's body must have right, whatever its kind."""

    message: _Message | None = None
    previous_message: _Message | None = None
    function_data: _FunctionData | None = None
    response_url: Url | None = None
    # Bolt reads these whenever the key is there, null included: absent, or the right shape.
    response_urls: list[_ResponseUrl] = Field(None, max_length=100)
    event: dict[str, Any] = Field(None)
    trigger_id: Id | None = None
    api_app_id: Id | None = None
    token: Id | None = None
    is_ext_shared_channel: bool | None = None
    view: _View | None = None


class _Interactive(_Common):
    """What every interactive payload must have for the listeners to read it."""

    type: str
    user: _User
    team: _Named | None = None
    channel: _Named | None = None
    container: _Container | None = None
    state: _State | None = None


class _BlockActions(_Interactive):
    type: Literal["block_actions"]
    actions: list[_Action] = Field(min_length=1, max_length=25)


class _ViewSubmission(_Interactive):
    type: Literal["view_submission"]
    view: _View


class _Event(_Message):
    """An Events API event: Bolt recurses into it for the same fields as the envelope's."""

    type: Id
    event_ts: Id | None = None
    subtype: Id | None = None
    channel_type: Id | None = None
    user_team: Id | None = None
    item: _Context | None = None
    assistant_thread: _Context | None = None
    message: _Message | None = None
    previous_message: _Message | None = None
    inputs: dict[str, Any] | None = None


class _EventCallback(_Common):
    type: Literal["event_callback"]
    event_id: str = Field(min_length=1, max_length=100)
    event: _Event
    context_team_id: Id | None = None
    context_enterprise_id: Id | None = None


class _Command(_Common):
    """A slash command: flat strings over HTTP by construction; over Socket Mode it is JSON.
    Slack sends neither `user` nor `channel` with a command, but Bolt (and
    `handlers.context`) read them before `user_id` and `channel_id`, as a string or an object,
    like every request's (`_Context`)."""

    command: str = Field(pattern=r"^/", max_length=255)
    user_id: Id = Field(min_length=1)
    channel_id: Id = Field(min_length=1)
    text: Text = ""
    user_name: Id | None = None
    channel_name: Id | None = None
    team_domain: Id | None = None
    enterprise_name: Id | None = None
    # A string in a slash command ("true"/"false"), a bool elsewhere; Bolt reads both.
    is_enterprise_install: Id | bool | None = None


_INTERACTIVE: dict[str, type[_Interactive]] = {
    "block_actions": _BlockActions,
    "view_submission": _ViewSubmission,
}


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
        _validate(_Command, data, "command")
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
        raise SlackRequestError(400, "payload.type: should be a string")
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
    except RecursionError:
        raise SlackRequestError(400, f"{what} is nested too deeply") from None
    except ValidationError as exc:
        raise SlackRequestError(400, _problem(exc, data, what)) from None


def _problem(exc: ValidationError, data: dict[str, Any], what: str) -> str:
    """`<where>: <what was wrong>` for the deepest field that is wrong. A field that may be one of
    several shapes (a string or an object) fails once per shape: those are said together."""
    found: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        where = _where(data, error["loc"], missing=error["type"] == "missing")
        found.setdefault(".".join([what, *where]), []).append(_said(error))
    where = max(found, key=lambda path: path.count("."))
    first, *others = dict.fromkeys(found[where])
    said = " or ".join([first, *(other.removeprefix("should be ") for other in others)])
    return f"{where}: {said}"[:300]


def _where(data: Any, loc: tuple[int | str, ...], *, missing: bool) -> list[str]:
    """The part of pydantic's error location that is in the payload (pydantic also names the
    union member it tried, like `str` or `_Named`, which the payload does not have)."""
    path, node = [], data
    for at, part in enumerate(loc):
        inside = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        )
        last = at == len(loc) - 1
        if not inside:
            if missing and last and isinstance(node, dict):
                path.append(str(part)[:60])
            if last:
                break
            continue  # a union member's name, not a field
        node = node[part]
        path.append(str(part)[:60])
    return path


_SAID = {
    "missing": "is missing",
    "string_type": "should be a string",
    "bool_type": "should be true or false",
    "list_type": "should be a list",
    "dict_type": "should be an object",
    "model_type": "should be an object",
    "model_attributes_type": "should be an object",
    "literal_error": "is not a kind handled here",
}


def _said(error: Any) -> str:
    return _SAID.get(error["type"]) or str(error["msg"]).lower()
