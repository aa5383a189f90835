"""Properties of the boundary around Bolt (`handlers.slack_boundary`), through a running bot over
HTTP: whatever body and headers arrive, signed or not, the answer is never a 5xx, a refusal is
JSON saying what was wrong in one line, and the log has no traceback and never the body."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from handlers.slack_boundary import slack_request
from tests.support.mutations import (
    JSON,
    SENDABLE_HEADER,
    interaction_body,
    mangled_bytes,
    mutated,
    slack_signed,
)
from tests.support.running import Tracebacks, served_bot
from tests.support.servers import RedisServer
from tests.support.slack import BLOCK_ACTION, COMMAND, SIGNING_SECRET, Slack

PROPERTIES = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# A word no log line may carry: it is only ever in the body.
CANARY = "canary-7f3a"
CONTENT_TYPES = st.sampled_from(
    ["application/x-www-form-urlencoded", "application/json", "text/plain", "", "multipart/x"]
)


@pytest.fixture(scope="module")
def bot_http(
    redis_server: RedisServer, _slack_session: Slack
) -> Iterator[tuple[httpx.Client, Tracebacks]]:
    with served_bot(redis_server, _slack_session, "boundary") as served:
        yield served


@st.composite
def any_body(draw: st.DrawFn) -> bytes:
    """Slack's shapes with the canary in them, mutated in shape or bytes, or anything at all."""
    action = {**BLOCK_ACTION, "trigger_id": CANARY}
    command = COMMAND + b"&trigger_id=" + CANARY.encode()
    shape = draw(st.sampled_from(["mutated", "bytes", "json", "binary", "event"]))
    if shape == "mutated":
        return interaction_body(draw(mutated(action)))
    if shape == "bytes":
        return draw(mangled_bytes(draw(st.sampled_from([command, interaction_body(action)]))))
    if shape == "json":
        return json.dumps({CANARY: draw(JSON)}).encode()
    if shape == "event":
        event = {
            "type": "event_callback",
            "event_id": "Ev0BOUNDARY",  # an ID the log may name, as it names a retried event
            "event": {"type": "app_mention", "text": CANARY, "user": draw(JSON)},
        }
        return json.dumps(draw(mutated(event))).encode()
    return CANARY.encode() + draw(st.binary(max_size=300))


SIGNING = st.sampled_from(["signed", "unsigned", "garbled", "retry"])


@st.composite
def any_headers(draw: st.DrawFn, body: bytes, signing: str) -> dict[str, str]:
    headers = slack_signed(body, SIGNING_SECRET)
    headers["Content-Type"] = draw(CONTENT_TYPES)
    if signing == "unsigned":
        del headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
    elif signing == "garbled":
        headers["X-Slack-Request-Timestamp"] = draw(SENDABLE_HEADER)
        headers["X-Slack-Signature"] = draw(SENDABLE_HEADER)
    elif signing == "retry":
        headers["X-Slack-Retry-Num"] = draw(SENDABLE_HEADER)
        headers["X-Slack-Retry-Reason"] = draw(SENDABLE_HEADER)
    return headers


def _refusal_said(response: httpx.Response) -> None:
    """A 400 is the boundary's JSON, one short line; a 401 is Bolt's own JSON."""
    answer: Any = response.json()
    if response.status_code == 400:
        assert answer["ok"] is False, answer
        error = answer["error"]
        assert isinstance(error, str) and error and "\n" not in error and len(error) < 200
        assert CANARY not in error
    else:
        assert answer == {"error": "invalid request"}


@PROPERTIES
@given(data=st.data())
def test_any_body_with_any_headers_is_answered_never_5xx_and_logged_without_it(
    bot_http: tuple[httpx.Client, Tracebacks],
    caplog: pytest.LogCaptureFixture,
    data: st.DataObject,
) -> None:
    http, tracebacks = bot_http
    body = data.draw(any_body())
    signing = data.draw(SIGNING)
    headers = data.draw(any_headers(body, signing))
    caplog.clear()
    with caplog.at_level(logging.INFO):
        response = http.post("/slack/events", content=body, headers=headers)
    assert response.status_code in (200, 400, 401), (response.status_code, response.text)
    if response.status_code >= 400:
        _refusal_said(response)
    if signing in ("unsigned", "garbled"):
        assert response.status_code == 401, "no listener is reached without Slack's signature"
    assert tracebacks.records == []
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        if record.name.startswith(("handlers.", "slack_bolt")):
            assert CANARY not in record.getMessage(), record.getMessage()
    lines = [r for r in caplog.records if r.name == "handlers.slack_boundary"]
    if response.status_code >= 400:
        assert len(lines) == 1, [r.getMessage() for r in lines]


def test_a_listener_that_raises_is_a_400_and_one_line(
    bot_http: tuple[httpx.Client, Tracebacks], caplog: pytest.LogCaptureFixture
) -> None:
    """A select whose action has no `action_id` makes Bolt's matcher raise inside its dispatch
    (Bolt would answer 500, logging a traceback)."""
    http, tracebacks = bot_http
    body = interaction_body({**BLOCK_ACTION, "actions": [{"type": "button", "value": CANARY}]})
    with caplog.at_level(logging.INFO):
        response = http.post("/slack/events", content=body, headers=slack_signed(body, "x"))
        assert response.status_code == 401
        caplog.clear()
        response = http.post(
            "/slack/events", content=body, headers=slack_signed(body, SIGNING_SECRET)
        )
    assert response.status_code == 400
    assert response.json() == {"ok": False, "error": "could not handle this request (KeyError)"}
    [line] = [r.getMessage() for r in caplog.records if r.name.startswith(("handlers", "slack"))]
    assert line == "slack: refused a request over HTTP: could not handle this request (KeyError)"
    assert tracebacks.records == []


def test_a_request_naming_a_lazy_function_is_taken_as_slack_sent_it() -> None:
    """Bolt would run only the named lazy function, on this replica, skipping the ack and the
    requests stream; the headers are not under Slack's signature, so they count for nothing."""
    body = COMMAND
    headers = {
        **slack_signed(body, SIGNING_SECRET),
        "X-Slack-Bolt-Lazy-Only": "1",
        "X-Slack-Bolt-Lazy-Function-Name": "run_queue_command",
    }
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/slack/events",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    built = slack_request(Request(scope), body)
    assert built.lazy_only is False and built.lazy_function_name is None
    assert built.headers["x-slack-bolt-lazy-only"] == ["1"], "the rest is as Slack sent it"
