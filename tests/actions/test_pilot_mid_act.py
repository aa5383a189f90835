"""A leader that stopped mid-act, as the next leader meets it on the stored pilot state: the
act's mark outlives looks that cannot see where it was made (a stale first reading), so the
first look that can pauses the type for a person, whatever the readings ask by then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from redis.asyncio import Redis

from bot.actions.pilot import ACTING, NO_INCIDENT, Piloting, Within
from bot.domain.reading.judgement import Judgement
from bot.domain.scale.pilot import Hold, Piloted
from bot.domain.scale.scaling import Policy
from bot.storage.keys import Keys
from bot.storage.pilot import PilotStore

T = datetime(2026, 11, 29, 5, tzinfo=UTC)
POLICY = Policy(up_to=60, step=20, hold_s=10, cooldown_s=600)


async def test_a_stopped_leaders_act_is_met_by_the_first_look_that_finds_its_incident(
    redis: Redis,
) -> None:
    store = PilotStore(redis, Keys("qpmidact"))
    hold = Hold(since=T, asks=((T, 6),))
    # What the stopped leader kept before its call, and the act's claim it made.
    acting = Piloted(why=f"{ACTING}the advice asked +6 for 10 s", at=T, hold=hold)
    assert await store.claim_act("7", "linux", f"1@{T.timestamp():.0f}")
    piloting = Piloting.__new__(Piloting)
    piloting.store = store
    piloting.config = SimpleNamespace(pilot_enabled=True)  # type: ignore[assignment]
    piloting.acting = SimpleNamespace(clock=lambda: T)  # type: ignore[assignment]

    # The next leader's first look: its reading stale, no incident shows the type.
    later = T + timedelta(seconds=20)
    kept = await piloting._look("linux", POLICY, acting, None, None, later, [])
    assert kept.why.startswith(ACTING) and kept.hold == hold, kept
    assert await store.paused("linux") is None

    # A fresh reading shows incident 7 asking for more (or already showing the act): paused.
    judged = Judgement(at=later, queued=40.0, runners=20, needed=6, registered=20.0)
    found = Within("7", "incident 7", judged, [])
    looked = await piloting._look("linux", POLICY, kept, None, found, later, [])
    paused = await store.paused("linux")
    assert paused is not None and "stopped mid-act (incident 7)" in paused.why, paused
    assert not looked.why.startswith(ACTING), looked


async def test_with_no_act_begun_a_look_without_an_incident_says_it_waits(redis: Redis) -> None:
    store = PilotStore(redis, Keys("qpmidact2"))
    piloting = Piloting.__new__(Piloting)
    piloting.store = store
    piloting.config = SimpleNamespace(pilot_enabled=True)  # type: ignore[assignment]
    state = Piloted(why="holding: the advice asked +6 for 4 s", at=T)
    looked = await piloting._look("linux", POLICY, state, None, None, T, [])
    assert looked.why == NO_INCIDENT and looked.hold is None
