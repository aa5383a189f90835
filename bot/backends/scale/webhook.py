"""The `webhook` scaler: a signed POST that your own automation turns into runners, and how a
receiver verifies it (docs/backends.md, "`webhook`: your own receiver")."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping

import httpx

from bot.backends.http import Counted, HttpBackend, uncounted
from bot.backends.scale import Scaler, ScaleRequest, ScaleResult, count_of
from bot.config import Settings
from bot.domain.scale.scaling import Capacity

TIMESTAMP_HEADER = "X-Queuepilot-Timestamp"
SIGNATURE_HEADER = "X-Queuepilot-Signature"
REPLAY_WINDOW_S = 300


class WebhookScaler(HttpBackend, Scaler):
    name = "the scaler webhook"
    service = "The scaler webhook"
    cannot_undo = (
        "your receiver decides what a scale-up does, and queuepilot has no call to undo it"
    )

    def __init__(
        self,
        config: Settings,
        client: httpx.AsyncClient | None = None,
        *,
        counted: Counted = uncounted,
    ) -> None:
        super().__init__(client, None, config.backend_timeout_seconds, counted=counted)
        secret = config.scaler_webhook_secret
        self._url = config.scaler_webhook_url or ""
        self._secret = secret.get_secret_value() if secret is not None else ""

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        target = scale.target
        asked = {
            "runner_type": target.runner_type,
            "delta": scale.delta,
            "target": target.target,
            "incident_id": scale.incident_id,
            "requested_by": scale.requested_by,
            "request_id": scale.request_id,
        }
        body = json.dumps(asked, separators=(",", ":")).encode()
        stamp = int(time.time())
        signed = {TIMESTAMP_HEADER: str(stamp), SIGNATURE_HEADER: sign(self._secret, stamp, body)}
        response = await self._request(
            "POST", self._url, expect=range(200, 300), content=body,
            headers={"Content-Type": "application/json", **signed},
        )  # fmt: skip
        try:
            answer = response.json()
        except ValueError:
            answer = None
        return webhook_result(scale, answer)


def webhook_result(scale: ScaleRequest, data: object) -> ScaleResult:
    detail = f"+{scale.delta} requested ({scale.target.target})"
    if not isinstance(data, dict):
        return ScaleResult(detail)
    before, after, maximum = (count_of(data.get(k)) for k in ("before", "after", "maximum"))
    if before is None or after is None:
        return ScaleResult(detail)
    tail = f" (max {maximum})" if maximum is not None else ""
    return ScaleResult(
        f"{before} → {after} runners{tail}",
        Capacity(current=before, maximum=maximum),
        Capacity(current=after, maximum=maximum),
    )


def sign(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b":" + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(secret: str, headers: Mapping[str, str], body: bytes, *, now: float) -> str | None:
    """Why the request is not authentic and fresh; None when it is."""
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
