"""Where the queue numbers come from: one reading of every runner type at a time.

The leader asks once per tick (`bot.fleet.readings`) and every open incident takes its runner types
from that one answer, so a hundred incidents cost one query round. The `alert` backend has no fleet
of its own: incidents keep what their notifications carried.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from bot.domain.capacity import FleetHistory
from bot.domain.fleet import FleetSnapshot
from bot.domain.jobs import JobsListing


class QueueMetrics(Protocol):
    name: str  # how messages name the source: "the alert", "Prometheus", "GitHub", "the HUD"
    live: bool  # False for the alert backend: nothing to read beyond the notifications

    async def read(self, *, now: datetime) -> FleetSnapshot:
        """Every runner type the source knows about, or `BackendError`. The snapshot's
        `absent_means_empty` says whether a type it lacks has nothing queued (a source that
        lists every type that queues) or is unknown (a source whose series can vanish)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class QueuedJobs(Protocol):
    """A backend that can say which jobs are queued (GitHub, the HUD), or at least which
    workflows' jobs arrived (ARC's counters, when they carry the workflow)."""

    name: str

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        """The queued jobs, fleet-wide; ghosts left out and counted; a note when the source
        cannot see jobs or workflows."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class QueueHistory(Protocol):
    """A backend that keeps the fleet's past (Prometheus, the HUD): the capacity report's."""

    name: str

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        """Per runner type, what the backend kept of [start, end], with a note on what it could
        not read; `BackendError` when it could read nothing."""
        ...
