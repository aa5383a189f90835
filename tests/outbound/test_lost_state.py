"""Telling a first start, an upgrade and a Redis that lost the state apart (`StateGuard.check`),
against a real redis-server and the Slack emulator: only a loss is said, and only once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.config import Settings
from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.intake.consumer import Intake
from bot.outbound.history_scan import Found, Scan
from bot.outbound.lost_state import Phase, Read, StateGuard
from bot.outbound.messages import METADATA_EVENT
from bot.storage.incident_store import IncidentStore
from bot.storage.keys import Keys
from bot.storage.leases import Deposed, Fence
from bot.storage.state_marker import FoundRoot, StateMarker
from bot.storage.streams import NotificationStream
from bot.telemetry import Telemetry
from sandbox.slack_model import Message
from tests.outbound.test_gateway import make_gateway, post
from tests.support.payloads import as_group
from tests.support.running import eventually
from tests.support.slack import CHANNEL, Slack, chatter

TEAM = "C0TEAMQ"  # a routed channel


@pytest.fixture
async def replica(slack: Slack, redis: Redis) -> AsyncIterator[Callable[..., StateGuard]]:
    """Another replica's guard each call, on the same Redis and Slack; `routed`: alerts routed
    to TEAM too."""
    slack.emulator.add_channel(TEAM)
    gateway = make_gateway(slack, redis)
    routes = json.dumps([{"match": ["team=rocm"], "channel": TEAM}])

    def make(*, routed: bool = False) -> StateGuard:
        config = Settings(slack_channel=CHANNEL, slack_routes=routes if routed else "[]")
        marker = StateMarker(redis, Keys("qp"), retention_s=86_400)
        return StateGuard(
            marker, gateway, Telemetry(), config=config, clock=lambda: datetime.now(UTC)
        )

    yield make
    await gateway.aclose()


@pytest.fixture
def guard(replica: Callable[..., StateGuard]) -> StateGuard:
    return replica()


def lost(guard: StateGuard) -> float:
    return guard.telemetry.registry.get_sample_value("queuepilot_state_lost_total") or 0.0


def root_metadata(incident: str, group: str) -> dict[str, Any]:
    payload = {"incident": incident, "uid": f"u{incident}", "item": "root", "group": group}
    return {"event_type": METADATA_EVENT, "event_payload": payload}


def team_history_fails(slack: Slack, *, times: int) -> None:
    """Slack answers the team channel's next `times` history reads 500 (its other channels read)."""
    in_team = {"when": lambda params: params.get("channel") == TEAM}
    slack.emulator.fail_next("conversations.history", status=500, count=times, **in_team)


async def root(guard: StateGuard, incident: str, group: str, channel: str = CHANNEL) -> str:
    metadata = root_metadata(incident, group)
    return await post(guard.slack, channel, f"Incident {incident}", [], metadata=metadata)


async def test_a_first_start_sets_the_marker_and_says_nothing(guard: StateGuard) -> None:
    await guard.check()
    assert (await guard.marker.read()) is not None
    assert lost(guard) == 0


async def test_a_fresh_start_beside_the_bot_s_roots_is_a_loss_said_once(
    guard: StateGuard, redis: Redis, slack: Slack
) -> None:
    await root(guard, "4", "g-old")
    await root(guard, "9", "g-new")
    newest = await root(guard, "11", "g-new")  # the group's newest root is the one it goes on in
    await post(guard.slack, CHANNEL, "someone else's message", [])
    await guard.check()
    await guard.check()
    assert lost(guard) == 1, "said once"
    marker = await guard.marker.read()
    assert marker is not None and marker.lost_at is not None
    assert (marker.found, marker.above) == (2, 11)
    assert (await guard.marker.kept())[1] == 11, "numbering goes on above 11"
    found = await redis.hget(guard.marker.keys.found_roots, "g-new")
    assert found is not None and FoundRoot(**json.loads(found)).ts == newest


async def test_a_loss_under_a_running_bot_numbers_above_what_it_saw_even_with_slack_empty(
    guard: StateGuard, redis: Redis
) -> None:
    await guard.check()
    await redis.set(guard.marker.keys.incident_seq, 5)
    await guard.check()
    await redis.flushall()
    await guard.check()
    assert lost(guard) == 1
    assert (await guard.marker.kept())[1] == 5


