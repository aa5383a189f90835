"""Where the queue numbers of a status update come from.

Each implementation answers one question: what does the queue of this incident look like now?
The `alert` backend knows only what the notifications carried; others query a metrics system.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bot.fleet import FleetSnapshot
from bot.incidents import Incident, Snapshot


class QueueMetrics(Protocol):
    # How reports name the source: "the alert", "Prometheus", ...
    name: str

    async def snapshot(self, incident: Incident, *, now: datetime) -> Snapshot:
        """The incident's queue now; raises `BackendError` when the source cannot say."""
        ...

    async def fleet(self, incident: Incident, *, now: datetime) -> FleetSnapshot:
        """Everything the source knows about the runner types, for diagnostics and scaling."""
        ...
