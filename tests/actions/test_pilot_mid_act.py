"""A leader that stopped mid-act, as the next leader meets it on the stored pilot state: the
act's claim is kept with the mark, so the next leader's first look pauses the type for a person,
whatever its readings show (the act's effect already, or nothing fresh enough to show the
incident); an act released or recorded before the stop pauses nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from redis.asyncio import Redis

from bot.actions.pilot import ACTING, NO_INCIDENT, Piloting, Within
from bot.actions.scale import made
from bot.backends.scale import Undo
from bot.domain.incident.incidents import PILOT
from bot.domain.reading.judgement import Judgement
from bot.domain.scale.pilot import Hold, Piloted
from bot.domain.scale.scaling import Policy
from bot.storage.keys import Keys
from bot.storage.pilot import PilotStore

T = datetime(2026, 11, 29, 5, tzinfo=UTC)
POLICY = Policy(up_to=60, step=20, hold_s=10, cooldown_s=600)
CLAIM = f"1@{T.timestamp():.0f}"  # incident 7's first act, for the hold since T
# What the stopped leader kept before its call.
MID_ACT = Piloted(
    why=f"{ACTING}the advice asked +6 for 10 s",
    at=T,
    hold=Hold(since=T, asks=((T, 6),)),
    acting=f"7 {CLAIM}",
)
LATER = T + timedelta(seconds=20)


def piloting(redis: Redis, prefix: str) -> Piloting:
    pilot = Piloting.__new__(Piloting)
    pilot.store = PilotStore(redis, Keys(prefix))
    pilot.config = SimpleNamespace(pilot_enabled=True)  # type: ignore[assignment]
    pilot.acting = SimpleNamespace(clock=lambda: LATER)  # type: ignore[assignment]
    return pilot


def incident_7(*mine: object) -> Within:
    judged = Judgement(at=LATER, queued=40.0, runners=20, needed=6, registered=20.0)
    return Within("7", "incident 7", judged, list(mine))  # type: ignore[arg-type]


async def test_the_next_leaders_first_look_pauses_even_with_no_fresh_reading(redis: Redis) -> None:
    pilot = piloting(redis, "qpmidact1")
    assert pilot.store is not None
    assert await pilot.store.claim_act("7", "linux", CLAIM)
    # Its reading stale, no incident shows the type: the claim alone says what happened.
    looked = await pilot._look("linux", POLICY, MID_ACT, None, None, LATER, [])
    paused = await pilot.store.paused("linux")
    assert paused is not None and "stopped mid-act (incident 7)" in paused.why, paused
    assert not looked.why.startswith(ACTING) and not looked.acting and looked.hold is None


async def test_an_act_released_before_the_stop_pauses_nothing_and_the_hold_starts_again(
    redis: Redis,
) -> None:
    pilot = piloting(redis, "qpmidact2")
    assert pilot.store is not None  # the act never claimed, or released: nothing was changed
    looked = await pilot._look("linux", POLICY, MID_ACT, None, None, LATER, [])
    assert await pilot.store.paused("linux") is None
    assert looked.why == NO_INCIDENT and looked.hold is None and not looked.acting


async def test_an_act_recorded_before_the_stop_pauses_nothing(redis: Redis) -> None:
    pilot = piloting(redis, "qpmidact3")
    assert pilot.store is not None
    assert await pilot.store.claim_act("7", "linux", CLAIM)
    act = made("linux", 6, PILOT, T, Undo("maxRunners", 20, 26), pilot=True)
    looked = await pilot._look("linux", POLICY, MID_ACT, None, incident_7(act), LATER, [])
    assert await pilot.store.paused("linux") is None
    assert not looked.acting and "+6 at 05:00 UTC in incident 7" in looked.last, looked
