"""How pytorch/alerting-infra names an alert, so that queuepilot finds the issue it opened: its
collector titles it by the first alert's `rulename`, else `alertname`, else the group's
(`extractTitle`), and keys it by the SHA-256 of
`account_id=<orgId>|alarm_id=<first fingerprint>|source=grafana|title=<lower-case title>`, keys
sorted, empty ones left out (src/fingerprint.ts), carried in the issue's body."""

from __future__ import annotations

import hashlib

from bot.domain.alerts import Notification

SOURCE = "grafana"  # every webhook its collector takes is read by its Grafana transformer


def pipeline_rule(notification: Notification) -> str:
    first = notification.alerts[0].labels if notification.alerts else {}
    named = first.get("rulename") or first.get("alertname")
    return (named or notification.group_labels.get("alertname") or "").strip()


def pipeline_key(notification: Notification, rule: str) -> str:
    """alerting-infra's fingerprint of the alert; "" without a title (it refuses such an alert)."""
    if not rule:
        return ""
    alarm = notification.alerts[0].fingerprint if notification.alerts else ""
    inputs = {"source": SOURCE, "title": rule.lower(), "account_id": notification.org_id}
    inputs["alarm_id"] = alarm
    canonical = "|".join(f"{key}={inputs[key]}" for key in sorted(inputs) if inputs[key])
    return hashlib.sha256(canonical.encode()).hexdigest()
