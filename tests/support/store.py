"""The incident store's tests' world: one prefix, one channel, a Grafana alert as notifications,
deliveries and incidents, and what is pending in the notification stream."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from redis.asyncio import Redis

from bot.domain.alerting.alerts import Notification, parse_notification
from bot.domain.alerting.delivery import Delivery, delivery_of
from bot.domain.incident.incidents import GroupState, Incident, open_incident
from bot.domain.message import Rendered
from bot.storage.incident_store import BAND_EVENT, Commit, IncidentStore, Reply
from bot.storage.keys import Keys
from bot.storage.streams import INTAKE_GROUP as GROUP
from tests.support.payloads import fixture_json

PREFIX = "qp"
KEYS = Keys(PREFIX)
T0 = datetime(2025, 12, 1, 2, 30, tzinfo=UTC)
CHANNEL = "C0STORE"
DAY = 86_400


def delivery(name: str = "grafana/queue-alert-firing.json", **changes: object) -> Delivery:
    return delivery_of(parse_notification("grafana", json.loads(body(name, **changes))))


def notification(name: str = "grafana/queue-alert-firing.json") -> Notification:
    return parse_notification("grafana", json.loads(body(name)))


def body(name: str = "grafana/queue-alert-firing.json", **changes: object) -> bytes:
    """A Grafana notification as the webhook accepts it."""
    return json.dumps({**fixture_json(name), **changes}).encode()


def incident(incident_id: str, *, opened_at: datetime = T0, test: bool = False) -> Incident:
    group_key = "test-1-2" if test else f"group-{incident_id}"
    return open_incident(
        delivery(groupKey=group_key),
        incident_id=incident_id,
        uid=f"uid{incident_id}",
        channel=CHANNEL,
        now=opened_at,
    )


def reply(text: str, kind: str = "event", band: int = BAND_EVENT) -> Reply:
    return Reply(kind, band, Rendered(text, []), replaces=("status",) if kind == "status" else ())


async def opened(store: IncidentStore, incident_id: str = "1", **changes: object) -> Incident:
    new = incident(incident_id, **changes)  # type: ignore[arg-type]
    group = GroupState(incident_id=new.id, last_entry="1-0")
    assert await store.commit(Commit(new, version=0, group=group, group_hash=new.group_hash))
    return new


async def gone(redis: Redis, key: str) -> bool:
    return not await redis.exists(key)


async def idle_at_least(redis: Redis, ms: int, *entry_ids: str) -> bool:
    """Whether Redis counts each of these pending entries idle for `ms` or more."""
    pending = await redis.xpending_range(KEYS.stream, GROUP, min="-", max="+", count=100)
    idle = {p["message_id"]: p["time_since_delivered"] for p in pending}
    return all(idle.get(entry_id, -1) >= ms for entry_id in entry_ids)
