"""Every field of Slack's requests in every JSON shape, through the real bot: the person gets a
clear answer (or the sender a 400 saying what could not be read), never a 500, and the bot logs
no traceback.

The bases are Slack's own payloads (`/work/shared/fixtures/slack`, from bolt-python's scenario
tests) pointed at queuepilot's listeners. Each example takes one field, at any depth, and sends it
missing or as a value of each JSON type. The bot runs against the session's redis-server and the
Slack emulator; a slash command's answer is what the emulator shows the person (an ephemeral
message, or a post to the command's `response_url`).
"""

from __future__ import annotations

import copy
import json
import logging
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.render.root import INCIDENT_BLOCK_PREFIX
from bot.render.scale_modal import (
    AMOUNT_BLOCK,
    CONFIRM_VIEW,
    SCALE_VIEW,
    TYPE_BLOCK,
    VALUE,
    ScaleForm,
)
from handlers.context import actor_of, channel_of, first_action, interaction_of, object_at, text_at
from tests.support.mutations import (
    HOSTILE_NUMBERS,
    JSON_OF_TYPE,
    field_paths,
    field_replaced,
    slack_signed,
)
from tests.support.running import Tracebacks, served_bot
from tests.support.servers import RedisServer, wait_until
from tests.support.slack import CHANNEL, SIGNING_SECRET, Slack

SLACK_FIXTURES = Path("/work/shared/fixtures/slack")
USER = "U0ALICE"
SHAPES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((SLACK_FIXTURES / name).read_text())


def _ours(payload: dict[str, Any]) -> dict[str, Any]:
    """A fixture as Slack would send it to queuepilot: our channel, a user the emulator knows."""
    payload["user"]["id"] = USER
    for part in ("container", "channel"):
        if part in payload:
            payload[part]["channel_id" if part == "container" else "id"] = CHANNEL
    return payload


def _button() -> dict[str, Any]:
    payload = _ours(_fixture("block_actions-button.json"))
    payload["actions"][0].update(action_id="incident_ack", value="1:u")
    return payload


def _submission(callback_id: str) -> dict[str, Any]:
    payload = _ours(_fixture("view_submission.json"))
    view = payload["view"]
    view["callback_id"] = callback_id
    view["private_metadata"] = ScaleForm("1:u", CHANNEL, "linux.2xlarge", 4).dump()
    view["state"]["values"] = {
        TYPE_BLOCK: {
            VALUE: {"type": "static_select", "selected_option": {"value": "linux.2xlarge"}}
        },
        AMOUNT_BLOCK: {VALUE: {"type": "plain_text_input", "value": "4"}},
    }
    payload["response_urls"] = [
        {"block_id": "b", "action_id": "a", "channel_id": CHANNEL, "response_url": "https://x/1"}
    ]
    return payload


INTERACTIONS = {
    "button": _button(),
    "static_select": _ours(_fixture("block_actions-static_select.json")),
    "scale_form": _submission(SCALE_VIEW),
    "scale_confirm": _submission(CONFIRM_VIEW),
}
COMMAND = {
    **dict(urllib.parse.parse_qsl((SLACK_FIXTURES / "slash-command.form").read_text().strip())),
    "command": "/queue",
    "user_id": USER,
    "channel_id": CHANNEL,
}
# Slack's Events API envelope (api.slack.com/apis/events-api#callback-field), an app_mention.
EVENT = {
    "type": "event_callback",
    "token": "verification_token",
    "team_id": "T111",
    "api_app_id": "A111",
    "event": {
        "type": "app_mention",
        "user": USER,
        "text": "<@U0BOT> hi",
        "ts": "1.2",
        "channel": CHANNEL,
        "event_ts": "1.2",
    },
    "event_id": "Ev111",
    "event_time": 1,
    "authorizations": [
        {"enterprise_id": None, "team_id": "T111", "user_id": "U0BOT", "is_bot": True}
    ],
    "is_ext_shared_channel": False,
}


# Fields Bolt or a listener reads in some kind of request, which this one may not carry (a
# command's `user` or `channel`: Bolt reads them before `user_id`), and names no one reads.
READ_FIELDS = st.sampled_from(
    [
        *("user", "channel", "team", "enterprise", "container", "actions", "view", "message"),
        *("event", "state", "item", "previous_message", "response_url", "response_urls"),
        *("trigger_id", "thread_ts", "authorizations", "is_enterprise_install", "function_data"),
    ]
) | st.text(max_size=12)
ANY_JSON = st.one_of(*JSON_OF_TYPE.values())


@st.composite
def field_added(
    draw: st.DrawFn, original: dict[str, Any], values: st.SearchStrategy[Any] = ANY_JSON
) -> dict[str, Any]:
    """`original` with one more field, in any of its objects: what a sender that adds a field
    sends (a field that the mutations above never reach, since the fixture does not have it)."""
    data = copy.deepcopy(original)
    objects = [data]
    for path in field_paths(data):
        node: Any = data
        for part in path:
            node = node[part]
        if path and isinstance(node, dict):
            objects.append(node)
    target = draw(st.sampled_from(objects))
    target[draw(READ_FIELDS.filter(lambda name: name != "command"))] = draw(values)
    return data


