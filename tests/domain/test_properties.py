"""Property-based tests of the parsers of alert payloads: whatever arrives, the answer is a value
or the parser's own error (a 4xx with a message), never another exception. The webhook's
credential checks: tests/intake/test_auth_properties.py; Slack's requests:
tests/handlers/test_slack_boundary.py.

Inputs are arbitrary JSON and bytes, and the real payloads of `tests/fixtures` mutated in shape
and in bytes. What a parser accepts must also survive the rest of the path: a notification
becomes a stored delivery and a root message within Slack's limits.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.alerting.alerts import PayloadError, parse_json_body, parse_notification
from bot.domain.alerting.delivery import (
    Delivery,
    delivery_of,
    group_hash,
    matchers_from_silence_url,
)
from bot.domain.alerting.value_string import parse_value_string
from bot.domain.incident.incidents import Change, apply_notification, open_incident, repeated
from bot.render.root import render_root
from sandbox.slack_limits import check_content, validate_blocks
from tests.support.mutations import FAST, JSON, NOW, mangled_bytes, mutated
from tests.support.payloads import FIXTURES

PAYLOADS = {
    path.name: (path.parent.name, json.loads(path.read_text()))
    for path in sorted(FIXTURES.glob("*/*.json"))
}


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
