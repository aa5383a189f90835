"""How the `webhook` scaler signs its requests, and how a receiver verifies them.

`X-Queuepilot-Timestamp` is the Unix time in seconds; `X-Queuepilot-Signature` is the lowercase
hex HMAC-SHA256, under the shared secret, of `<timestamp>:<raw body>` (the same construction as
Grafana's webhook HMAC). A receiver recomputes it over the bytes it received, compares in constant
time, and refuses timestamps more than `REPLAY_WINDOW_S` away from its clock; the body's
`request_id` lets it refuse a replay inside the window too.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

TIMESTAMP_HEADER = "X-Queuepilot-Timestamp"
SIGNATURE_HEADER = "X-Queuepilot-Signature"
REPLAY_WINDOW_S = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b":" + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(secret: str, headers: Mapping[str, str], body: bytes, *, now: float) -> str | None:
    """None when the request is authentic and fresh; else why not."""
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    signature = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not stamp.isascii() or not stamp.isdigit():
        return "missing or malformed timestamp"
    if abs(now - int(stamp)) > REPLAY_WINDOW_S:
        return "timestamp outside the replay window"
    if not hmac.compare_digest(sign(secret, int(stamp), body), signature):
        return "signature mismatch"
    return None
