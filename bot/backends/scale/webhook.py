"""The `webhook` scaler: a signed POST that your own automation turns into runners.

Body: `{"runner_type", "delta", "target", "incident_id", "requested_by", "request_id"}`, signed as
`signature.py` says. Any 2xx is success. A receiver that knows the fleet may answer
`{"before": n, "after": m, "maximum": k}`, which the thread reply then shows.
"""

from __future__ import annotations

import json
import time

import httpx

from bot.backends.http import request
from bot.backends.scale import Scaler, ScaleRequest, ScaleResult, count_of
from bot.backends.scale.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from bot.config import Settings
from bot.domain.scaling import Capacity


class WebhookScaler(Scaler):
    name = "the scaler webhook"
    cannot_undo = (
        "your receiver decides what a scale-up does, and queuepilot has no call to undo it"
    )

    def __init__(self, config: Settings, client: httpx.AsyncClient | None = None) -> None:
        secret = config.scaler_webhook_secret
        self._url = config.scaler_webhook_url or ""
        self._secret = secret.get_secret_value() if secret is not None else ""
        self._client = client or httpx.AsyncClient(timeout=config.backend_timeout_seconds)

    async def scale(self, scale: ScaleRequest) -> ScaleResult:
        target = scale.target
        body = json.dumps(
            {
                "runner_type": target.runner_type,
                "delta": scale.delta,
                "target": target.target,
                "incident_id": scale.incident_id,
                "requested_by": scale.requested_by,
                "request_id": scale.request_id,
            },
            separators=(",", ":"),
        ).encode()
        stamp = int(time.time())
        signed = {TIMESTAMP_HEADER: str(stamp), SIGNATURE_HEADER: sign(self._secret, stamp, body)}
        response = await request(
            self._client, "The scaler webhook", "POST", self._url, expect=range(200, 300),
            content=body, headers={"Content-Type": "application/json", **signed},
        )  # fmt: skip
        try:
            answer = response.json()
        except ValueError:
            answer = None
        return webhook_result(scale, answer)


def webhook_result(scale: ScaleRequest, data: object) -> ScaleResult:
    """What the receiver said it did, when it says it in the documented shape."""
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
