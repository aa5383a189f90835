"""A notification reduced to what an incident needs (`delivery_of`), with each alert's identity,
which tells a stale firing from a real re-fire. The consumer works it out once per distinct body;
a large body is stored as this record instead, worked out by the webhook.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.domain.alert_facts import facts_of
from bot.domain.alerts import Alert, AlertFacts, Notification, Source
from bot.domain.runner_names import RunnerNames


class Delivery(BaseModel):
    model_config = ConfigDict(frozen=True)

    source: Source
    group_key: str
    status: Literal["firing", "resolved"]
    is_test: bool = False
    facts: AlertFacts
    # Earliest startsAt of the firing alerts: when the queue started to hurt.
    started_at: datetime | None = None
    # Alert instances ("<fingerprint>@<startsAt>") by status in this notification.
    firing: tuple[str, ...] = ()
    resolved: tuple[str, ...] = ()

    @property
    def group_hash(self) -> str:
        return group_hash(self.source, self.group_key)


def group_hash(source: str, group_key: str) -> str:
    """A fixed-length key for the alert group; group keys can be long and hold anything."""
    return hashlib.sha256(f"{source}\0{group_key}".encode()).hexdigest()[:24]


def instance_of(alert: Alert) -> str:
    """One firing of one alert: a re-fire gets a new startsAt, a lagging HA peer or a retry
    repeats the old one."""
    fingerprint = alert.fingerprint or _labels_fingerprint(alert.labels)
    started = alert.starts_at.isoformat() if alert.starts_at else ""
    return f"{fingerprint[:64]}@{started}"


def _labels_fingerprint(labels: dict[str, str]) -> str:
    raw = "\0".join(f"{k}\0{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def named(delivery: Delivery, names: RunnerNames) -> Delivery:
    """The delivery with its runner types as the readings name them (an alert on ARC's metrics
    names a scale set)."""
    types = delivery.facts.runner_types
    renamed = names.renamed(types)
    if list(renamed) == list(types):
        return delivery
    return delivery.model_copy(update={"facts": replace(delivery.facts, runner_types=renamed)})


def delivery_of(notification: Notification) -> Delivery:
    starts = [a.starts_at for a in notification.firing if a.starts_at is not None]
    return Delivery(
        source=notification.source,
        group_key=notification.group_key,
        status=notification.status,
        is_test=notification.is_test,
        facts=facts_of(notification),
        started_at=min(starts) if starts else None,
        firing=tuple(instance_of(a) for a in notification.alerts if a.status == "firing"),
        resolved=tuple(instance_of(a) for a in notification.alerts if a.status == "resolved"),
    )
