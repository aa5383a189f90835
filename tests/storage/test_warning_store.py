"""Early warnings in a real redis-server: a warning in the form a rollback reads (its scale-ups in
words, the scale-ups themselves kept beside it), read back whole."""

from __future__ import annotations

import json
from dataclasses import replace

from redis.asyncio import Redis

from bot.domain.reading.early_warning import WarningState
from bot.domain.scale.scale_ups import ScaleUp
from bot.storage.early_warning import KEEP_S, WarningStore
from tests.support.store import KEYS

PUT_BACK = ScaleUp(
    runner_type="linux",
    added=5,
    by="alice",
    back="linux|minRunners",
    said="alice scaled linux by +5.",
    fate="It goes back at 10:30.",
)
LEFT = ScaleUp(runner_type="linux", added=2, by="bob", said="bob scaled linux by +2.")


def scaled_up() -> WarningState:
    state = WarningState.raised("linux", "C1", "linux: queue building", 1.0)
    return state.changed(2.0, scaled=(PUT_BACK, LEFT))


async def test_a_warning_scaled_from_is_stored_in_words_and_read_back_whole(
    redis: Redis,
) -> None:
    store, state = WarningStore(redis, KEYS), scaled_up()
    assert await store.save(state)
    stored = json.loads(await redis.get(KEYS.warning("linux")))
    assert stored["scaled"] == (
        "alice scaled linux by +5. It goes back at 10:30. · bob scaled linux by +2."
    )
    assert await store.get("linux") == state
    assert await store.all() == {"linux": state}

    await store.record_post(state, "17.5")
    posted = await store.get("linux")
    assert posted is not None and (posted.ts, posted.scaled) == ("17.5", state.scaled)
    for key in (KEYS.warning("linux"), KEYS.warning_scaled("linux")):
        assert KEEP_S - 5 <= await redis.ttl(key) <= KEEP_S, "kept and forgotten together"


async def test_a_new_warning_leaves_no_scale_ups_of_the_last_beside_it(redis: Redis) -> None:
    store = WarningStore(redis, KEYS)
    assert await store.save(scaled_up())
    again = WarningState.raised("linux", "C1", "linux: queue building", 3.0)
    assert await store.save(again)
    assert await store.get("linux") == again
    assert await redis.exists(KEYS.warning_scaled("linux")) == 0


async def test_what_a_change_saved_is_its_last_attempts(redis: Redis) -> None:
    """A change whose save lost a race is tried again on what is stored now: if that attempt
    finds nothing to do (the warning was replaced), nothing was saved, and the caller (a scale-up
    noted on the warning, a dry run's act) must not say it was kept."""
    store, state = WarningStore(redis, KEYS), scaled_up()
    assert await store.save(state)
    seen: list[WarningState | None] = []

    def lost_then_nothing(now: WarningState | None) -> WarningState | None:
        seen.append(now)
        # First a write no newer than the stored version (what a lost race writes): refused.
        return replace(now, text="stale") if now and len(seen) == 1 else None

    assert await store.save_fresh("linux", lost_then_nothing) is None
    assert len(seen) == 2 and await store.get("linux") == state
    noted = await store.save_fresh("linux", lambda now: now and now.with_scaled((LEFT,)))
    assert noted and await store.get("linux") == noted and noted.scaled == (LEFT,)
