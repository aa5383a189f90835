"""The early warning's thresholds come from what the alert rule said last, and stay known once
its incident has resolved: that is when a warning matters (before the next firing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.alerting.alerts import RunnerQueue, parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import GroupState, apply_notification, open_incident
from bot.domain.reading.early_warning import Phase
from bot.domain.reading.fleet import FleetSnapshot
from bot.fleet.readings import FleetReadings
from bot.status.early_warning import EarlyWarnings
from bot.storage.early_warning import WarningStore
from bot.storage.incident_store import Commit, IncidentStore
from tests.status.test_early_warning import CHANNEL, START, TYPE, Building
from tests.support.incidents import changed
from tests.support.payloads import fixture_json


@dataclass
class Rig:
    """The early warning on a real Redis, a fleet that builds, and a clock the test moves."""

    redis: Redis
    store: IncidentStore
    warnings: WarningStore
    upkeep: EarlyWarnings
    now: list[datetime]

    async def reading(self, fleet: Building, in_system: float) -> None:
        fleet.in_system = in_system
        self.now[0] += timedelta(seconds=60)
        await self.upkeep.tick()


@asynccontextmanager
async def rig(redis_url: str, fleet: Building, config: Settings) -> AsyncIterator[Rig]:
    redis = Redis.from_url(redis_url, decode_responses=True)
    await redis.flushdb()
    now = [START]
    store = IncidentStore(redis, "qp")
    readings = FleetReadings(redis, store.keys, fleet, config=config, clock=lambda: now[0])
    warnings = WarningStore(redis, store.keys)
    upkeep = EarlyWarnings(readings, store, warnings, config=config, clock=lambda: now[0])
    try:
        yield Rig(redis, store, warnings, upkeep, now)
    finally:
        await redis.aclose()


async def test_a_resolved_alerts_thresholds_still_warn(redis_url: str) -> None:
    fleet = Building()
    # No thresholds in the settings: only the alert rule's.
    async with rig(redis_url, fleet, Settings(slack_channel=CHANNEL)) as on:
        await _resolved_with_thresholds(on)
        # 4 queued, +2 jobs/min at the maximum: 10 queued in 3 minutes.
        for n in (16, 18, 20, 22, 24):
            await on.reading(fleet, n)
        state = (await on.warnings.all()).get(TYPE)
    assert state is not None and state.phase is Phase.ACTIVE, "warned at the rule's threshold"
    assert "the alert fires in ~3 min" in state.text


async def _resolved_with_thresholds(on: Rig) -> None:
    """An incident whose alert stated a queue threshold of 10, since resolved."""
    firing = delivery_of(
        parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
    )
    stated = replace(firing.facts.numbers, queue_size_threshold=10.0, queue_time_threshold=None)
    firing = firing.model_copy(update={"facts": replace(firing.facts, numbers=stated)})
    incident = open_incident(firing, incident_id="7", uid="u7", channel=CHANNEL, now=on.now[0])
    assert incident.numbers.queue_size_threshold == 10.0
    assert await on.store.commit(Commit(incident, group=GroupState(incident_id="7")))
    # The alert resolves, as the rule says it (the real payload): the queue has gone.
    resolved_payload = fixture_json("grafana/queue-alert-resolved.json")
    resolved, _ = apply_notification(
        incident,
        delivery_of(parse_notification("grafana", resolved_payload)),
        entry_id="2-0",
        now=on.now[0],
    )
    assert await on.store.commit(Commit(resolved, version=1))


async def test_an_incident_in_another_channel_naming_the_type_takes_the_warning_on(
    redis_url: str,
) -> None:
    """The warning went where the type's route sends it (CHANNEL); the alert's incident opened in
    another channel (C2, a team route) and names the type, spelled as the alert's label has it:
    the warning is folded into it all the same, its message edited where it is."""
    fleet = Building()
    config = Settings(slack_channel=CHANNEL, early_warning_queued=10)
    async with rig(redis_url, fleet, config) as on:
        for n in (16, 18, 20, 22, 24):
            await on.reading(fleet, n)
        state = (await on.warnings.all())[TYPE]
        await on.warnings.record_post(state, "1700000000.000100")

        firing = delivery_of(
            parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
        )
        incident = open_incident(firing, incident_id="9", uid="u9", channel="C2", now=on.now[0])
        named = {TYPE.upper(): RunnerQueue(queued=12)}
        incident = changed(incident, peak_types=named, runner_types=named)
        assert await on.store.commit(Commit(incident, group=GroupState(incident_id="9")))
        await on.reading(fleet, 26)
        folded = (await on.warnings.all())[TYPE]
        assert folded.phase is Phase.FOLDED and folded.incident_id == "9"
        assert folded.channel == CHANNEL and await on.warnings.edits(CHANNEL) == [TYPE]


async def test_one_types_failure_does_not_cost_the_others_their_warning(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.status.early_warning as upkeep_module

    real = upkeep_module.forecast

    def failing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "a.first":
            raise ZeroDivisionError("an odd reading")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(upkeep_module, "forecast", failing)
    fleet = Building()
    read = fleet.read

    async def two_types(*, now: datetime) -> FleetSnapshot:
        snapshot = await read(now=now)
        types = {"a.first": snapshot.runner_types[TYPE], **snapshot.runner_types}
        return snapshot.model_copy(update={"runner_types": types})

    fleet.read = two_types  # type: ignore[method-assign]
    config = Settings(slack_channel=CHANNEL, early_warning_queued=10)
    async with rig(redis_url, fleet, config) as on:
        for n in (16, 18, 20, 22, 24):
            await on.reading(fleet, n)
        assert set(await on.warnings.all()) == {TYPE}
