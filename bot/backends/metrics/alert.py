"""Queue numbers from the alert notifications themselves: always available, never fresher."""

from __future__ import annotations

from datetime import datetime

from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.incidents import Incident

ALL_TYPES = ""  # the alert's headline numbers when it names no runner type


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


def alert_fleet(incident: Incident, *, now: datetime, note: str = "") -> FleetSnapshot:
    """Queued jobs and the longest wait per runner type: all an alert carries."""
    types = {
        name: RunnerTypeMetrics.from_alert(queue) for name, queue in incident.runner_types.items()
    }
    numbers = incident.numbers
    if not types and (numbers.max_queue_size is not None or numbers.max_queue_time_mins):
        types[ALL_TYPES] = RunnerTypeMetrics(
            queued=numbers.max_queue_size, longest_wait_mins=numbers.max_queue_time_mins
        )
    return FleetSnapshot(at=now, source="alert", runner_types=types, note=note)
