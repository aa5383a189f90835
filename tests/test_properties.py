"""Property-based tests of every parser of outside input: whatever arrives, the answer is a value
or the parser's own error (a 4xx with a message), never another exception.

Inputs are arbitrary JSON and bytes, and the real payloads of `tests/fixtures` mutated in shape
and in bytes. What a parser accepts must also survive the rest of the path: a notification
becomes a stored delivery and a root message within Slack's limits.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.domain.alert_facts import matchers_from_silence_url
from bot.domain.alerts import PayloadError, parse_json_body, parse_notification
from bot.domain.delivery import Delivery, delivery_of, group_hash
from bot.domain.incidents import Change, apply_notification, open_incident, repeated
from bot.domain.value_string import parse_value_string
from bot.intake.webhook_auth import basic_ok, bearer_ok, grafana_signature_problem
from bot.render.root import render_root
from handlers.slack_request import SlackRequest, SlackRequestError, parse, verify
from sandbox.slack_limits import check_content, validate_blocks
from tests.support.mutations import (
    HEADER_TEXT,
    JSON,
    interaction_body,
    mangled_bytes,
    mutated,
    slack_signed,
)
from tests.support.slack import BLOCK_ACTION, COMMAND

FIXTURES = Path(__file__).parent / "fixtures"
PAYLOADS = {
    path.name: (path.parent.name, json.loads(path.read_text()))
    for path in sorted(FIXTURES.glob("*/*.json"))
}
SECRET = "prop-secret"
NOW = 1_780_000_000.0
# QP_PROPERTY_EXAMPLES=5000 for a long hunt; the suite's default keeps it to seconds.
EXAMPLES = int(os.environ.get("QP_PROPERTY_EXAMPLES", "150"))
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _accepted_path(source: str, data: object) -> None:
    """Parse like the webhook; what is accepted is stored and rendered like the consumer does."""
    try:
        notification = parse_notification(source, data)  # type: ignore[arg-type]
    except PayloadError as exc:
        assert str(exc), "a refusal says what is wrong"
        return
    delivery = delivery_of(notification)
    assert Delivery.model_validate_json(delivery.model_dump_json()) == delivery
    # The key the webhook validated names the group the consumer applies it to.
    assert group_hash(source, notification.group_key) == delivery.group_hash
    if notification.status == "firing":
        now = datetime(2026, 1, 1, tzinfo=UTC)
        incident = open_incident(delivery, incident_id="1", uid="u", channel="C1", now=now)
        root = render_root(incident, now=now)
        assert validate_blocks(root.blocks) == []
        check_content(root.text, root.blocks, has_other=False)


# -- alert payloads --------------------------------------------------------------------------------


@FAST
@given(body=st.binary(max_size=2000))
def test_any_bytes_are_json_or_a_payload_error(body: bytes) -> None:
    with contextlib.suppress(PayloadError):
        parse_json_body(body)


@FAST
@given(source=st.sampled_from(["grafana", "alertmanager"]), data=JSON)
def test_any_json_is_a_notification_or_a_payload_error(source: str, data: Any) -> None:
    _accepted_path(source, data)


@FAST
@given(data=st.data(), name=st.sampled_from(sorted(PAYLOADS)))
def test_mutated_real_payloads_are_notifications_or_payload_errors(
    data: st.DataObject, name: str
) -> None:
    source, payload = PAYLOADS[name]
    _accepted_path(source, data.draw(mutated(payload)))


@FAST
@given(data=st.data(), name=st.sampled_from(sorted(PAYLOADS)))
def test_mangled_real_bodies_are_refused_or_parsed_never_crash(
    data: st.DataObject, name: str
) -> None:
    source, payload = PAYLOADS[name]
    body = data.draw(mangled_bytes(json.dumps(payload).encode()))
    try:
        decoded = parse_json_body(body)
    except PayloadError:
        return
    _accepted_path(source, decoded)


@FAST
@given(text=st.text(max_size=500))
def test_any_value_string_parses_to_series(text: str) -> None:
    for series in parse_value_string(text):
        assert isinstance(series.name, str)


@FAST
@given(text=st.text(max_size=500))
def test_any_silence_link_gives_matchers(text: str) -> None:
    for matcher in matchers_from_silence_url("https://g/alerting/silence/new?" + text):
        assert matcher.name


# -- webhook credentials ---------------------------------------------------------------------------


@FAST
@given(
    authorization=st.none() | HEADER_TEXT,
    signature=st.none() | HEADER_TEXT,
    timestamp=st.none() | HEADER_TEXT,
    body=st.binary(max_size=200),
)
def test_credential_checks_refuse_anything_malformed_quietly(
    authorization: str | None, signature: str | None, timestamp: str | None, body: bytes
) -> None:
    assert isinstance(bearer_ok(authorization, "token"), bool)
    assert isinstance(basic_ok(authorization, "user", "password"), bool)
    problem = grafana_signature_problem(
        body, signature, timestamp, SECRET, now=NOW, require_timestamp=True
    )
    assert problem is not None, "nothing random is a valid signature"


# -- Slack's requests ---------------------------------------------------------------------------


def _slack_outcome(body: bytes, headers: dict[str, str]) -> SlackRequest | SlackRequestError:
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        verify(lowered, body, SECRET, now=NOW)
        return parse(body, lowered.get("content-type", ""))
    except SlackRequestError as exc:
        assert exc.status in (400, 401) and str(exc)
        return exc


@FAST
@given(body=st.binary(max_size=500), timestamp=HEADER_TEXT, signature=HEADER_TEXT)
def test_unsigned_or_badly_signed_bodies_are_401_before_parsing(
    body: bytes, timestamp: str, signature: str
) -> None:
    headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}
    outcome = _slack_outcome(body, headers)
    assert isinstance(outcome, SlackRequestError) and outcome.status in (400, 401)


@FAST
@given(data=st.data())
def test_signed_mutated_interactions_are_handled_or_400(data: st.DataObject) -> None:
    body = interaction_body(data.draw(mutated(BLOCK_ACTION)))
    outcome = _slack_outcome(body, slack_signed(body, SECRET, at=NOW))
    if isinstance(outcome, SlackRequestError):
        assert outcome.status == 400
    else:
        assert outcome.kind in ("interactive", "ignored")


@FAST
@given(data=st.data(), base=st.sampled_from([COMMAND, interaction_body(BLOCK_ACTION)]))
def test_signed_mangled_bytes_are_handled_or_400(data: st.DataObject, base: bytes) -> None:
    body = data.draw(mangled_bytes(base))
    outcome = _slack_outcome(body, slack_signed(body, SECRET, at=NOW))
    if isinstance(outcome, SlackRequestError):
        assert outcome.status == 400


@FAST
@given(payload=JSON)
def test_any_signed_payload_json_is_handled_or_400(payload: Any) -> None:
    body = interaction_body(payload)
    outcome = _slack_outcome(body, slack_signed(body, SECRET, at=NOW))
    if isinstance(outcome, SlackRequest):
        assert outcome.kind == "ignored" or isinstance(outcome.body, dict)


def test_the_real_shapes_parse() -> None:
    action = _slack_outcome(
        interaction_body(BLOCK_ACTION), slack_signed(interaction_body(BLOCK_ACTION), SECRET, at=NOW)
    )
    command = _slack_outcome(COMMAND, slack_signed(COMMAND, SECRET, at=NOW))
    assert isinstance(action, SlackRequest) and action.kind == "interactive"
    assert isinstance(command, SlackRequest) and command.kind == "command"
    assert command.body["text"] == "ack"


@FAST
@given(
    data=st.data(), first=st.sampled_from(sorted(PAYLOADS)), then=st.sampled_from(sorted(PAYLOADS))
)
def test_a_repeat_of_the_delivery_an_incident_was_just_updated_with_only_counts(
    data: st.DataObject, first: str, then: str
) -> None:
    """The consumer folds a flood of one body with `repeated` instead of working the facts out
    again: it must leave the incident exactly as `apply_notification` would."""
    deliveries = []
    for name in (first, then):
        source, payload = PAYLOADS[name]
        try:
            deliveries.append(delivery_of(parse_notification(source, data.draw(mutated(payload)))))
        except PayloadError:
            return
    opened_at = datetime.fromtimestamp(NOW, UTC)
    incident = open_incident(deliveries[0], incident_id="1", uid="u", channel="C", now=opened_at)
    later = datetime.fromtimestamp(NOW + 60, UTC)
    updated, change = apply_notification(incident, deliveries[1], entry_id="2-0", now=later)
    if change is not Change.UPDATED:
        return
    again = datetime.fromtimestamp(NOW + 61, UTC)
    expected = apply_notification(updated, deliveries[1], entry_id="3-0", now=again)
    assert expected == (repeated(updated, now=again), Change.UPDATED)
