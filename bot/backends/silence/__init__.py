"""Silences: a real one in Alertmanager or Grafana (both speak Alertmanager's API v2), created,
read back and expired. Every implementation raises `BackendError` only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.domain.alerts import Matcher


@dataclass(frozen=True)
class SilenceRequest:
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str


@dataclass(frozen=True)
class SilenceState:
    """A silence as the backend reports it now (`state`: active, pending or expired)."""

    silence_id: str
    state: str
    ends_at: datetime | None = None

    @property
    def in_force(self) -> bool:
        return self.state in ("active", "pending")


class Silencer(Protocol):
    name: str  # how messages name the backend: "Alertmanager", "Grafana"

    async def create(self, request: SilenceRequest) -> str: ...

    async def expire(self, silence_id: str) -> None:
        """End the silence now; a silence already gone counts as expired."""

    async def state(self, silence_id: str) -> SilenceState | None:
        """The silence as it stands, or None when the backend no longer knows it."""
