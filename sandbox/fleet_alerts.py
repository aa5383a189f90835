"""The simulated fleet's alerting: a Grafana alert rule, its silences, and its webhook payloads.

`QueueRule` behaves like a Grafana-managed rule on the fleet's queue: it is pending while the
condition holds, fires once it held for `pending_min`, re-notifies every `repeat_min` while firing
(Grafana's repeat interval), and resolves when the recovery condition holds (Grafana's recovery
threshold, so a queue hovering at the threshold does not flap). Notifications go out as Grafana's
webhook contact point sends them: the payload of `alerts/queue-alert-firing.json`, with this
fleet's numbers, times and links.

`Silences` is the Alertmanager API v2 model of silences (matchers, active/expired/pending), and
the rule honours them: a silenced alert sends nothing, firing or resolved, as Grafana does.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from sandbox.silence_api import rfc3339, silence_problem

ALERTS = Path(__file__).resolve().parent / "alerts"
RULE_UID = "queuepilot-demo-queue"
# A team's own rule over its runner types (the GPU team's, in the demo): its alerts carry the
# team and the runner type, which `SLACK_ROUTES` sends to the team's channel.
GPU_RULE_LABELS = {
    "__alert_rule_uid__": "queuepilot-demo-gpu-queue",
    "alertname": "GPU jobs queueing",
    "grafana_folder": "GPU Infra",
    "type": "alerting-infra",
    "team": "gpu",
    "runner_type": "linux.g5.4xlarge.nvidia.gpu",
}
# What each rule says of itself, by its UID; a rule not named here says the fixture's (the main
# rule, over the regular runner types).
RULE_ANNOTATIONS = {
    GPU_RULE_LABELS["__alert_rule_uid__"]: {
        "Teams": GPU_RULE_LABELS["team"],
        "summary": "GPU jobs are queueing",
        "description": (
            f"Triggers when jobs wait too long for {GPU_RULE_LABELS['runner_type']} runners "
            "or many of them queue at once."
        ),
    },
}
GRAFANA_ZERO_TIME = "0001-01-01T00:00:00Z"


@dataclass(frozen=True)
class RuleConfig:
    """Fires when any type has `fire_queued` jobs waiting or one waited `fire_wait_min`; recovers
    when none waits more than `recover_queued` jobs or `recover_wait_min` minutes. Its minutes
    are fleet minutes."""

    fire_queued: int = 10
    fire_wait_min: float = 5.0
    recover_queued: int = 2
    recover_wait_min: float = 2.0
    pending_min: float = 2.0
    repeat_min: float = 10.0


@dataclass
class Notification:
    """One webhook the rule wants sent; `status` is "firing" or "resolved"."""

    status: str
    queued: int
    wait_min: float
    starts_at: datetime
    ends_at: datetime | None = None


class QueueRule:
    """The rule's state machine, fed (simulated minute, wall-clock time, worst queue, longest
    wait in fleet minutes). Times in payloads and silences are wall-clock, and the payload's
    numbers real minutes (`grafana_payload`): the bot and its responders live in real time, only
    the fleet's own clock is compressed."""

    def __init__(
        self, config: RuleConfig = RuleConfig(), *, labels: dict[str, str] | None = None
    ) -> None:
        self.config = config
        self.state = "normal"  # normal -> pending -> firing -> normal
        self._since_min = 0.0
        self._last_sent_min = 0.0
        self._starts_at: datetime | None = None
        self.labels = labels or {
            "__alert_rule_uid__": RULE_UID,
            "alertname": "Jobs queueing in autoscaled machines",
            "grafana_folder": "Dev Infra",
            "type": "alerting-infra",
        }

    def evaluate(
        self, minute: float, wall: datetime, queued: int, wait_min: float, *, silenced: bool
    ) -> Notification | None:
        c = self.config
        breached = queued >= c.fire_queued or wait_min >= c.fire_wait_min
        recovered = queued <= c.recover_queued and wait_min <= c.recover_wait_min
        if self.state == "normal" and breached:
            self.state, self._since_min = "pending", minute
        if self.state == "pending":
            if not breached:
                self.state = "normal"
            elif minute - self._since_min >= c.pending_min:
                self.state, self._starts_at = "firing", wall
                return self._send(minute, Notification("firing", queued, wait_min, wall), silenced)
            return None
        if self.state != "firing":
            return None
        assert self._starts_at is not None
        if recovered:
            self.state = "normal"
            note = Notification("resolved", queued, wait_min, self._starts_at, ends_at=wall)
            return None if silenced else note
        if minute - self._last_sent_min >= c.repeat_min:
            return self._send(
                minute, Notification("firing", queued, wait_min, self._starts_at), silenced
            )
        return None

    def _send(self, minute: float, note: Notification, silenced: bool) -> Notification | None:
        if silenced:
            return None
        self._last_sent_min = minute
        return note


# -- silences (Alertmanager API v2) --------------------------------------------------------


@dataclass
class Silence:
    id: str
    matchers: list[dict[str, Any]]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    comment: str
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def state(self, now: datetime) -> str:
        if now < self.starts_at:
            return "pending"
        return "active" if now < self.ends_at else "expired"

    def matches(self, labels: dict[str, str]) -> bool:
        return all(_matcher_holds(m, labels) for m in self.matchers)

    def as_json(self, now: datetime) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": {"state": self.state(now)},
            "updatedAt": _iso(self.updated_at),
            "matchers": self.matchers,
            "startsAt": _iso(self.starts_at),
            "endsAt": _iso(self.ends_at),
            "createdBy": self.created_by,
            "comment": self.comment,
        }


