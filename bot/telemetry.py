"""The bot's own Prometheus metrics, in a registry per app so that two apps can share a process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(f"queuepilot_{name}", doc, labels, registry=self.registry)

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(f"queuepilot_{name}", doc, labels, registry=self.registry)

        self.notifications = counter(
            "notifications_total",
            "Alert notifications received, by source and outcome (accepted or why rejected).",
            *("source", "outcome"),
        )
        self.notifications_applied = counter(
            "notifications_applied_total",
            "Accepted notifications applied to incidents, by what they changed (stale: nothing).",
            "change",
        )
        self.incidents_opened = counter("incidents_opened_total", "Incidents opened.")
        self.incidents_resolved = counter(
            "incidents_resolved_total", "Incidents resolved, by how (alert, manual).", "resolution"
        )
        self.slack_calls = counter(
            "slack_calls_total",
            "Slack Web API calls, by method and outcome (ok or the Slack error).",
            *("method", "outcome"),
        )
        self.slack_rate_limited = counter(
            "slack_rate_limited_total",
            "Slack answers of 429 (each was waited out for its Retry-After).",
            "method",
        )
        self.slack_undeliverable = counter(
            "slack_undeliverable_total",
            "Messages Slack refused for good (dropped, recorded in the undeliverable stream).",
            "error",
        )
        self.slack_lookups = counter(
            "slack_lookups_total",
            "Posts looked up after an uncertain failure: found (not posted again) or not_found.",
            "outcome",
        )
        self.intake_failures = counter(
            "intake_failures_total",
            "Stream entries whose processing failed and will be retried, or were dead-lettered.",
            "kind",
        )
        self.actions = counter(
            "actions_total",
            "Responder actions (buttons and /queue), by action and outcome (ok or refused).",
            *("action", "outcome"),
        )
        self.status_posts = counter("status_posts_total", "Periodic status replies posted.")
        self.storms = counter(
            "storms_total",
            "Alert storms: new groups arrived faster than a channel posts, and a digest listed "
            "them at once.",
        )
        self.storm_groups = counter(
            "storm_groups_total",
            "New alert groups shown in a storm digest before their own thread.",
        )
        self.leader = gauge(
            "leader",
            "1 on the replica that does the work (applies, sends, runs the periodic jobs), "
            "0 on the others, which only take requests.",
        )
        self.intake_backlog = gauge(
            "intake_backlog",
            "Notifications accepted but not yet applied (read when /metrics is scraped).",
        )
        self.requests_backlog = gauge(
            "requests_backlog",
            "Slack requests acknowledged but not yet performed (read when /metrics is scraped).",
        )
        self.send_queue = gauge(
            "send_queue",
            "Root posts and threads with replies waiting for the channel's sender.",
            "channel",
        )
