"""`/queue report [7d|30d] [runner-type]` end to end: the command, the incidents and timelines kept
in a real Redis, and the answer a responder reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from redis.asyncio import Redis

from bot.actions import report
from bot.actions.commands import MAX_ANSWER, CommandError, parse_command, run_command
from bot.actions.core import Actor
from bot.actions.flow import Acting, Authorizer
from bot.actions.report import Report
from bot.backends.metrics import AlertMetrics
from bot.config import Settings
from bot.domain.alerting.alerts import RunnerQueue, parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incidents import Event, GroupState, open_incident, resolve_manually
from bot.domain.scale.scale_ups import ScaleUp
from bot.fleet.readings import FleetReadings
from bot.storage.incident_store import Commit, IncidentStore
from bot.storage.leases import Interactions
from bot.storage.send_queue import NoticeStore
from bot.telemetry import Telemetry
from tests.support.cores import _no_members, _no_name, action_core
from tests.support.incidents import changed
from tests.support.payloads import fixture_json

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
AL = Actor("U1", "al")


async def keep(
    store: IncidentStore, n: int, hours_ago: float, peak: float, who: str, **came: object
) -> None:
    """An incident of `n`'s group scaled up by `who`; `came` (its `came`, `seen_at`, `pilot`):
    the scale-up kept on the incident as its follow-up decided it."""
    payload = fixture_json("grafana/queue-alert-firing.json")
    payload["groupKey"] = f"group-{n}"  # one alert group per incident
    firing = parse_notification("grafana", payload)
    started = NOW - timedelta(hours=hours_ago)
    incident = open_incident(
        delivery_of(firing), incident_id=str(n), uid=f"u{n}", channel="C01", now=started
    )
    incident = changed(
        incident,
        started_at=started,
        peak_types={"linux.2xlarge": RunnerQueue(queued=peak, longest_wait_mins=40)},
    )
    done = ScaleUp(
        runner_type="linux.2xlarge", added=4, by=who, at=started, field="minRunners", **came
    )
    scaled = Event(
        at=started,
        kind="scaled",
        text="Scaled linux.2xlarge by +4: x",
        actor="U2",
        actor_name=who,
        scale=done,
    )
    if came:
        incident = incident.model_copy(update={"actions": (scaled,)})
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


async def test_the_report_says_what_came_of_the_scale_ups_and_how_far_back_it_read(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = IncidentStore(redis, "qp")
    await keep(store, 1, 30, 24, "alice", came=True, seen_at=NOW - timedelta(hours=29.9))
    pilot = {"pilot": True, "came": True, "seen_at": NOW - timedelta(hours=59.8)}
    await keep(store, 2, 60, 48, "queuepilot (policy)", **pilot)
    await keep(store, 3, 90, 12, "bob", came=None)
    core = action_core(redis, store, clock=lambda: NOW)

    text = (await run_command(core, AL, "report")).message
    assert "3 scale-ups (alice 1, queuepilot (policy) 1, bob 1)" in text
    assert "2 of 3 came up (the pilot's 1 of 1), 1 not known" in text
    assert "capacity added a median 9 min after the alert (2 incidents)" in text
    assert "Only the most recent incidents are read" not in text

    monkeypatch.setattr(report, "MAX_INCIDENTS", 2)
    text = (await run_command(core, AL, "report")).message
    assert "Only the most recent incidents are read, back to <!date^" in text
    assert "older ones of the window are not counted" in text
    assert "2 of 2 came up (the pilot's 1 of 1) · capacity added a median 9 min" in text


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


def weekly(redis: Redis, store: IncidentStore, clock: list[datetime]) -> Report:
    acting = Acting(
        store,
        Telemetry(),
        Interactions(redis, store.keys.prefix),
        Authorizer(Settings(), group_members=_no_members),
        display_name=_no_name,
        clock=lambda: clock[0],
    )
    readings = FleetReadings(
        redis,
        store.keys,
        AlertMetrics(),
        config=Settings(backend_timeout_seconds=2),
        clock=lambda: clock[0],
    )
    notices = NoticeStore(redis, store.keys)
    return Report(acting, readings, config=Settings(slack_channel="C01"), notices=notices)


async def test_a_weekly_post_due_before_midnight_utc_is_posted_once(redis: Redis) -> None:
    """`fri 16:30 America/Los_Angeles` is 23:30 UTC: a replica busy at that minute fires after
    midnight, on another UTC date, and must not post the week's report a second time."""
    store = IncidentStore(redis, "qp")
    clock = [datetime(2026, 7, 10, 23, 30, tzinfo=UTC)]
    first, second = weekly(redis, store, clock), weekly(redis, store, clock)
    await first.post_weekly()
    clock[0] += timedelta(minutes=40)  # 00:10 UTC, within the hour's grace
    await second.post_weekly()
    posted = await redis.zrange(store.keys.posts("C01"), 0, -1)
    assert len(posted) == 1, "once per schedule across replicas"
    # The claim outlives the hour's grace, and is gone before the next week's report.
    claims = [k async for k in redis.scan_iter(match=store.keys.notice_claim("*"))]
    assert claims
    for key in claims:
        assert 3600 < await redis.ttl(key) < 7 * 86_400 - 3600


async def test_a_window_other_than_a_week_or_a_month_is_refused_not_taken_for_a_type(
    redis: Redis,
) -> None:
    store = IncidentStore(redis, "qp")
    core = action_core(redis, store, clock=lambda: NOW)
    for text in ("report 400d", "report 14d", "report 2w"):
        outcome = await run_command(core, AL, text)
        assert not outcome.ok, text
        assert "`7d` or `30d`" in outcome.message
        assert "*400d*" not in outcome.message and "*14d*" not in outcome.message
    fine = await run_command(core, AL, "report 30d linux.2xlarge")
    assert fine.ok and "the last 30 days" in fine.message
