"""Property-based tests of the parser of Slack's requests (`handlers.slack_request`): whatever
arrives, signed or not, the answer is a request or a 400/401 with a message, never another
exception."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from handlers.slack_request import SlackRequest, SlackRequestError, parse, verify
from tests.support.mutations import (
    FAST,
    HEADER_TEXT,
    JSON,
    NOW,
    SECRET,
    interaction_body,
    mangled_bytes,
    mutated,
    slack_signed,
)
from tests.support.slack import BLOCK_ACTION, COMMAND


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
