"""Queue numbers from the alert notifications themselves: always available, never fresher."""

from __future__ import annotations

from datetime import datetime

from bot.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.incidents import Incident, Snapshot

ALL_TYPES = ""  # the alert's headline numbers when it names no runner type


class AlertMetrics:
    """The numbers of the latest notification: Grafana's values or Alertmanager's annotations."""

    name = "the alert"

    async def snapshot(self, incident: Incident, *, now: datetime) -> Snapshot:
        return incident.snapshot(now)

    async def fleet(self, incident: Incident, *, now: datetime) -> FleetSnapshot:
        """Queued jobs and the longest wait per runner type: all an alert carries."""
        types = {
            name: RunnerTypeMetrics.from_alert(queue)
            for name, queue in incident.runner_types.items()
        }
        numbers = incident.numbers
        if not types and (numbers.max_queue_size is not None or numbers.max_queue_time_mins):
            types[ALL_TYPES] = RunnerTypeMetrics(
                queued=numbers.max_queue_size, longest_wait_mins=numbers.max_queue_time_mins
            )
        return FleetSnapshot(at=now, source="alert", runner_types=types)
