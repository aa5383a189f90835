"""Where the queue numbers come from: one reading of every runner type at a time.

Each implementation answers one question, fleet-wide: what do the queues look like now? One
replica at a time asks it per tick (`bot.fleet.readings`), and every open incident takes its
runner types from that one answer (`bot.domain.incident_fleet`), so a hundred incidents cost one
query round. The `alert` backend has no fleet of its own: incidents keep what their
notifications carried.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from bot.domain.capacity import FleetHistory
from bot.domain.fleet import FleetSnapshot
from bot.domain.jobs import JobsListing


class QueueMetrics(Protocol):
    # How messages name the source: "the alert", "Prometheus", "GitHub", "the HUD".
    name: str
    # False for the alert backend: there is nothing to read beyond the notifications.
    live: bool

    async def read(self, *, now: datetime) -> FleetSnapshot:
        """Every runner type the source knows about; raises `BackendError` when it cannot say.

        The snapshot's `absent_means_empty` says what a type it lacks means: nothing queued
        (a source that lists every type that queues, and listed it all this time) or unknown
        (a source whose series can vanish). The drain rule trusts absence only when it is set.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class QueuedJobs(Protocol):
    """A backend that can say which jobs are queued (GitHub, the HUD), or at least which
    workflows' jobs arrived (ARC's counters, when they carry the workflow)."""

    name: str

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        """The queued jobs, fleet-wide; ghosts left out and counted; a note when the source
        cannot see jobs or workflows. Raises `BackendError` when it cannot say."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class QueueHistory(Protocol):
    """A backend that keeps the fleet's past (Prometheus, the HUD): the capacity report's
    window."""

    name: str

    async def history(self, *, start: datetime, end: datetime) -> FleetHistory:
        """Per runner type, what the backend kept of [start, end] (its queue, wait, level and
        maximum a step apart, its queue time's quantiles), with a note on what it could not
        read; raises `BackendError` when it could read nothing."""
        ...