def _matcher_holds(matcher: dict[str, Any], labels: dict[str, str]) -> bool:
    value = labels.get(str(matcher["name"]), "")
    if matcher.get("isRegex"):
        found = re.fullmatch(str(matcher["value"]), value) is not None
    else:
        found = value == matcher["value"]
    return found if matcher.get("isEqual", True) else not found


class SilenceError(ValueError):
    """A silence Alertmanager would refuse with 400; the message is its reason."""


class Silences:
    def __init__(self) -> None:
        self._by_id: dict[str, Silence] = {}

    def create(self, body: object, now: datetime) -> str:
        problem = silence_problem(body)
        if problem:
            raise SilenceError(problem)
        assert isinstance(body, dict)
        matchers = body["matchers"]
        for m in matchers:
            if m["isRegex"]:
                try:
                    re.compile(str(m["value"]))
                except re.error as exc:
                    raise SilenceError(f"invalid regular expression: {exc}") from None
        starts, ends = rfc3339(body["startsAt"]), rfc3339(body["endsAt"])
        if ends <= now:
            raise SilenceError("end time can't be in the past")
        silence_id = str(body.get("id") or uuid.uuid4())
        self._by_id[silence_id] = Silence(
            silence_id,
            [dict(m) for m in matchers],
            max(starts, now),
            ends,
            str(body.get("createdBy", "")),
            str(body.get("comment", "")),
        )
        return silence_id

    def get(self, silence_id: str) -> Silence | None:
        return self._by_id.get(silence_id)

    def expire(self, silence_id: str, now: datetime) -> bool:
        """False when there is no such silence or it already ended (Alertmanager's 500)."""
        silence = self._by_id.get(silence_id)
        if silence is None or silence.state(now) == "expired":
            return False
        silence.ends_at, silence.updated_at = now, now
        return True

    def all(self) -> list[Silence]:
        return list(self._by_id.values())

    def silencing(self, labels: dict[str, str], now: datetime) -> list[str]:
        active = (s for s in self._by_id.values() if s.state(now) == "active")
        return [s.id for s in active if s.matches(labels)]


# -- Grafana's webhook payload ---------------------------------------------------------------


def grafana_payload(
    note: Notification,
    labels: dict[str, str],
    *,
    fleet_url: str,
    thresholds: RuleConfig,
    speed: float = 1.0,
) -> dict[str, Any]:
    """What Grafana's webhook contact point posts for this notification (version "1"): the
    rule's waits, in fleet minutes, said in real ones (`speed` fleet minutes a real minute), as
    the fleet serves every number (`sandbox.fleet.in_real_time`)."""
    payload = copy.deepcopy(json.loads((ALERTS / "queue-alert-firing.json").read_text()))
    alert = payload["alerts"][0]
    values = {
        "max_queue_size": note.queued,
        "max_queue_time_mins": round(note.wait_min / speed, 1),
        "queue_size_threshold": thresholds.fire_queued,
        "queue_time_threshold": round(thresholds.fire_wait_min / speed, 2),
        "threshold_breached": 1 if note.status == "firing" else 0,
    }
    public = {k: v for k, v in labels.items() if not k.startswith("__")}
    uid = labels["__alert_rule_uid__"]
    # The rule's UID pins a silence made from this link to this rule, as Grafana's link does.
    matchers = [f"__alert_rule_uid__={uid}", f"type={labels['type']}"]
    silence_url = f"{fleet_url}/alerting/silence/new?" + urlencode(
        [("alertmanager", "grafana"), *(("matcher", m) for m in matchers)]
    )
    alert.update(
        status=note.status,
        labels=public,
        startsAt=_iso(note.starts_at),
        endsAt=_iso(note.ends_at) if note.ends_at else GRAFANA_ZERO_TIME,
        generatorURL=f"{fleet_url}/alerting/grafana/{uid}/view",
        fingerprint=hashlib.sha256(json.dumps(public, sort_keys=True).encode()).hexdigest()[:16],
        silenceURL=silence_url,
        dashboardURL=f"{fleet_url}/",
        panelURL=f"{fleet_url}/",
        values=values,
        valueString=", ".join(f"[ var='{k}' labels={{}} value={v} ]" for k, v in values.items()),
    )
    alert["annotations"] = annotations_of(labels) | {"runbook_url": f"{fleet_url}/runbook"}
    firing = note.status == "firing"
    title, folder = labels["alertname"], labels["grafana_folder"]
    # Grafana groups by alertname and folder here; one group, one key, per rule.
    grouped = {"alertname": title, "grafana_folder": folder}
    payload.update(
        groupKey=(
            f'{{}}/{{type="{labels["type"]}"}}:{{alertname="{title}", grafana_folder="{folder}"}}'
        ),
        groupLabels=grouped,
        commonLabels=dict(public),
        status=note.status,
        externalURL=f"{fleet_url}/",
        state="alerting" if firing else "ok",
        title=f"[{'FIRING' if firing else 'RESOLVED'}:1] {title} {folder} ({labels['type']})",
        message=f"**{'Firing' if firing else 'Resolved'}**\n\nValue: "
        + ", ".join(f"{k}={v}" for k, v in values.items()),
        commonAnnotations=dict(alert["annotations"]),
    )
    return payload


def annotations_of(labels: dict[str, str]) -> dict[str, str]:
    """What the rule with these labels says of itself: its own words, else the fixture's."""
    fixture = json.loads((ALERTS / "queue-alert-firing.json").read_text())
    own = RULE_ANNOTATIONS.get(labels["__alert_rule_uid__"], {})
    return dict(fixture["alerts"][0]["annotations"]) | own


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
