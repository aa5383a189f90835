"""The early warning's upkeep follows a scale-up and still decides the same reading: the
warning folds into the incident whose alert fired at the reading that saw its runners."""

from __future__ import annotations

from datetime import timedelta

from redis.asyncio import Redis

from bot.actions.scale import made
from bot.backends.scale import Undo
from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import GroupState, open_incident
from bot.domain.reading.early_warning import Phase, scaled_from
from bot.storage.incident_store import Commit
from tests.status.test_early_warning import CHANNEL, START, TYPE, Building, Replica
from tests.support.payloads import fixture_json


async def test_the_reading_that_decides_a_scale_ups_follow_up_still_folds_the_warning(
    redis_url: str,
) -> None:
    """A person scaled from the warning; at the next reading its runners are seen (ARC counts
    the maximum's 20) and the alert has fired. The upkeep follows the scale-up (a new version)
    and must still fold the warning into the incident at that reading, as it does without one."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    fleet, now = Building(), [START]
    replica = Replica(redis, fleet, now)

    async def reading(in_system: float) -> None:
        fleet.in_system = in_system
        now[0] += timedelta(seconds=60)
        await replica.upkeep.tick()

    for n in (16, 18, 20, 22, 24):
        await reading(n)
    state = (await replica.warnings.all())[TYPE]
    await replica.warnings.record_post(state, "1700000000.000100")
    done = made(TYPE, 2, "al", now[0], Undo("maxRunners", 20, 22))
    entry = scaled_from("al scaled it by +2.", "", "r1", done, None, 600)
    entry = entry.model_copy(update={"baseline": 18.0})
    state = (await replica.warnings.all())[TYPE]
    assert await replica.warnings.save(state.with_scaled((entry,)))

    firing = parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
    incident = open_incident(
        delivery_of(firing),
        incident_id="7",
        uid="u7",
        channel=CHANNEL,
        now=now[0] + timedelta(seconds=30),
    )
    await replica.store.commit(Commit(incident, group=GroupState(incident_id="7")))
    await reading(26)
    state = (await replica.warnings.all())[TYPE]
    assert not state.scaled[0].followed and state.scaled[0].came, "followed: its runners came"
    assert state.phase is Phase.FOLDED, "the alert fired at this reading: folded, as without one"
