"""Silences through Alertmanager's API v2, which Grafana also serves for its own Alertmanager."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from bot.backends.errors import BackendError
from bot.backends.http import json_object, request
from bot.backends.silence import SilenceRequest, SilenceState
from bot.domain.alerts import parse_timestamp


@dataclass(frozen=True)
class SilenceApiConfig:
    """Where the API v2 lives (`<base>/silences`, `<base>/silence/{id}`) and how to reach it."""

    name: str
    api_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    # Alertmanager answers 200 to a new silence; Grafana 202.
    created_status: int = 200
    timeout_s: float = 10.0


class ApiV2Silencer:
    def __init__(self, config: SilenceApiConfig, client: httpx.AsyncClient | None = None) -> None:
        self.name = config.name
        self._config = config
        self._base = config.api_url.rstrip("/")
        self._client = client or httpx.AsyncClient(timeout=config.timeout_s)

    async def create(self, silence: SilenceRequest) -> str:
        body = {
            "matchers": [
                {"name": m.name, "value": m.value, "isRegex": m.is_regex, "isEqual": m.is_equal}
                for m in silence.matchers
            ],
            "startsAt": _rfc3339(silence),
            "endsAt": silence.ends_at.isoformat().replace("+00:00", "Z"),
            "createdBy": silence.created_by,
            "comment": silence.comment,
        }
        response = await self._call(
            "POST", "/silences", json_body=body, expect=(self._config.created_status, 200)
        )
        silence_id = json_object(response, self.name).get("silenceID")
        if not isinstance(silence_id, str) or not silence_id:
            raise BackendError(f"{self.name} created no silence ID", retryable=False)
        return silence_id

    async def expire(self, silence_id: str) -> None:
        try:
            await self._call("DELETE", f"/silence/{quote(silence_id, safe='')}")
        except BackendError:
            # Alertmanager answers 500 "already expired" to a silence that ended meanwhile: what
            # was asked for is true, so read it back before calling it a failure.
            current = await self.state(silence_id)
            if current is not None and current.in_force:
                raise

    async def state(self, silence_id: str) -> SilenceState | None:
        response = await self._call(
            "GET", f"/silence/{quote(silence_id, safe='')}", expect=(200, 404)
        )
        if response.status_code == 404:
            return None
        return silence_state(silence_id, json_object(response, self.name), self.name)

    async def _call(
        self, method: str, path: str, *, expect: tuple[int, ...] = (200,), json_body: Any = None
    ) -> httpx.Response:
        return await request(
            self._client,
            self.name,
            method,
            self._base + path,
            expect=expect,
            json_body=json_body,
            headers=self._config.headers,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def alertmanager_silencer(
    url: str, *, timeout_s: float = 10.0, client: httpx.AsyncClient | None = None
) -> ApiV2Silencer:
    config = SilenceApiConfig("Alertmanager", url.rstrip("/") + "/api/v2", timeout_s=timeout_s)
    return ApiV2Silencer(config, client)


def _rfc3339(silence: SilenceRequest) -> str:
    return silence.starts_at.isoformat().replace("+00:00", "Z")


def silence_state(silence_id: str, data: dict[str, Any], service: str) -> SilenceState:
    """A gettableSilence (`status.state`, `endsAt`) as the watch needs it."""
    status = data.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    if not isinstance(state, str):
        raise BackendError(f"{service} sent a silence without a state", retryable=True)
    try:
        ends_at = parse_timestamp(data.get("endsAt"))
    except ValueError:
        ends_at = None
    return SilenceState(silence_id, state, ends_at)