async def test_a_redis_gone_back_in_time_under_the_bot_never_reuses_a_number_it_used(
    guard: StateGuard, redis: Redis
) -> None:
    """A failover to a replica that lagged, a backup restored under the running bot: the marker
    is there, the sequence behind."""
    await guard.check()
    await redis.set(guard.marker.keys.incident_seq, 8)
    await guard.check()
    await redis.set(guard.marker.keys.incident_seq, 5)
    await guard.check()
    assert (await guard.marker.kept())[1] == 8
    assert lost(guard) == 0, "nothing was lost that Redis had"


@pytest.mark.parametrize("who", ["the same replica", "another replica taking the lead"])
async def test_a_loss_is_said_when_slack_held_up_the_check_while_the_intake_opened_incidents(
    who: str, guard: StateGuard, replica: Callable[..., StateGuard], redis: Redis, slack: Slack
) -> None:
    """Slack answers the history read with 5xx past the hold, so the intake goes on and opens
    incident 1: the read that gets through (retried, or a new leader's) still says the loss."""
    await root(guard, "11", "g-old")
    slack.emulator.fail_next("conversations.history", status=500, count=2)
    await guard.at_start_of_term()
    await redis.set(guard.marker.keys.incident_seq, 1)  # the intake opened incident 1
    assert lost(guard) == 0 and (await guard.marker.read()) is None, "not told yet"
    checking = guard
    if who != "the same replica":
        await guard.end_of_term()  # its lead lost while Slack failed
        checking = replica()
    await checking.check()
    assert lost(checking) == 1
    marker = await checking.marker.read()
    assert marker is not None and (marker.found, marker.above) == (1, 11)
    assert (await checking.marker.kept())[1] == 11, "numbering goes on above 11"
    assert checking.telemetry.registry.get_sample_value(
        "queuepilot_state_lost_timestamp_seconds"
    ) == pytest.approx(marker.lost_at)


async def test_a_standby_that_never_saw_the_marker_finds_a_loss_in_the_routed_channels(
    replica: Callable[..., StateGuard], redis: Redis
) -> None:
    """Redis emptied under the leader; the standby takes the lead: SLACK_CHANNEL shows nothing,
    the team channel the alerts are routed to shows the roots."""
    standby = replica(routed=True)
    await root(standby, "3", "g-team", TEAM)  # the leader's, before Redis was emptied
    await standby.check()
    assert lost(standby) == 1
    assert (await standby.marker.kept())[1] == 3
    assert await redis.hget(standby.marker.keys.found_roots, "g-team") is not None


async def test_another_app_s_messages_in_the_channel_are_not_this_deployment_s_roots(
    guard: StateGuard, slack: Slack
) -> None:
    """A second queuepilot (staging) posting into the same channel: a fresh start here is a
    first start, not a loss, and takes none of its roots."""
    with slack.emulator.workspace() as ws:
        message = Message(
            ts=ws.clock.next(),
            channel=CHANNEL,
            text="Incident 40",
            blocks=[],
            thread_ts=None,
            user="U0STAGING",
            metadata=root_metadata("40", "g-staging"),
        )
        ws.channel(CHANNEL).by_ts[message.ts] = message
        ws.channel(CHANNEL).timeline.append(message)
    await guard.check()
    marker = await guard.marker.read()
    assert marker is not None and marker.lost_at is None
    assert lost(guard) == 0 and (await guard.marker.kept())[1] == 0


def test_roots_posted_since_the_check_began_are_the_bot_s_new_ones_not_found_ones() -> None:
    found = Found("B0QUEUEBOT", before=1000.0)
    for ts, incident, group in (("999.000001", "7", "g-old"), ("1000.000002", "1", "g-new")):
        message = {"ts": ts, "bot_id": "B0QUEUEBOT", "metadata": root_metadata(incident, group)}
        found.add(message, CHANNEL)
    assert list(found.roots) == ["g-old"] and found.highest == 7


async def found_group(guard: StateGuard, group: str) -> FoundRoot | None:
    raw = await guard.marker._redis.hget(guard.marker.keys.found_roots, group)
    return FoundRoot(**json.loads(raw)) if raw else None