@pytest.fixture(scope="module")
def bot_http(
    redis_server: RedisServer, _slack_session: Slack
) -> Iterator[tuple[httpx.Client, Tracebacks]]:
    _slack_session.emulator.reset()
    with served_bot(redis_server, _slack_session, "shapes") as served:
        yield served


def _post(http: httpx.Client, body: bytes) -> httpx.Response:
    return http.post("/slack/events", content=body, headers=slack_signed(body, SIGNING_SECRET))


def _interaction(payload: dict[str, Any]) -> bytes:
    return urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()


def _clear_or_ok(response: httpx.Response) -> None:
    """A 200, or a 4xx that says what was wrong: what Slack's sender and an operator can act on."""
    assert response.status_code == 200 or (
        400 <= response.status_code < 500 and response.json()["error"]
    ), (response.status_code, response.text)


def _answers(slack: Slack) -> int:
    return sum(1 for m in slack.emulator.ephemerals(CHANNEL) if m.user == USER)


def _respond_url(slack: Slack) -> str:
    """A `response_url` the emulator answers in our channel, as Slack gives each command."""
    with slack.emulator.workspace() as ws:
        token = ws.ui.new_response_url(CHANNEL, USER, None)
    return f"{slack.server.url}/_emulator/respond/{token}"


def _answered_after(slack: Slack, before: int, *, timeout: float = 5.0) -> None:
    wait_until(lambda: _answers(slack) > before, timeout=timeout, what="the command's answer")


# -- the two defects of issue 27 -----------------------------------------------------------------


def test_response_urls_as_a_string_is_refused_in_one_line(
    bot_http: tuple[httpx.Client, Tracebacks], caplog: pytest.LogCaptureFixture
) -> None:
    """Bolt reads `response_urls` as it builds its request and raises on a string: the
    sender gets a 400 saying the request could not be read, the log one line without the body."""
    http, tracebacks = bot_http
    payload = {**INTERACTIONS["scale_form"], "response_urls": "https://hooks.slack.com/x"}
    with caplog.at_level(logging.INFO, logger="handlers.slack_boundary"):
        response = _post(http, _interaction(payload))
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["ok"] is False and answer["error"].startswith("could not read this request")
    [line] = [r.getMessage() for r in caplog.records if r.name == "handlers.slack_boundary"]
    assert "hooks.slack.com" not in line and "\n" not in line
    assert tracebacks.records == []


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("silence " + "9" * 5000 + "m", "between 1 minute and 7 days"),
        ("silence ١٢m", "is not a duration"),
        ("scale linux.2xlarge +" + "9" * 5000, "at most 9999"),
        ("scale linux.2xlarge +١٢", "usage: `/queue scale"),
        ("ack " + "7" * 5000, "is not an incident ID"),
    ],
)
def test_a_command_with_a_hostile_number_is_answered_with_what_was_wrong(
    bot_http: tuple[httpx.Client, Tracebacks], _slack_session: Slack, text: str, wrong: str
) -> None:
    http, tracebacks = bot_http
    before = _answers(_slack_session)
    body = urllib.parse.urlencode({**COMMAND, "text": text}).encode()
    assert _post(http, body).status_code == 200
    _answered_after(_slack_session, before)
    assert wrong in _slack_session.emulator.ephemerals(CHANNEL)[-1].text
    assert tracebacks.records == []


@pytest.mark.parametrize(
    ("field", "value"), [("user", "Uxyz"), ("channel", "Cxyz"), ("container", "x")]
)
def test_a_command_with_an_extra_user_or_channel_field_is_answered(
    bot_http: tuple[httpx.Client, Tracebacks], _slack_session: Slack, field: str, value: str
) -> None:
    """Slack sends a command's user and channel as `user_id` and `channel_id`; Bolt reads a
    `user` or `channel` field first, as a string or an object. With one as a string the
    listener used to fail after the 200: two tracebacks and no answer."""
    http, tracebacks = bot_http
    form = {**COMMAND, "text": "help", "response_url": _respond_url(_slack_session), field: value}
    before = _answers(_slack_session)
    assert _post(http, urllib.parse.urlencode(form).encode()).status_code == 200
    _answered_after(_slack_session, before)
    assert "/queue" in _slack_session.emulator.ephemerals(CHANNEL)[-1].text
    assert tracebacks.records == []


@pytest.mark.parametrize("seconds", ["²", "١٢٠", "9" * 1500, "-3600", "3600.0"])
def test_a_silence_choice_that_is_no_number_asks_for_one(
    bot_http: tuple[httpx.Client, Tracebacks], _slack_session: Slack, seconds: str
) -> None:
    http, tracebacks = bot_http
    payload = json.loads(json.dumps(INTERACTIONS["static_select"]))
    payload["actions"][0]["selected_option"]["value"] = seconds
    # The clicked message names an incident, so the choice itself is read.
    payload["message"]["blocks"] = [{"type": "context", "block_id": INCIDENT_BLOCK_PREFIX + "1:u"}]
    before = _answers(_slack_session)
    assert _post(http, _interaction(payload)).status_code == 200
    _answered_after(_slack_session, before)
    assert "Choose how long" in _slack_session.emulator.ephemerals(CHANNEL)[-1].text
    assert tracebacks.records == []


