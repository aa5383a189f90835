"""`/queue report [7d|30d] [runner-type]` end to end: the command, the incidents and timelines kept
in a real Redis, and the answer a responder reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.asyncio import Redis

from bot.actions.commands import MAX_ANSWER, CommandError, parse_command, run_command
from bot.actions.core import Actor
from bot.domain.alerts import RunnerQueue, parse_notification
from bot.domain.delivery import delivery_of
from bot.domain.incidents import Event, GroupState, open_incident, resolve_manually
from bot.storage.incident_store import Commit, IncidentStore
from tests.support.cores import action_core
from tests.support.payloads import fixture_json

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
AL = Actor("U1", "al")


async def keep(store: IncidentStore, n: int, hours_ago: float, peak: float, who: str) -> None:
    payload = fixture_json("grafana/queue-alert-firing.json")
    payload["groupKey"] = f"group-{n}"  # one alert group per incident
    firing = parse_notification("grafana", payload)
    started = NOW - timedelta(hours=hours_ago)
    incident = open_incident(
        delivery_of(firing), incident_id=str(n), uid=f"u{n}", channel="C1", now=started
    )
    incident = incident.model_copy(
        update={
            "started_at": started,  # the fixture's alert began long ago
            "peak_types": {"linux.2xlarge": RunnerQueue(queued=peak, longest_wait_mins=40)},
        }
    )
    scaled = Event(
        at=started, kind="scaled", text="Scaled linux.2xlarge by +4: x", actor="U2", actor_name=who
    )
    assert await store.commit(
        Commit(
            incident,
            group=GroupState(incident_id=str(n)),
            group_hash=incident.group_hash,
            events=(scaled,),
        )
    )
    resolved = resolve_manually(incident, by="U2", name=who, now=started + timedelta(hours=2))
    assert await store.commit(Commit(resolved, version=1))


async def test_the_report_names_each_types_incidents_scale_ups_and_a_size(redis: Redis) -> None:
    store = IncidentStore(redis, "qp")
    await keep(store, 1, 30, 24, "alice")
    await keep(store, 2, 60, 48, "bob")
    core = action_core(redis, store, clock=lambda: NOW)

    outcome = await run_command(core, AL, "report")
    assert outcome.ok and len(outcome.message) <= MAX_ANSWER
    text = outcome.message
    assert "*Capacity report · the last 7 days*" in text
    assert "• *linux.2xlarge*: 2 incidents · 4 h firing · peak 48 queued" in text
    assert "2 scale-ups (alice 1, bob 1)" in text
    # With the alert backend there is no live maximum to add to: it says so.
    assert "2 incidents, 4.0 h firing: a bigger fleet may be due" in text

    quiet = await run_command(core, AL, "report 7d linux.4xlarge")
    assert "No queue incident in these 7 days." in quiet.message


def test_the_window_is_a_week_or_a_month() -> None:
    assert parse_command("report").count == 7
    assert parse_command("report 30d").count == 30
    assert parse_command("report 30D gpu").runner_type == "gpu"
    for bad in ("report 7d a b", "report 1y a b"):
        try:
            parse_command(bad)
        except CommandError as exc:
            assert "usage: `/queue report" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was taken")
