"""The bot's own Prometheus metrics, in a registry per app so that two apps can share a process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.notifications = Counter(
            "queuepilot_notifications_total",
            "Alert notifications received, by source and outcome (accepted or why rejected).",
            ["source", "outcome"],
            registry=self.registry,
        )
        self.notifications_applied = Counter(
            "queuepilot_notifications_applied_total",
            "Accepted notifications applied to incidents, by what they changed (stale: nothing).",
            ["change"],
            registry=self.registry,
        )
        self.incidents_opened = Counter(
            "queuepilot_incidents_opened_total", "Incidents opened.", registry=self.registry
        )
        self.incidents_resolved = Counter(
            "queuepilot_incidents_resolved_total",
            "Incidents resolved, by how (alert, manual).",
            ["resolution"],
            registry=self.registry,
        )
        self.slack_calls = Counter(
            "queuepilot_slack_calls_total",
            "Slack Web API calls, by method and outcome (ok or the Slack error).",
            ["method", "outcome"],
            registry=self.registry,
        )
        self.slack_rate_limited = Counter(
            "queuepilot_slack_rate_limited_total",
            "Slack answers of 429 (each was waited out for its Retry-After).",
            ["method"],
            registry=self.registry,
        )
        self.slack_undeliverable = Counter(
            "queuepilot_slack_undeliverable_total",
            "Messages Slack refused for good (dropped, recorded in the undeliverable stream).",
            ["error"],
            registry=self.registry,
        )
        self.slack_lookups = Counter(
            "queuepilot_slack_lookups_total",
            "Posts looked up after an uncertain failure: found (not posted again) or not_found.",
            ["outcome"],
            registry=self.registry,
        )
        self.intake_failures = Counter(
            "queuepilot_intake_failures_total",
            "Stream entries whose processing failed and will be retried, or were dead-lettered.",
            ["kind"],
            registry=self.registry,
        )
        self.actions = Counter(
            "queuepilot_actions_total",
            "Responder actions (buttons and /queue), by action and outcome (ok or refused).",
            ["action", "outcome"],
            registry=self.registry,
        )
        self.status_posts = Counter(
            "queuepilot_status_posts_total",
            "Periodic status replies posted.",
            registry=self.registry,
        )
        self.storms = Counter(
            "queuepilot_storms_total",
            "Alert storms: new groups arrived faster than a channel posts, and a digest listed "
            "them at once.",
            registry=self.registry,
        )
        self.storm_groups = Counter(
            "queuepilot_storm_groups_total",
            "New alert groups shown in a storm digest before their own thread.",
            registry=self.registry,
        )
        self.leader = Gauge(
            "queuepilot_leader",
            "1 on the replica that does the work (applies, sends, runs the periodic jobs), "
            "0 on the others, which only take requests.",
            registry=self.registry,
        )
        self.intake_backlog = Gauge(
            "queuepilot_intake_backlog",
            "Notifications accepted but not yet applied (read when /metrics is scraped).",
            registry=self.registry,
        )
        self.requests_backlog = Gauge(
            "queuepilot_requests_backlog",
            "Slack requests acknowledged but not yet performed (read when /metrics is scraped).",
            registry=self.registry,
        )
        self.send_queue = Gauge(
            "queuepilot_send_queue",
            "Root posts and threads with replies waiting for the channel's sender.",
            ["channel"],
            registry=self.registry,
        )
