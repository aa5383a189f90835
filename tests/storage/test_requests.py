"""A Slack request kept in the requests stream reads back as it was kept; whatever else an entry
holds reads back as a request that says why it cannot be done, never as an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.storage.streams import (
    REQUEST_MAX_BYTES,
    RequestRefused,
    request_fields,
    request_of,
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)
BODIES = st.dictionaries(st.text(max_size=20), JSON, max_size=6)
WORKS = st.text(min_size=1, max_size=100)


@given(work=WORKS, body=BODIES)
def test_a_request_reads_back_as_it_was_kept(work: str, body: dict[str, Any]) -> None:
    read = request_of("1-0", request_fields(work, body))
    assert (read.work, read.body, read.problem) == (work, body, "")


@given(
    fields=st.dictionaries(
        st.sampled_from(["work", "body"]) | st.text(max_size=10),
        st.text(max_size=40) | JSON.map(json.dumps),
        max_size=4,
    )
)
def test_any_entry_reads_back_as_a_request_or_as_why_not(fields: dict[str, str]) -> None:
    read = request_of("1-0", fields)
    assert read.id == "1-0" and read.fields == fields
    if read.body is None:
        assert read.problem
    else:
        assert isinstance(read.body, dict) and read.work == fields["work"] and not read.problem


def test_a_body_no_slack_request_has_is_refused() -> None:
    with pytest.raises(RequestRefused):
        request_fields("incident_ack", {"text": "x" * REQUEST_MAX_BYTES})
    deep: dict[str, Any] = {}
    for _ in range(100_000):
        deep = {"d": deep}
    with pytest.raises(RequestRefused):
        request_fields("incident_ack", deep)
