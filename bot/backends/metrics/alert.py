"""Queue numbers from the alert notifications themselves: each incident shows what its latest
notification carried (`bot.domain.incident_fleet.alert_fleet`); there is nothing to read."""

from __future__ import annotations

from datetime import datetime

from bot.domain.fleet import FleetSnapshot


class AlertMetrics:
    name = "the alert"
    live = False

    async def read(self, *, now: datetime) -> FleetSnapshot:
        # A type the alert does not name is one it says nothing about, not one that drained.
        return FleetSnapshot(at=now, source="alert", absent_means_empty=False)

    async def aclose(self) -> None:
        return None
