"""What an incident's queue cost its jobs so far, by runner type, from the source that knows it
best: GitHub's workflow_job deliveries, else ARC's startup histogram through Prometheus, else the
HUD's queued jobs followed; none where none is there (the alert's numbers count the jobs still
queued, not what the started ones waited)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from redis.exceptions import RedisError

from bot.backends.http import BackendError
from bot.backends.metrics import QueueMetrics
from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.config import Settings
from bot.domain.incident.incidents import Incident, thresholds
from bot.domain.queue_cost.cost import Waited, waited_of_jobs, waited_of_left
from bot.domain.queue_cost.workflow_jobs import is_job_kind
from bot.domain.reading.fleet import of_type
from bot.storage.listed_jobs import ListedJobs
from bot.storage.workflow_jobs import WorkflowJobs

log = logging.getLogger(__name__)

EARLIEST = timedelta(hours=1)

Costed = dict[str, Waited]  # by runner type


class CostReader:
    def __init__(
        self,
        config: Settings,
        metrics: QueueMetrics,
        jobs: WorkflowJobs,
        followed: ListedJobs | None = None,
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._prometheus = metrics if isinstance(metrics, PrometheusMetrics) else None
        self._jobs = jobs if config.github_webhook_secret is not None else None
        self._followed = followed  # the HUD's listings, where it lists the jobs

    @property
    def unknown(self) -> str:
        """Why no incident's cost is known here, and what would tell it ("" when it is)."""
        if self._jobs is not None or self._prometheus is not None or self._followed is not None:
            return ""
        return (
            f"{self._metrics.name} does not say what each job waited: GitHub's workflow_job "
            "deliveries (GITHUB_WEBHOOK_SECRET), ARC's metrics through Prometheus or the HUD's "
            "queued jobs (METRICS_BACKEND=hud) do"
        )

    async def costs(self, incidents: Sequence[Incident], now: datetime) -> dict[str, Costed]:
        """Per incident (by ID), what the jobs of each runner type it shows that got a runner
        since its alert waited; absent where no source tells it or it could not be read (the last
        stays). Each source is read once for all of them, from the earliest alert on, and each
        incident takes its own window: one tick's due incidents cost one read of the record."""
        # From the alert's start, but not from a day long gone: an alert that fired long before
        # queuepilot heard it (or a replayed one) is costed from an hour before it opened.
        windows = {
            i.id: (
                sorted(i.shown_types),
                max(i.started_at, i.opened_at - EARLIEST),
                self._threshold(i),
            )
            for i in incidents
            if i.shown_types
        }
        if not windows or self.unknown:
            return {}
        earliest = min(since for _, since, _ in windows.values())
        try:
            heard = await self._jobs.heard(now.timestamp()) if self._jobs is not None else {}
            # A workflow_job heard in the last hour: a record nobody writes (its webhook not
            # published yet) tells no cost, where ARC's may.
            if self._jobs is not None and any(is_job_kind(kind) for kind in heard):
                jobs = await self._jobs_since(self._jobs, earliest, now)
                return {
                    key: {t: waited_of_jobs(jobs, t, since, now, threshold) for t in types}
                    for key, (types, since, threshold) in windows.items()
                }
            if self._prometheus is None and self._followed is None:
                return {}  # deliveries are expected and none came: nothing tells it yet
            left = await self._followed.left(earliest, now) if self._followed is not None else []
            histograms: dict[tuple[datetime, float], dict[str, Waited]] = {}
            found = {}
            for key, (types, since, threshold) in windows.items():
                window = (since, threshold)
                if self._prometheus is not None and window not in histograms:
                    histograms[window] = await self._prometheus.waited(
                        since=since, until=now, threshold_mins=threshold
                    )
                # ARC's histogram for the types Prometheus has one for; the HUD's followed jobs
                # for the rest (PyTorch's EC2 types beside its ARC ones).
                histogram = histograms.get(window, {})
                found[key] = {t: w for t in types if (w := of_type(histogram, t)) is not None}
                if self._followed is not None:
                    over = self._config.hud_jobs_over_minutes
                    found[key] |= {
                        t: waited_of_left(left, t, since, now, threshold, over)
                        for t in types
                        if t not in found[key]
                    }
            return found
        except (BackendError, RedisError) as exc:
            log.warning("cost: %s", exc)
            return {}

    async def _jobs_since(
        self, record: WorkflowJobs, since: datetime, now: datetime
    ) -> list[dict[str, Any]]:
        """The jobs still to finish and those finished since, each once (one that finished between
        the two reads is taken finished), of GITHUB_REPOS where it names them."""
        live = await record.live()
        done = await record.done(since.timestamp(), now.timestamp() + 1)
        repos = {repo.casefold() for repo in self._config.github_repos}
        by_id = {job.get("id"): job for job in (*live, *done)}
        return [
            job
            for job in by_id.values()
            if not repos or str(job.get("repository", "")).casefold() in repos
        ]

    def _threshold(self, incident: Incident) -> float:
        """The alert's wait threshold, else the one the early warning is told; else a job
        counts as delayed from its first minute."""
        said = thresholds(incident)[1]
        return said if said is not None else (self._config.early_warning_wait_minutes or 1.0)
