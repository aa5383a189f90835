"""The bot's own Prometheus metrics, in a registry per app so that two apps can share a process."""

from __future__ import annotations

import functools
import platform
import re
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, PlatformCollector, ProcessCollector

HELP = {
    "notifications_total": "Alert notifications received, by source and outcome (accepted or why "
    "rejected).",
    "notifications_applied_total": "Accepted notifications applied to incidents, by what they "
    "changed (stale: nothing).",
    "incidents_opened_total": "Incidents opened.",
    "queue_wait_job_seconds_total": "Seconds the jobs of open incidents' runner types waited for "
    "a runner, summed over the jobs (job-seconds), as each incident's cost is read.",
    "incident_jobs_delayed_total": "Jobs of open incidents' runner types that waited past the "
    "alert's wait threshold, as each incident's cost is read.",
    "incidents_resolved_total": "Incidents resolved, by how (alert, manual).",
    "slack_calls_total": "Slack Web API calls, by method and outcome (ok or the Slack error).",
    "slack_rate_limited_total": "Slack answers of 429 (each was waited out for its Retry-After).",
    "slack_undeliverable_total": "Messages Slack refused for good (dropped, recorded in the "
    "undeliverable stream).",
    "slack_lookups_total": "Posts looked up after an uncertain failure: found (not posted again) "
    "or not_found.",
    "intake_failures_total": "Stream entries whose processing failed and will be retried, or were "
    "dead-lettered.",
    "actions_total": "Responder actions (buttons and /queue), by action and outcome (ok or "
    "refused).",
    "status_posts_total": "Periodic status replies posted.",
    "storms_total": "Alert storms: new groups arrived faster than a channel posts, and a digest "
    "listed them at once.",
    "storm_groups_total": "New alert groups shown in a storm digest before their own thread.",
    "leader": "1 on the replica that does the work (applies, sends, runs the periodic jobs), 0 on "
    "the others, which only take requests.",
    "intake_backlog": "Notifications accepted but not yet applied (read when /metrics is scraped).",
    "requests_backlog": "Slack requests acknowledged but not yet performed (read when /metrics is "
    "scraped).",
    "send_queue": "Root posts and threads with replies waiting for the channel's sender.",
    "probe_ok": "1 while a probe of `queuepilot check` (redis, prometheus, kubernetes, …) finds "
    "nothing failing, 0 while it fails; exported by the leader, which runs them.",
    "state_lost_total": "Times Redis was found to have lost queuepilot's state (its marker gone): "
    "a failover to an empty replica, a restart without persistence, a FLUSHALL.",
    "state_lost_timestamp_seconds": "When Redis was last found to have lost queuepilot's state "
    "(Unix time; 0: not since the state began); exported by the leader.",
    "build_info": "1, labelled with the running queuepilot's version and Python's.",
    "backend_calls_total": "Calls to the backends (metrics, silences, scalers, GitHub, the "
    "Kubernetes and AWS APIs), by backend and outcome (ok, refused, rate_limited, server_error, "
    "timeout, unreachable, error).",
}
# Slack's answers when the app cannot post in a channel at all: the commonest drops.
CHANNEL_REFUSALS = ("not_in_channel", "channel_not_found", "is_archived")


@functools.cache
def queuepilot_version() -> str:
    """A development version with its commit (`0.27.0.dev0+g1a2b3c4d5e6f`), so a build from main
    is never taken for the release it leads to."""
    try:
        found = version("queuepilot")
    except PackageNotFoundError:  # a checkout run without installing it
        return "unknown (not installed)"
    if ".dev" not in found:
        return found
    # A built package's commit, which setup.py records in it (the image's build and `pip install
    # .` alike), else an editable install's checkout's.
    built = Path(__file__).with_name("_commit.txt")
    commit = (_commit(built.read_text()) if built.exists() else None) or _checkout_commit()
    return f"{found}+g{commit[:12]}" if commit else f"{found}+unknown"


def _commit(text: str) -> str | None:
    text = text.strip().lower()
    return text if re.fullmatch(r"[0-9a-f]{7,64}", text) else None


def _checkout_commit() -> str | None:
    """An editable install's checkout, asked now: its HEAD moves on after installing, and
    setup.py records no commit for it."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    command = ["git", "-C", str(root), "rev-parse", "HEAD"]
    try:
        found = subprocess.run(command, capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return _commit(found.stdout)


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)

        def counter(name: str, *labels: str) -> Counter:
            return Counter(f"queuepilot_{name}", HELP[name], labels, registry=self.registry)

        def gauge(name: str, *labels: str) -> Gauge:
            return Gauge(f"queuepilot_{name}", HELP[name], labels, registry=self.registry)

        self.notifications = counter("notifications_total", "source", "outcome")
        self.notifications_applied = counter("notifications_applied_total", "change")
        self.incidents_opened = counter("incidents_opened_total")
        self.queue_wait_job_seconds = counter("queue_wait_job_seconds_total", "runner_type")
        self.incident_jobs_delayed = counter("incident_jobs_delayed_total", "runner_type")
        self.incidents_resolved = counter("incidents_resolved_total", "resolution")
        self.slack_calls = counter("slack_calls_total", "method", "outcome")
        self.slack_rate_limited = counter("slack_rate_limited_total", "method")
        self.slack_undeliverable = counter("slack_undeliverable_total", "error")
        # At 0 from the start, so `increase()` counts the first drop: a labelled series
        # otherwise appears at its first increment, at 1, and shows no growth.
        for error in CHANNEL_REFUSALS:
            self.slack_undeliverable.labels(error)
        self.slack_lookups = counter("slack_lookups_total", "outcome")
        self.intake_failures = counter("intake_failures_total", "kind")
        self.actions = counter("actions_total", "action", "outcome")
        self.status_posts = counter("status_posts_total")
        self.storms = counter("storms_total")
        self.storm_groups = counter("storm_groups_total")
        self.leader = gauge("leader")
        self.intake_backlog = gauge("intake_backlog")
        self.requests_backlog = gauge("requests_backlog")
        self.send_queue = gauge("send_queue", "channel")
        self.probe_ok = gauge("probe_ok", "probe")
        self.state_lost = counter("state_lost_total")
        self.state_lost_at = gauge("state_lost_timestamp_seconds")
        build = gauge("build_info", "version", "python")
        build.labels(queuepilot_version(), platform.python_version()).set(1)
        self.backend_calls = counter("backend_calls_total", "backend", "outcome")
        # process_* (memory, CPU, open files, start time) and python_info.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    def backend_called(self, service: str, outcome: str) -> None:
        """The backends' `counted`: a call by the service its errors name, as a label ("The
        Kubernetes API" -> kubernetes_api)."""
        name = re.sub(r"^the\s+", "", service.strip().lower())
        label = re.sub(r"[^a-z0-9]+", "_", name).strip("_") or "unknown"
        self.backend_calls.labels(label, outcome).inc()
