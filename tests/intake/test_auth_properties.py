"""Property-based tests of the webhook's credential checks: whatever headers and body arrive, a
check answers yes or no (a signature: what is wrong), never an exception."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.intake.webhook_auth import (
    basic_ok,
    bearer_ok,
    github_signature_problem,
    grafana_signature_problem,
)
from tests.support.mutations import FAST, HEADER_TEXT, NOW, SECRET


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
    assert github_signature_problem(body, signature, SECRET) is not None