async def test_a_root_500_messages_back_is_found_with_one_call_as_an_internal_app(
    guard: StateGuard, slack: Slack
) -> None:
    """An internal app reads history at Tier 3, up to 999 messages a call: a root behind 500
    messages of people in a busy channel takes one call."""
    deep = await root(guard, "7", "g-deep")
    chatter(slack.emulator, CHANNEL, 500)
    await guard.check()
    assert lost(guard) == 1
    found = await found_group(guard, "g-deep")
    assert found is not None and found.ts == deep
    assert (await guard.marker.kept())[1] == 7, "numbering goes on above 7"
    [call] = slack.emulator.calls("conversations.history")
    assert int(call.params["limit"]) == 999


TEAM2 = "C0TEAMR"  # a second routed channel


async def test_on_tier_1_with_several_channels_an_opening_waits_for_every_channel_s_newest_root(
    slack: Slack, redis: Redis
) -> None:
    """A distributed app: 15 messages a call, one call a "minute" (2 s here), three channels
    holding roots #5, #9 and #12. The first channel's page comes in at once and the root hold is
    short: a new incident still waits until every channel's newest page is read, and takes a
    number above 12. The readers do not burst: they grow a page at a time, so two 429s at most
    (the second pair of calls), after which the calls keep Slack's pace; `/readyz`'s text says
    what waits and how long at most."""
    for channel in (TEAM, TEAM2):
        slack.emulator.add_channel(channel)
    guard = routed_guard(slack, redis, [TEAM, TEAM2])
    guard.hold_s, guard.number_hold_s = 0.2, 30.0
    await root(guard, "5", "g-a")
    await root(guard, "9", "g-b", TEAM)
    await root(guard, "12", "g-c", TEAM2)
    slack.emulator.history_tier, slack.emulator.history_interval_s = 1, 2.0
    try:
        await guard.at_start_of_term()
        said = await eventually(
            lambda: said_with(guard, "new incidents wait"), what="/readyz says openings wait"
        )
        loop = asyncio.get_running_loop()
        began = loop.time()
        await guard.held(None)  # an incident about to open
        waited = loop.time() - began
        assert (await guard.marker.kept())[1] >= 12, "numbered above every number Slack shows"
        await guard.end_of_term()
    finally:
        slack.emulator.history_tier, slack.emulator.history_interval_s = 3, 60.0
    assert waited > 2, "waited for the other channels' newest pages"
    assert "at most 30 s more" in said or "at most 29 s more" in said, said
    statuses = [c.status for c in slack.emulator.calls("conversations.history")]
    assert statuses.count(200) == 3 and statuses.count(429) <= 2, statuses
    assert guard.slack.pacing.spacing_s("conversations.history") >= 2, "Slack's pace kept"


def routed_guard(slack: Slack, redis: Redis, channels: list[str]) -> StateGuard:
    routes = json.dumps([{"match": [f"team={c}"], "channel": c} for c in channels])
    config = Settings(slack_channel=CHANNEL, slack_routes=routes)
    marker = StateMarker(redis, Keys("qp"), retention_s=86_400)
    gateway = make_gateway(slack, redis)
    return StateGuard(marker, gateway, Telemetry(), config=config, clock=lambda: datetime.now(UTC))


async def test_on_tier_1_the_loss_is_said_once_numbering_is_known_and_the_read_goes_on_for_roots(
    guard: StateGuard, slack: Slack
) -> None:
    """The newest page shows root #5: the loss is said (log, metric, marker) then, not after the
    whole channel is read; a root 40 messages further back is still found afterwards."""
    deep = await root(guard, "3", "g-deep")
    chatter(slack.emulator, CHANNEL, 40)
    await root(guard, "5", "g-new")
    slack.emulator.history_tier, slack.emulator.history_interval_s = 1, 2.0
    try:
        await guard.at_start_of_term()
        await eventually(lambda: lost(guard) == 1, what="the loss said")
        marker = await guard.marker.read()
        assert marker is not None and marker.lost_at is not None and marker.reading
        assert await found_group(guard, "g-deep") is None, "said before the read got there"
        assert (await guard.marker.kept())[1] == 5
        found = await eventually(lambda: found_group(guard, "g-deep"), what="the deep root")
    finally:
        slack.emulator.history_tier, slack.emulator.history_interval_s = 3, 60.0
    assert found.ts == deep
    await eventually(lambda: reading_done(guard), what="the read done")
    assert lost(guard) == 1, "said once"


