"""The alert's GitHub issue hears an acknowledgement by acting as it hears one by the button:
alice's silence, her first act, takes the incident on, and the issue says so once, after the
silence, as "Acknowledged by alice … (silenced)"."""

from __future__ import annotations

from datetime import timedelta

from redis.asyncio import Redis

from bot.domain.incident.ack_on_action import acknowledged_by_acting
from bot.domain.incident.incidents import Event, with_action
from bot.storage.incident_store import Commit
from tests.support.alert_issue import Clock, FakeIssues, keeper, opened_due, with_thread
from tests.support.store import T0


async def test_an_acknowledgement_by_acting_is_told_to_the_issue_once(redis: Redis) -> None:
    issues, clock = FakeIssues(), Clock()
    keep, store = await keeper(redis, issues, clock, open=True)
    incident = await opened_due(store)
    await with_thread(redis, incident)
    await keep.tick()

    # As the action core commits her silence: the acknowledgement it makes beside it.
    loaded = await store.load(incident.id)
    assert loaded.incident is not None
    silenced = Event(
        at=T0, kind="silenced", text="Silenced for 1 h in Grafana", actor="U1", actor_name="alice"
    )
    taken, events = acknowledged_by_acting(
        with_action(loaded.incident, silenced), (silenced,), now=T0
    )
    commit = Commit(taken, version=loaded.version, events=events)
    assert await store.commit(commit, now=clock.now.timestamp())
    for _ in range(2):
        clock.now += timedelta(seconds=30)
        await keep.tick()

    [number] = issues.comments
    said = [body.split("\n")[0] for body in issues.comments[number]]
    assert said[1:] == [
        "**Silenced** by alice at 2025-12-01 02:30 UTC: Silenced for 1 h in Grafana",
        "**Acknowledged** by alice at 2025-12-01 02:30 UTC: Acknowledged (silenced)",
    ], said
