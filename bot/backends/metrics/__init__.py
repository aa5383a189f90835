"""Where the queue numbers come from: one reading of every runner type at a time, so a hundred open
incidents cost one query round."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from bot.domain.queue_cost.jobs import JobsListing
from bot.domain.reading.capacity import FleetHistory
from bot.domain.reading.fleet import FleetSnapshot


class QueueMetrics(Protocol):
    name: str  # how messages name the source: "the alert", "Prometheus", "GitHub", "the HUD"
    live: bool  # False for the alert backend: nothing to read beyond the notifications

    async def read(self, *, now: datetime) -> FleetSnapshot:
        """Every runner type the source knows (`absent_means_empty`: one it lacks has none)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class QueuedJobs(Protocol):
    """Which jobs are queued (GitHub, the HUD), or which workflows' jobs arrived (ARC)."""

    name: str

    async def queued_jobs(self, *, now: datetime) -> JobsListing: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class QueueHistory(Protocol):
    """The fleet's past (Prometheus, the HUD), for the capacity report."""

    name: str

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        """Per runner type, what the backend kept of [start, end]; `BackendError`: nothing."""
        ...


class AlertMetrics:
    """Nothing to read: each incident shows what its latest notification carried."""

    name = "the alert"
    live = False

    async def read(self, *, now: datetime) -> FleetSnapshot:
        # A type the alert does not name is one it says nothing about, not one that drained.
        return FleetSnapshot(at=now, source="alert", absent_means_empty=False)

    async def aclose(self) -> None:
        pass