async def reading_done(guard: StateGuard) -> bool:
    marker = await guard.marker.read()
    return marker is not None and not marker.reading


async def said_with(guard: StateGuard, words: str) -> str | None:
    said = await guard.marker.checking()
    return said if said and words in said else None


async def test_a_root_s_group_waits_for_its_channel_and_an_opening_no_longer_than_the_number_hold(
    replica: Callable[..., StateGuard], redis: Redis, slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    """The team channel's read fails twice (5xx, retried): a group routed there waits until its
    root is where the intake finds it and numbering is above it. Then Slack keeps failing: a new
    incident waits no longer than the number hold, and takes a number above a guess (the highest
    read and 1000 more), never one Slack may show; the log says what that may cost."""
    guard = replica(routed=True)
    guard.hold_s = 5.0
    await root(guard, "3", "g-team", TEAM)
    team_history_fails(slack, times=2)
    await guard.at_start_of_term()
    await guard.held(TEAM)
    assert await found_group(guard, "g-team") is not None, "its root found before it goes on"
    assert (await guard.marker.kept())[1] == 3
    await guard.check()

    await redis.flushall()
    guard.hold_s, guard.number_hold_s = 0.3, 0.8
    team_history_fails(slack, times=1000)
    await guard.tick()
    loop = asyncio.get_running_loop()
    began = loop.time()
    await guard.held(TEAM)
    assert 0.6 < loop.time() - began < 3, "held until the number hold ended, no longer"
    assert (await guard.marker.kept())[1] == 1003, "above the highest seen and the gap"
    assert "channel(s) not read yet opens a second thread" in caplog.text
    assert "numbered above 1003" in caplog.text
    await guard.end_of_term()


async def test_a_channel_that_keeps_failing_is_given_up_and_the_loss_still_said(
    replica: Callable[..., StateGuard], slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    guard = replica(routed=True)
    guard.give_up_after = 2
    await root(guard, "4", "g-main")
    team_history_fails(slack, times=1000)
    await guard.check()
    assert lost(guard) == 1
    assert "cannot read the history of C0TEAMQ (internal_error 2 times)" in caplog.text
    assert (await guard.marker.kept())[1] == 1004, "numbers the team channel may show not reused"
    assert await guard.marker.checking() is None


async def test_the_lead_lost_mid_read_stops_slack_calls_and_ends_the_holds(
    guard: StateGuard, slack: Slack
) -> None:
    await root(guard, "5", "g-a")
    chatter(slack.emulator, CHANNEL, 40)
    slack.emulator.history_tier, slack.emulator.history_interval_s = 1, 30.0
    deposed = asyncio.Event()
    try:
        await guard.at_start_of_term(deposed)
        waiting = asyncio.create_task(guard.held(None))
        await eventually(
            lambda: slack.emulator.calls("conversations.history"), what="the read under way"
        )
        deposed.set()
        with pytest.raises(Deposed):  # what waited is the next leader's
            await asyncio.wait_for(waiting, 2)
        assert guard.read is None, "the read stopped with the lead"
    finally:
        slack.emulator.history_tier, slack.emulator.history_interval_s = 3, 60.0
    assert len(slack.emulator.calls("conversations.history")) <= 2


async def test_redis_failing_during_the_read_delays_the_verdict_without_reading_again(
    guard: StateGuard, redis: Redis, slack: Slack
) -> None:
    """Redis refuses writes (out of memory) just as the first page comes in: what was read is
    written once Redis takes writes again, by the same read; Slack is not read twice."""
    await root(guard, "6", "g-a")

    def first_pages() -> list[Any]:
        # The channel's one page, as this read asks it: a busy machine can hand the emulator a
        # page the previous test's read had sent (with its cursor) only after this test began.
        calls = slack.emulator.calls("conversations.history")
        return [call for call in calls if "cursor" not in call.params]

    slack.emulator.fail_next("conversations.history", status=500, count=1)
    await guard.at_start_of_term()
    await redis.config_set("maxmemory-policy", "noeviction")
    await redis.config_set("maxmemory", 1)
    try:
        await eventually(lambda: len(first_pages()) == 2, what="the page read")
        assert lost(guard) == 0
    finally:
        await redis.config_set("maxmemory", 0)
    await eventually(lambda: lost(guard) == 1, what="the loss said", timeout=10)
    assert (await guard.marker.kept())[1] == 6
    assert await found_group(guard, "g-a") is not None
    assert [call.status for call in first_pages()] == [500, 200], "read once (and one 5xx)"
    await guard.end_of_term()


async def test_what_a_read_says_of_itself_is_unsaid_only_by_the_leader(redis: Redis) -> None:
    """A replica that lost the lead ends its read: it must not delete what the new leader's
    read says on `/readyz`."""
    keys = Keys("qp")
    await redis.set(keys.leader, "2")
    new, old = (
        StateMarker(redis, keys, retention_s=60, fence=Fence(keys.leader, held=held))
        for held in ("2", "1")
    )
    await new.said_checking("checking Slack's history: 1 of 3 channels read")
    with pytest.raises(Deposed):
        await old.said_checking(None)
    assert await new.checking() == "checking Slack's history: 1 of 3 channels read"
    await new.said_checking(None)
    assert await new.checking() is None


async def test_with_the_intake_a_found_group_and_another_channel_s_group_go_on_while_held_ones_wait(
    replica: Callable[..., StateGuard], redis: Redis, slack: Slack
) -> None:
    """The team channel's newest page is read (numbering known: above #7) but its deeper pages
    fail, so new groups routed there wait for their roots, more of them than the intake takes
    at once. A group whose root was found in the main channel goes on in it, and a new group
    of the main channel opens as #8, meanwhile."""
    guard = replica(routed=True)
    guard.hold_s = 30.0
    known = as_group("lost-known")
    known_hash = delivery_of(parse_notification("grafana", known)).group_hash
    found_ts = await root(guard, "3", known_hash)
    chatter(slack.emulator, TEAM, 1000)
    await root(guard, "7", "g-team-old", TEAM)
    deeper = {"when": lambda params: params.get("channel") == TEAM and bool(params.get("cursor"))}
    slack.emulator.fail_next("conversations.history", status=500, count=1000, **deeper)
    stream = NotificationStream(redis, "qp")
    await stream.ensure_group()
    intake = Intake(
        stream,
        IncidentStore(redis, "qp"),
        Telemetry(),
        config=guard.config,
        consumer="c",
        clock=lambda: datetime.now(UTC),
        held=guard.held,
    )
    intake._loop.max_in_flight = 4  # the budget a storm of new groups would fill
    team = [as_group(f"lost-team-{n}", team="rocm") for n in range(6)]
    for payload in [*team, known, as_group("lost-new")]:
        body = json.dumps(payload).encode()
        await stream.append(parse_notification("grafana", payload), body, 0.0)
    await guard.at_start_of_term()
    stop = asyncio.Event()
    running = asyncio.create_task(intake.run(stop))
    try:
        store = IncidentStore(redis, "qp")
        ids = await eventually(lambda: opened(store, 2), what="the two groups applied")
        assert ids == ["3", "8"], "the found group in its root, the new one above #7"
        going_on = await store.load("3")
        assert going_on.thread is not None and going_on.thread.ts == found_ts
    finally:
        stop.set()
        await guard.end_of_term()
        await running


async def opened(store: IncidentStore, count: int) -> list[str] | None:
    ids = sorted(await store.open_ids(), key=int)
    return ids if len(ids) >= count else None


async def test_an_opening_waits_through_a_failed_read_for_the_next_and_never_takes_a_used_number(
    guard: StateGuard, slack: Slack
) -> None:
    """`auth.test` fails, so the read ends before a page: an incident about to open keeps
    waiting (the sequence still stands at 0, below #5 in Slack) until the next tick's read knows
    the numbering."""
    await root(guard, "5", "g-a")
    slack.emulator.fail_next("auth.test", status=500)
    await guard.at_start_of_term()
    opening = asyncio.create_task(guard.held(None))
    await eventually(
        lambda: guard.read is not None and guard.read.task is not None and guard.read.task.done(),
        what="the read failed",
    )
    assert not opening.done(), "no number before Slack told which are used"
    await guard.tick()
    await asyncio.wait_for(opening, 5)
    assert (await guard.marker.kept())[1] == 5
    assert lost(guard) == 1
    await guard.end_of_term()


def intake_of(guard: StateGuard, redis: Redis, consumer: str) -> Intake:
    return Intake(
        NotificationStream(redis, "qp"),
        IncidentStore(redis, "qp"),
        Telemetry(),
        config=guard.config,
        consumer=consumer,
        clock=lambda: datetime.now(UTC),
        held=guard.held,
    )


@pytest.mark.parametrize("waits_for", ["the numbering", "its channel's roots"])
async def test_a_term_ending_mid_read_leaves_a_held_opening_to_the_next_leader(
    waits_for: str, replica: Callable[..., StateGuard], redis: Redis, slack: Slack
) -> None:
    """A rolling restart ends the term while a notification waits for the read (the lease
    still held, so a commit would pass): it is neither opened under a number Slack shows nor
    beside its root, but left to the next leader, whose read numbers it or finds its root."""
    guard = replica(routed=True)
    guard.hold_s = 30.0
    await root(guard, "5", "g-main")
    if waits_for == "the numbering":
        payload = as_group("lost-new")
        slack.emulator.stall("conversations.history", 30)
    else:  # the team channel's newest page is read (#7), its deeper ones, with the root, fail
        payload = as_group("lost-team", team="rocm")
        group = delivery_of(parse_notification("grafana", payload)).group_hash
        team_root = await root(guard, "3", group, TEAM)
        chatter(slack.emulator, TEAM, 1000)
        await root(guard, "7", "g-team-old", TEAM)
        deeper = {"when": lambda p: p.get("channel") == TEAM and bool(p.get("cursor"))}
        slack.emulator.fail_next("conversations.history", status=500, count=1000, **deeper)
    stream = NotificationStream(redis, "qp")
    await stream.ensure_group()
    await stream.append(parse_notification("grafana", payload), json.dumps(payload).encode(), 0.0)
    store = IncidentStore(redis, "qp")
    deposed = asyncio.Event()
    intake = intake_of(guard, redis, "old")
    try:
        await guard.at_start_of_term(deposed)
        running = asyncio.create_task(intake.run(deposed))
        await eventually(lambda: intake._loop._parked == 1, what="the opening held")
        deposed.set()
        await asyncio.wait_for(running, 5)
        assert await store.open_ids() == [], "nothing opened by the leader that stopped"
    finally:
        slack.emulator.stall("conversations.history", 0)
        slack.emulator.clear_faults()
        deposed.set()
        await guard.end_of_term()

    successor, stop = replica(routed=True), asyncio.Event()
    await successor.at_start_of_term(stop)
    running = asyncio.create_task(intake_of(successor, redis, "new").run(stop, take_over_ms=0))
    try:
        ids = await eventually(lambda: opened(store, 1), what="the notification applied")
        if waits_for == "the numbering":
            assert ids == ["6"], "numbered above the root Slack shows"
        else:
            assert ids == ["3"], "one thread: it goes on in its root"
            thread = (await store.load("3")).thread
            assert thread is not None and thread.ts == team_root
    finally:
        stop.set()
        await successor.end_of_term()
        await running


async def test_a_first_start_beside_a_routed_channel_the_bot_is_not_in_begins_at_once(
    replica: Callable[..., StateGuard], redis: Redis, slack: Slack, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack refuses the team channel for good (not_in_channel): the first check sets the
    marker, says once what to do, and the first incident is #1; Slack is not read again."""
    guard = replica(routed=True)
    slack.emulator.add_channel(TEAM, member=False)
    await guard.check()
    assert (await guard.marker.read()) is not None, "the state begins with the first check"
    assert caplog.text.count("invite the bot to it") == 1
    assert "C0TEAMQ (not_in_channel)" in caplog.text
    calls = len(slack.emulator.calls("conversations.history"))
    for _ in range(3):
        await guard.tick()
    assert len(slack.emulator.calls("conversations.history")) == calls, "not read again"
    assert caplog.text.count("invite the bot to it") == 1, "said once"

    payload = as_group("first-alert")
    stream, store = NotificationStream(redis, "qp"), IncidentStore(redis, "qp")
    await stream.ensure_group()
    await stream.append(parse_notification("grafana", payload), json.dumps(payload).encode(), 0.0)
    stop = asyncio.Event()
    running = asyncio.create_task(intake_of(guard, redis, "c").run(stop))
    try:
        assert await eventually(lambda: opened(store, 1), what="the alert opened") == ["1"]
    finally:
        stop.set()
        await running


async def test_a_first_start_reads_again_only_the_channel_that_kept_failing(
    replica: Callable[..., StateGuard], slack: Slack
) -> None:
    """The team channel answers 5xx until the read gives it up: the verdict waits for it, read
    again alone after a back-off (not the whole history on every tick)."""
    guard = replica(routed=True)
    guard.give_up_after, guard.unread_again_s = 1, 0.3
    team_history_fails(slack, times=1)
    await guard.check()
    assert (await guard.marker.read()) is None, "no verdict while a channel may show a root"
    calls = len(slack.emulator.calls("conversations.history"))
    await guard.tick()
    assert len(slack.emulator.calls("conversations.history")) == calls, "within the back-off"

    async def read_again() -> bool:
        await guard.check()
        return await guard.marker.read() is not None

    await eventually(read_again, what="the team channel read again")
    again = slack.emulator.calls("conversations.history")[calls:]
    assert [c.params.get("channel") for c in again] == [TEAM], "only the channel that failed"


async def test_a_leader_reading_on_after_the_loss_was_said_holds_no_opening_and_adds_no_gap(
    replica: Callable[..., StateGuard], slack: Slack
) -> None:
    """The team channel keeps failing, so the first leader numbers above its guess (#5 read,
    and 1000 more) and says the loss; the lead changes mid-read. The next leader reads on: a
    new incident goes on at once, still above #1005, not held again nor pushed to #2005."""
    first = replica(routed=True)
    first.number_hold_s = 0.3
    await root(first, "5", "g-main")
    team_history_fails(slack, times=1000)
    await first.at_start_of_term()
    await asyncio.wait_for(first.held(None), 5)
    await eventually(lambda: lost(first) == 1, what="the loss said")
    await first.end_of_term()
    assert (await first.marker.kept())[1] == 1005

    successor = replica(routed=True)
    successor.number_hold_s = 0.3
    await successor.at_start_of_term()
    try:
        await asyncio.wait_for(successor.held(None), 0.2)
        await eventually(
            lambda: (
                successor.read is not None
                and asyncio.get_running_loop().time() > successor.read.began + 0.5
            ),
            what="the number hold over",
        )
        assert (await successor.marker.kept())[1] == 1005, "no second gap"
        assert lost(successor) == 0, "said once, by the first leader"
    finally:
        await successor.end_of_term()


async def test_a_number_hold_ending_as_a_page_says_the_loss_says_it_once(
    guard: StateGuard, redis: Redis
) -> None:
    """The number hold ends during a slow read and its guess raises the numbering, Redis slow to
    answer; meanwhile a page numbers the read and says the loss. The guess, answered, neither
    takes the read back to numbered nor says the loss again: one error, one count."""
    await guard.check()
    gate, writing = asyncio.Event(), asyncio.Event()
    record_loss = guard.marker.record_loss

    async def slow_numbering(now: float | None, **kwargs: Any) -> int:
        if now is None:  # the guess's raise of the numbering
            writing.set()
            await gate.wait()
        return await record_loss(now, **kwargs)

    guard.marker.record_loss = slow_numbering  # type: ignore[method-assign]
    read = Read(Scan([CHANNEL], Found("", 0.0), 0.0, 1.0, 8), began=0.0)
    guard.read, guard.phase, guard.number_hold_s = read, Phase.READING, 0.0
    guessing = asyncio.create_task(guard._guess(read))
    await asyncio.wait_for(writing.wait(), 5)
    guard._enter(Phase.NUMBERED)  # as a page's step does, then says the loss
    await guard._say_lost(read, datetime.now(UTC).timestamp())
    gate.set()
    await asyncio.wait_for(guessing, 5)
    assert guard.phase is Phase.SAID
    assert lost(guard) == 1, "said once"
