"""The jobs behind the queue, the one way to them: listed from the source that can, their arrivals
counted (`bot.storage.job_arrivals`, so "arrivals doubled since the same hour yesterday" can be
said), and the view `/queue jobs` and diagnostics show.
"""

from __future__ import annotations

from datetime import datetime

from bot.backends.errors import within
from bot.backends.metrics import QueuedJobs
from bot.domain.jobs import JobsView, jobs_view
from bot.storage.job_arrivals import JobArrivals


class JobsWatch:
    def __init__(self, source: QueuedJobs, arrivals: JobArrivals, *, timeout_s: float) -> None:
        self._source = source
        self._arrivals = arrivals
        self._timeout_s = timeout_s

    @property
    def name(self) -> str:
        return self._source.name

    def lists(self, backend: object) -> bool:
        """Whether the jobs come from `backend` itself (whose waits are then the jobs')."""
        return self._source is backend

    async def aclose(self, *, unless: object = None) -> None:
        """Release the source's connections, unless it is `unless` (closed by its owner)."""
        if self._source is not unless:
            await self._source.aclose()

    async def view(self, *, now: datetime) -> JobsView:
        """Raises `BackendError` when the source cannot say."""
        source = self._source
        listing = await within(source.queued_jobs(now=now), self._timeout_s, source.name)
        if listing.arrivals is not None:  # a source that counts its own (ARC's counters)
            arrivals = listing.arrivals
        else:
            arrivals = await self._arrivals.record(listing.jobs, now=now, finished=listing.finished)
        return jobs_view(listing, arrivals, source=source.name, at=now)
