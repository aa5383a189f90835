"""Hostile requests to a running bot, over HTTP: every endpoint answers 4xx or 2xx, never 5xx,
logs no traceback, and keeps serving. `make bench` runs the same at 10,000 requests."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.mutations import (
    JSON,
    SENDABLE_HEADER,
    interaction_body,
    mangled_bytes,
    mutated,
    slack_signed,
)
from tests.support.payloads import fixture_json
from tests.support.running import WEBHOOK_TOKEN, Tracebacks, served_bot
from tests.support.servers import RedisServer
from tests.support.slack import BLOCK_ACTION, COMMAND, SIGNING_SECRET, Slack

HOSTILE = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
GRAFANA = fixture_json("grafana/queue-alert-firing.json")
ALERTMANAGER = fixture_json("alertmanager/runner-queue-am-00-firing.json")


@pytest.fixture(scope="module")
def bot_http(
    redis_server: RedisServer, _slack_session: Slack
) -> Iterator[tuple[httpx.Client, Tracebacks]]:
    with served_bot(redis_server, _slack_session, "fuzz") as served:
        yield served


def _answered(http: httpx.Client, path: str, body: bytes, headers: dict[str, str]) -> int:
    status = http.post(path, content=body, headers=headers).status_code
    assert status < 500, (path, status, body[:200], headers)
    return status


@st.composite
def alert_request(draw: st.DrawFn) -> tuple[str, bytes, dict[str, str]]:
    path, payload = draw(
        st.sampled_from([("/alerts/grafana", GRAFANA), ("/alerts/alertmanager", ALERTMANAGER)])
    )
    shape = draw(st.sampled_from(["mutated", "bytes", "json"]))
    if shape == "mutated":
        body = json.dumps(draw(mutated(payload))).encode()
    elif shape == "bytes":
        body = draw(mangled_bytes(json.dumps(payload).encode()))
    else:
        body = json.dumps(draw(JSON)).encode()
    headers = {"Content-Type": draw(st.sampled_from(["application/json", "text/plain", ""]))}
    if draw(st.booleans()):
        headers["Authorization"] = f"Bearer {WEBHOOK_TOKEN}"
    elif draw(st.booleans()):
        headers["Authorization"] = draw(SENDABLE_HEADER)
    return path, body, headers


@st.composite
def slack_request(draw: st.DrawFn) -> tuple[str, bytes, dict[str, str]]:
    base = draw(st.sampled_from([COMMAND, interaction_body(BLOCK_ACTION), b"payload=1"]))
    shape = draw(st.sampled_from(["mutated", "bytes", "as is"]))
    if shape == "mutated":
        body = interaction_body(draw(mutated(BLOCK_ACTION)))
    elif shape == "bytes":
        body = draw(mangled_bytes(base))
    else:
        body = base
    signing = draw(st.sampled_from(["signed", "unsigned", "garbled"]))
    headers = slack_signed(body, SIGNING_SECRET)
    if signing == "unsigned":
        headers = {"Content-Type": headers["Content-Type"]}
    elif signing == "garbled":
        headers["X-Slack-Request-Timestamp"] = draw(SENDABLE_HEADER)
        headers["X-Slack-Signature"] = draw(SENDABLE_HEADER)
    return "/slack/events", body, headers


@HOSTILE
@given(request=alert_request())
def test_hostile_alert_requests_are_never_a_5xx(
    bot_http: tuple[httpx.Client, Tracebacks], request: tuple[str, bytes, dict[str, str]]
) -> None:
    http, tracebacks = bot_http
    _answered(http, *request)
    assert tracebacks.records == []


@HOSTILE
@given(request=slack_request())
def test_hostile_slack_requests_are_never_a_5xx(
    bot_http: tuple[httpx.Client, Tracebacks], request: tuple[str, bytes, dict[str, str]]
) -> None:
    http, tracebacks = bot_http
    status = _answered(http, *request)
    assert status in (200, 400, 401, 413), status
    assert tracebacks.records == []


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b"payload=1", "signed", 400),
        (b"payload=%5B1%5D", "signed", 400),
        (b"payload=%zz%ff", "signed", 400),
        # Slack signs UTF-8 text (slack_sdk's verifier reads the body as it): other bytes are
        # not a request Slack signed, whatever HMAC came with them.
        (b"payload=\xff\xfe", "signed", 401),
        (interaction_body({**BLOCK_ACTION, "actions": [{"type": "button"}]}), "signed", 400),
        (COMMAND, "unsigned", 401),
        (COMMAND, {"X-Slack-Request-Timestamp": "0", "X-Slack-Signature": "v0=0"}, 401),
        # Bolt parses the body before its middleware verifies the signature, and slack_sdk's
        # verifier raises on a timestamp `int()` refuses: unsigned all the same, so 401.
        (b"payload=1", "unsigned", 401),
        (COMMAND, {"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=0"}, 401),
        (COMMAND, {"X-Slack-Request-Timestamp": "1" * 5000, "X-Slack-Signature": "v0=0"}, 401),
        (interaction_body({**BLOCK_ACTION, "type": "shortcut"}), "signed", 200),
        # Slack's certificate check: acked when signed, refused like any other when not.
        (b"ssl_check=1&token=x", "signed", 200),
        (b"ssl_check=1&token=x", "unsigned", 401),
    ],
    ids=[
        "payload-number",
        "payload-list",
        "bad-percent-escapes",
        "invalid-utf8",
        "action-without-action_id",
        "unsigned",
        "stale-timestamp",
        "unsigned-unreadable",
        "non-numeric-timestamp",
        "5000-digit-timestamp",
        "unhandled-type",
        "ssl-check-signed",
        "ssl-check-unsigned",
    ],
)
def test_the_bodies_that_used_to_answer_500(
    bot_http: tuple[httpx.Client, Tracebacks], body: bytes, headers: Any, status: int
) -> None:
    http, tracebacks = bot_http
    sent = slack_signed(body, SIGNING_SECRET) if headers == "signed" else {}
    if isinstance(headers, dict):
        sent = {"Content-Type": "application/x-www-form-urlencoded", **headers}
    response = http.post("/slack/events", content=body, headers=sent)
    assert response.status_code == status, response.text
    if status >= 400:
        assert response.json()["error"], "a 4xx says what is wrong"
    if status == 400:
        assert response.json()["ok"] is False
    assert tracebacks.records == []


def test_an_event_delivered_again_is_handled_once(
    bot_http: tuple[httpx.Client, Tracebacks],
) -> None:
    http, _ = bot_http
    event = {"type": "event_callback", "event_id": "Ev1", "event": {"type": "app_mention"}}
    body = json.dumps(event).encode()
    first = http.post("/slack/events", content=body, headers=slack_signed(body, SIGNING_SECRET))
    again_headers = {**slack_signed(body, SIGNING_SECRET), "X-Slack-Retry-Num": "1"}
    again = http.post("/slack/events", content=body, headers=again_headers)
    assert (first.status_code, again.status_code) == (200, 200)


def test_url_verification_answers_the_challenge(bot_http: tuple[httpx.Client, Tracebacks]) -> None:
    http, _ = bot_http
    body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"}).encode()
    headers = {**slack_signed(body, SIGNING_SECRET), "Content-Type": "application/json"}
    response = http.post("/slack/events", content=body, headers=headers)
    assert response.json() == {"challenge": "c-123"}
