"""The jobs behind the queue, listed from the source that can, their arrivals counted (so
"arrivals doubled since the same hour yesterday" can be said): what `/queue jobs` and
diagnostics show."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from bot.backends.http import within
from bot.backends.metrics import QueuedJobs
from bot.domain.jobs import JobsView, jobs_view
from bot.storage.job_arrivals import JobArrivals


@dataclass(eq=False)
class JobsWatch:
    source: QueuedJobs
    arrivals: JobArrivals
    _: KW_ONLY
    timeout_s: float

    async def view(self, *, now: datetime) -> JobsView:
        """Raises `BackendError` when the source cannot say."""
        source = self.source
        listing = await within(source.queued_jobs(now=now), self.timeout_s, source.name)
        if listing.arrivals is not None:  # a source that counts its own (ARC's counters)
            arrivals = listing.arrivals
        else:
            arrivals = await self.arrivals.record(listing.jobs, now=now, finished=listing.finished)
        return jobs_view(listing, arrivals, source=source.name, at=now)
