"""`/queue` answers for the channel it is typed in when incidents open there (SLACK_ROUTES), and
for every channel when typed anywhere else (a DM); an action without an ID never guesses an
incident of another channel."""

from __future__ import annotations

from datetime import UTC, datetime

from redis.asyncio import Redis

from bot.actions.commands import run_command
from bot.actions.core import Actor
from bot.domain.alerts import parse_notification
from bot.domain.delivery import delivery_of
from bot.domain.incidents import GroupState, open_incident
from bot.storage.incident_store import Commit, IncidentStore
from tests.support.cores import action_core
from tests.support.payloads import fixture_json

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
AL = Actor("U1", "al")
CI, ROCM, DM = "C0CIQ", "C0ROCMQ", "D0ALICE"


async def opened(store: IncidentStore, n: int, channel: str) -> None:
    payload = fixture_json("grafana/queue-alert-firing.json")
    payload["groupKey"] = f"group-{n}"
    delivery = delivery_of(parse_notification("grafana", payload))
    incident = open_incident(delivery, incident_id=str(n), uid=f"u{n}", channel=channel, now=NOW)
    group = GroupState(incident_id=str(n))
    assert await store.commit(Commit(incident, group=group, group_hash=incident.group_hash))


async def test_queue_answers_for_its_channel_and_for_all_from_a_dm(redis: Redis) -> None:
    store = IncidentStore(redis, "qp")
    await opened(store, 1, CI)
    await opened(store, 2, CI)
    core = action_core(redis, store, channels=frozenset({CI, ROCM}), clock=lambda: NOW)

    in_rocm = (await run_command(core, AL, "", channel=ROCM)).message
    assert "No open incidents here." in in_rocm and f"2 open in other channels: <#{CI}>" in in_rocm
    from_dm = (await run_command(core, AL, "", channel=DM)).message
    assert "*#1*" in from_dm and "*#2*" in from_dm, "a DM answers for every channel"
    in_ci = (await run_command(core, AL, "", channel=CI)).message
    assert "*#1*" in in_ci and "other channels" not in in_ci

    # No ID, and nothing open in ROCm's channel: it asks, naming where they are.
    asked = await run_command(core, AL, "ack", channel=ROCM)
    assert not asked.ok and "say which" in asked.message and f"in <#{CI}>" in asked.message

    await opened(store, 3, ROCM)
    acked = await run_command(core, AL, "ack", channel=ROCM)
    assert acked.ok and (await store.load("3")).incident.acknowledged_by == "U1"  # type: ignore[union-attr]
