"""Webhook authentication: bearer, basic, Grafana's HMAC signature and GitHub's."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from bot.intake.webhook_auth import (
    basic_ok,
    bearer_ok,
    github_signature_problem,
    grafana_signature_problem,
)

SECRET = "s3cret"
BODY = b'{"version":"1","groupKey":"{}:{}","status":"firing","alerts":[]}'
NOW = 1_758_042_679.0


def sign(body: bytes, secret: str = SECRET, timestamp: str | None = None) -> str:
    """What Grafana's HMACRoundTripper sends: hex HMAC-SHA256 of [<seconds>:]<body>."""
    message = body if timestamp is None else timestamp.encode() + b":" + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def basic(credentials: str) -> str:
    return "Basic " + base64.b64encode(credentials.encode()).decode()


# --- bearer ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["Bearer tok-1", "bearer tok-1", "BEARER  tok-1 "])
def test_bearer_accepts(header: str) -> None:
    assert bearer_ok(header, "tok-1")


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer ", "Bearer tok-2", "Basic tok-1", "tok-1", "Bearer é"]
)
def test_bearer_refuses(header: str | None) -> None:
    assert not bearer_ok(header, "tok-1")


def test_bearer_with_no_configured_token_accepts_nothing() -> None:
    assert not bearer_ok("Bearer ", "") and not bearer_ok("Bearer x", "")


# --- basic ----------------------------------------------------------------------------------------


def test_basic_accepts() -> None:
    assert basic_ok(basic("grafana:pa:ss"), "grafana", "pa:ss")
    assert basic_ok(basic("grafana:pa:ss").replace("Basic", "basic"), "grafana", "pa:ss")
    assert basic_ok(basic("jürgen:pässwort"), "jürgen", "pässwort")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        basic("grafana:wrong"),
        basic("other:pa:ss"),
        basic("grafanapa:ss"),
        basic("grafana"),
        "Basic !!!not-base64!!!",
        "Basic Z3JhZmFuYTpwYTpzcw",  # missing padding
        "Basic " + base64.b64encode(b"grafana:\xff").decode(),  # not UTF-8
        "Bearer " + base64.b64encode(b"grafana:pa:ss").decode(),
    ],
)
def test_basic_refuses(header: str | None) -> None:
    assert not basic_ok(header, "grafana", "pa:ss")


def test_basic_with_no_configured_password_accepts_nothing() -> None:
    assert not basic_ok(basic("grafana:"), "grafana", "")


# --- Grafana HMAC ---------------------------------------------------------------------------------


def test_signature_over_body_only() -> None:
    assert grafana_signature_problem(BODY, sign(BODY), None, SECRET, now=NOW) is None
    upper = sign(BODY).upper()
    assert grafana_signature_problem(BODY, upper, None, SECRET, now=NOW) is None


def test_signature_with_timestamp() -> None:
    stamp = str(int(NOW) - 10)
    signature = sign(BODY, timestamp=stamp)
    assert grafana_signature_problem(BODY, signature, stamp, SECRET, now=NOW) is None
    # The body-only signature does not verify once a timestamp is sent, and vice versa.
    assert grafana_signature_problem(BODY, sign(BODY), stamp, SECRET, now=NOW) == (
        "signature mismatch"
    )
    assert grafana_signature_problem(BODY, signature, None, SECRET, now=NOW) == (
        "signature mismatch"
    )


@pytest.mark.parametrize("offset", [-301, 301, -86_400, 86_400])
def test_timestamp_outside_window_either_way(offset: int) -> None:
    stamp = str(int(NOW) + offset)
    problem = grafana_signature_problem(BODY, sign(BODY, timestamp=stamp), stamp, SECRET, now=NOW)
    assert problem == "timestamp outside the 5-minute window"


@pytest.mark.parametrize("offset", [-300, 300, 0])
def test_timestamp_at_window_edges(offset: int) -> None:
    stamp = str(int(NOW) + offset)
    assert (
        grafana_signature_problem(BODY, sign(BODY, timestamp=stamp), stamp, SECRET, now=NOW) is None
    )


@pytest.mark.parametrize("signature", [None, "", "  "])
def test_missing_signature(signature: str | None) -> None:
    problem = grafana_signature_problem(BODY, signature, None, SECRET, now=NOW)
    assert problem == "missing X-Grafana-Alerting-Signature"


@pytest.mark.parametrize(
    "stamp", ["", "soon", "1758042679.5", "-1758042679", "1758042679000000000000"]
)
def test_malformed_timestamp(stamp: str) -> None:
    problem = grafana_signature_problem(BODY, sign(BODY, timestamp=stamp), stamp, SECRET, now=NOW)
    assert problem == "malformed timestamp"


@pytest.mark.parametrize(
    ("body", "signature", "secret"),
    [
        (BODY + b" ", sign(BODY), SECRET),  # tampered body
        (BODY.replace(b"firing", b"resolved"), sign(BODY), SECRET),
        (BODY, sign(BODY, secret="other"), SECRET),  # wrong secret
        (BODY, "sha256=" + sign(BODY), SECRET),  # Grafana sends bare hex, no prefix
        (BODY, sign(BODY)[:-1], SECRET),
        (BODY, "zz" * 32, SECRET),
        (BODY, "é" * 64, SECRET),
    ],
)
def test_signature_mismatch(body: bytes, signature: str, secret: str) -> None:
    assert grafana_signature_problem(body, signature, None, secret, now=NOW) == "signature mismatch"


def test_timestamp_can_be_required() -> None:
    problem = grafana_signature_problem(
        BODY, sign(BODY), None, SECRET, now=NOW, require_timestamp=True
    )
    assert problem == "missing X-Grafana-Alerting-Timestamp"


def test_no_secret_configured_refuses() -> None:
    assert grafana_signature_problem(BODY, sign(BODY, secret=""), None, "", now=NOW) is not None


# --- GitHub's X-Hub-Signature-256 ------------------------------------------------------------


def github_signed(body: bytes, secret: str = SECRET) -> str:
    """What GitHub sends: `sha256=` and the hex HMAC-SHA256 of the raw body."""
    return "sha256=" + sign(body, secret)


def test_github_signature_accepted() -> None:
    assert github_signature_problem(BODY, github_signed(BODY), SECRET) is None
    assert github_signature_problem(BODY, f" {github_signed(BODY)} ", SECRET) is None


@pytest.mark.parametrize(
    ("header", "secret", "problem"),
    [
        (None, SECRET, "missing X-Hub-Signature-256"),
        ("  ", SECRET, "missing X-Hub-Signature-256"),
        (sign(BODY), SECRET, "malformed"),  # bare hex: Grafana's form, not GitHub's
        ("sha1=" + sign(BODY)[:40], SECRET, "malformed"),  # X-Hub-Signature's SHA-1, not ours
        ("sha256=" + sign(BODY)[:-1], SECRET, "malformed"),
        ("sha256=" + "é" * 64, SECRET, "malformed"),
        ("sha256=" + sign(BODY + b" "), SECRET, "signature mismatch"),
        (github_signed(BODY, "other"), SECRET, "signature mismatch"),
        (github_signed(BODY, ""), "", "no webhook secret configured"),
        (github_signed(BODY), None, "no webhook secret configured"),
    ],
)
def test_github_signature_refused(header: str | None, secret: str | None, problem: str) -> None:
    found = github_signature_problem(BODY, header, secret)
    assert found is not None and found.startswith(problem), found
