"""Queue numbers from the alert notifications themselves: always available, never fresher.

There is nothing to read: each incident shows its alert's numbers
(`bot.domain.incident_fleet.alert_fleet`).
"""

from __future__ import annotations

from datetime import datetime

from bot.domain.fleet import FleetSnapshot


class AlertMetrics:
    """No fleet of its own: each incident shows what its latest notification carried."""

    name = "the alert"
    live = False

    async def read(self, *, now: datetime) -> FleetSnapshot:
        # A type the alert does not name is one it says nothing about, not one that drained
        # (and no alert view decides a drain: only a live reading can).
        return FleetSnapshot(at=now, source="alert", absent_means_empty=False)

    async def aclose(self) -> None:
        return None