@pytest.mark.parametrize("amount", ["²", "١٢", "9" * 5000, "-4", "4e2"])
def test_a_scale_amount_that_is_no_number_is_an_error_under_a_field(
    bot_http: tuple[httpx.Client, Tracebacks], amount: str
) -> None:
    http, tracebacks = bot_http
    payload = json.loads(json.dumps(INTERACTIONS["scale_form"]))
    payload["view"]["state"]["values"][AMOUNT_BLOCK][VALUE]["value"] = amount
    response = _post(http, _interaction(payload))
    assert response.status_code == 200, response.text
    assert response.json()["response_action"] == "errors"
    assert tracebacks.records == []


# -- every field, every shape ---------------------------------------------------------------------


@SHAPES
@given(data=st.data(), name=st.sampled_from(sorted(INTERACTIONS)))
def test_any_field_of_an_interaction_in_any_shape_is_answered_clearly(
    bot_http: tuple[httpx.Client, Tracebacks], data: st.DataObject, name: str
) -> None:
    http, tracebacks = bot_http
    payload = data.draw(field_replaced(INTERACTIONS[name]))
    _clear_or_ok(_post(http, _interaction(payload)))
    assert tracebacks.records == []


COMMAND_TEXT = st.builds(
    " ".join,
    st.tuples(
        st.sampled_from(["silence", "scale linux.2xlarge", "ack", "resolve", "unsilence", "help"]),
        HOSTILE_NUMBERS | HOSTILE_NUMBERS.map(lambda n: n + "m") | st.text(max_size=20),
    ),
)


@SHAPES
@given(
    text=COMMAND_TEXT,
    field=st.sampled_from(sorted(COMMAND)),
    value=st.none() | JSON_OF_TYPE["string"],
    extra=st.none() | st.tuples(READ_FIELDS, JSON_OF_TYPE["string"]),
)
def test_any_command_is_answered_to_the_person(
    bot_http: tuple[httpx.Client, Tracebacks],
    _slack_session: Slack,
    text: str,
    field: str,
    value: str | None,
    extra: tuple[str, str] | None,
) -> None:
    """Over HTTP every field is a string: each in turn is missing or any string, one more field
    may be added (one Bolt reads elsewhere, like `user`, or any name), the text is a command
    with hostile numbers. A 200 means the person sees an answer."""
    http, tracebacks = bot_http
    form = {**COMMAND, "text": text, "response_url": _respond_url(_slack_session)}
    # Slack sends only the commands the app configured: `command` is always there, as is.
    if field == "command":
        pass
    elif value is None:
        form.pop(field)
    else:
        form[field] = value
    if extra is not None and extra[0] not in ("command", "response_url"):
        form[extra[0]] = extra[1]
    before = _answers(_slack_session)
    response = _post(http, urllib.parse.urlencode(form).encode())
    _clear_or_ok(response)
    if response.status_code == 200:
        _answered_after(_slack_session, before)
    assert tracebacks.records == []


# -- what the listeners read, whichever way the payload arrived -----------------------------------

BODIES = {**{f"interactive:{n}": p for n, p in INTERACTIONS.items()}}
BODIES |= {"command": COMMAND, "event": EVENT}


@settings(max_examples=400, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(BODIES)))
def test_the_listeners_read_any_body_without_failing(data: st.DataObject, name: str) -> None:
    """Bolt hands the listeners the body as Slack sent it (a Socket Mode envelope carries JSON of
    any type, even for a slash command): with a field changed or one added, the listeners'
    readers of who acted, where, which request and which action still answer, typed."""
    body = data.draw(field_replaced(BODIES[name]) | field_added(BODIES[name]))
    assert isinstance(actor_of(body).user_id, str) and isinstance(actor_of(body).name, str)
    assert isinstance(channel_of(body), str)
    assert interaction_of(body) is None or interaction_of(body)
    assert isinstance(text_at(first_action(body), "selected_option", "value"), str)
    assert isinstance(object_at(body, "view", "state", "values"), dict)


@pytest.mark.parametrize("nested", ["0", True, [{"team": 5}], [{"authorizations": {}}]])
def test_an_authorization_bolt_cannot_read_is_refused_without_a_traceback(
    bot_http: tuple[httpx.Client, Tracebacks], nested: object
) -> None:
    """Bolt reads `authorizations[0]` as a payload of its own and recurses while it has one (an
    `authorizations` string inside the first authorization raises inside Bolt)."""
    http, tracebacks = bot_http
    event = copy.deepcopy(EVENT)
    event["event_id"] = f"Ev0NESTED{json.dumps(nested)}"
    event["authorizations"] = [{"team_id": "T111", "user_id": "U0BOT", "authorizations": nested}]
    body = json.dumps(event).encode()
    response = http.post(
        "/slack/events",
        content=body,
        headers={**slack_signed(body, SIGNING_SECRET), "Content-Type": "application/json"},
    )
    _clear_or_ok(response)
    assert tracebacks.records == []
