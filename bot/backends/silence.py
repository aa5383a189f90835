"""Silences in Alertmanager or Grafana (both speak Alertmanager's API v2): created, read back and
expired, failing with `BackendError` only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from bot.backends.http import BackendError, Counted, HttpBackend, bearer, json_object, uncounted
from bot.domain.alerting.alerts import Matcher, time_of
from bot.domain.incident.silence_seen import SilenceState


@dataclass(frozen=True)
class SilenceRequest:
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str


GRAFANA_PREFIX = "/api/alertmanager/grafana/api/v2"


class Silencer(HttpBackend):
    """Alertmanager's API v2, which Grafana serves for its own Alertmanager (its service account
    needs `alert.silences:create`, `:write` and `:read`: the Editor role)."""

    # `created_status`: Alertmanager answers 200 to a new silence; Grafana 202.
    def __init__(
        self,
        name: str,
        api_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        created_status: int = 200,
        timeout_s: float = 10.0,
        client: httpx.AsyncClient | None = None,
        counted: Counted = uncounted,
    ) -> None:
        super().__init__(client, None, timeout_s, counted=counted)
        self.name = self.service = name  # how messages name it: "Alertmanager", "Grafana"
        self._base = api_url.rstrip("/")
        self._headers = headers or {}
        self._created = created_status

    async def create(self, silence: SilenceRequest) -> str:
        body = {
            "matchers": [
                {"name": m.name, "value": m.value, "isRegex": m.is_regex, "isEqual": m.is_equal}
                for m in silence.matchers
            ],
            "startsAt": silence.starts_at.isoformat().replace("+00:00", "Z"),
            "endsAt": silence.ends_at.isoformat().replace("+00:00", "Z"),
            "createdBy": silence.created_by,
            "comment": silence.comment,
        }
        response = await self.call("POST", "/silences", body, expect=(self._created, 200))
        silence_id = json_object(response, self.name).get("silenceID")
        if not isinstance(silence_id, str) or not silence_id:
            raise BackendError(f"{self.name} created no silence ID", retryable=False)
        return silence_id

    async def expire(self, silence_id: str) -> None:
        """End the silence now; a silence already gone counts as expired."""
        try:
            await self.call("DELETE", f"/silence/{quote(silence_id, safe='')}")
        except BackendError:
            # Alertmanager answers 500 "already expired" to a silence that ended meanwhile: what
            # was asked for is true, so read it back before calling it a failure.
            current = await self.state(silence_id)
            if current is not None and current.in_force:
                raise

    async def state(self, silence_id: str) -> SilenceState | None:
        """The silence as it stands, or None when the backend no longer knows it."""
        path = f"/silence/{quote(silence_id, safe='')}"
        response = await self.call("GET", path, expect=(200, 404))
        if response.status_code == 404:
            return None
        return silence_state(silence_id, json_object(response, self.name), self.name)

    async def call(
        self, method: str, path: str, body: Any = None, *, expect: tuple[int, ...] = (200,)
    ) -> httpx.Response:
        url = self._base + path
        return await self._request(
            method, url, expect=expect, json_body=body, headers=self._headers
        )


def alertmanager_silencer(url: str, **options: Any) -> Silencer:
    return Silencer("Alertmanager", url.rstrip("/") + "/api/v2", **options)


def grafana_silencer(url: str, token: str, **options: Any) -> Silencer:
    api = url.rstrip("/") + GRAFANA_PREFIX
    return Silencer("Grafana", api, headers=bearer(token), created_status=202, **options)


def silence_state(silence_id: str, data: dict[str, Any], service: str) -> SilenceState:
    """A gettableSilence (`status.state`, its times and matchers) as the watch and the read-back
    after a silence is made need it; a matcher of another shape is left out."""
    status = data.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    if not isinstance(state, str):
        raise BackendError(f"{service} sent a silence without a state", retryable=True)
    listed = data.get("matchers")
    matchers = tuple(
        Matcher(m["name"], m["value"], m.get("isEqual") is not False, m["isRegex"] is True)
        for m in (listed if isinstance(listed, list) else ())
        if isinstance(m, dict) and isinstance(m.get("isRegex"), bool)
        and isinstance(m.get("name"), str) and isinstance(m.get("value"), str)
    )  # fmt: skip
    ends, starts = time_of(data.get("endsAt")), time_of(data.get("startsAt"))
    return SilenceState(silence_id, state, ends, starts, matchers)
