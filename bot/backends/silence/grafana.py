"""Silences in Grafana's own Alertmanager: the same API v2, under Grafana's prefix, with a token.

The service account needs the `alert.silences:create` and `alert.silences:write` permissions (the
Editor role has them) and `alert.silences:read` for the status tick's check.
"""

from __future__ import annotations

import httpx

from bot.backends.silence.alertmanager import ApiV2Silencer, SilenceApiConfig

API_PREFIX = "/api/alertmanager/grafana/api/v2"


def grafana_silencer(
    url: str, token: str, *, timeout_s: float = 10.0, client: httpx.AsyncClient | None = None
) -> ApiV2Silencer:
    config = SilenceApiConfig(
        "Grafana",
        url.rstrip("/") + API_PREFIX,
        headers={"Authorization": f"Bearer {token}"},
        created_status=202,
        timeout_s=timeout_s,
    )
    return ApiV2Silencer(config, client)
