"""Where the queue numbers of a status update come from.

Each implementation answers one question: what does the queue of this incident look like now?
The `alert` backend knows only what the notifications carried; others query a metrics system.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bot.incidents import Incident, Snapshot


class QueueMetrics(Protocol):
    async def snapshot(self, incident: Incident, *, now: datetime) -> Snapshot:
        """The incident's queue now; raises `BackendError` when the source cannot say."""
        ...
