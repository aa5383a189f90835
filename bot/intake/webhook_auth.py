"""Webhook authentication: pure functions of header values, secrets and the time; malformed input
is a refusal, never an exception. Grafana's HMAC (11.6+): the hex HMAC-SHA256 of the body, or with
a timestamp header of `<seconds>:<body>`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

SIGNATURE_HEADER = "X-Grafana-Alerting-Signature"
TIMESTAMP_HEADER = "X-Grafana-Alerting-Timestamp"
MAX_SKEW_S = 300
_SECONDS = re.compile(r"[0-9]{1,15}")


def _same(given: str, expected: str) -> bool:
    # compare_digest refuses non-ASCII str.
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def _credentials(authorization: str | None, scheme: str) -> str | None:
    given_scheme, _, credentials = (authorization or "").strip().partition(" ")
    if given_scheme.lower() != scheme or not credentials.strip():
        return None
    return credentials.strip()


def bearer_ok(authorization: str | None, token: str) -> bool:
    """An empty configured token accepts nothing: never "any bearer token will do"."""
    credentials = _credentials(authorization, "bearer")
    return credentials is not None and bool(token) and _same(credentials, token)


def basic_ok(authorization: str | None, username: str, password: str) -> bool:
    """RFC 7617, UTF-8. Both parts are compared even when the first differs (`&`, not `and`), so
    timing does not reveal a valid username."""
    credentials = _credentials(authorization, "basic")
    if credentials is None or not password:
        return False
    try:
        decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    given_user, colon, given_password = decoded.partition(":")
    if not colon:
        return False
    return _same(given_user, username) & _same(given_password, password)


def grafana_signature_problem(
    body: bytes,
    signature: str | None,
    timestamp: str | None,
    secret: str,
    *,
    now: float,
    require_timestamp: bool = False,
) -> str | None:
    """None when Grafana's HMAC signature is valid, else a reason for the 401. An old timestamp is
    refused so a request cannot be replayed; `require_timestamp` refuses body-only signatures."""
    if not signature or not signature.strip():
        return f"missing {SIGNATURE_HEADER}"
    if not secret:
        return "no HMAC secret configured"
    message = body
    if timestamp is None:
        if require_timestamp:
            return f"missing {TIMESTAMP_HEADER}"
    else:
        seconds = timestamp.strip()
        if not _SECONDS.fullmatch(seconds):
            return "malformed timestamp"
        if abs(now - int(seconds)) > MAX_SKEW_S:
            return "timestamp outside the 5-minute window"
        message = seconds.encode("ascii") + b":" + body
    expected = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
    if not _same(signature.strip().lower(), expected):
        return "signature mismatch"
    return None


GITHUB_SIGNATURE_HEADER = "X-Hub-Signature-256"
_GITHUB_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")


def github_signature_problem(body: bytes, header: str | None, secret: str | None) -> str | None:
    """None when GitHub's `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>` is valid,
    else a reason for the 401. GitHub signs no timestamp: a replay is refused by its delivery ID."""
    if not secret:
        return "no webhook secret configured"
    if header is None or not header.strip():
        return f"missing {GITHUB_SIGNATURE_HEADER}"
    given = _GITHUB_SIGNATURE.fullmatch(header.strip())
    if given is None:
        return f"malformed {GITHUB_SIGNATURE_HEADER}: expected sha256=<64 hex digits>"
    expected = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    if not _same(given.group(1).lower(), expected):
        return "signature mismatch: the body was not signed with GITHUB_WEBHOOK_SECRET"
    return None
