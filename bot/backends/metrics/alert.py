"""Queue numbers from the alert notifications themselves: always available, never fresher."""

from __future__ import annotations

from datetime import datetime

from bot.incidents import Incident, Snapshot


class AlertMetrics:
    """The numbers of the latest notification: Grafana's values or Alertmanager's annotations."""

    async def snapshot(self, incident: Incident, *, now: datetime) -> Snapshot:
        return incident.snapshot(now)
