"""Early warnings in a real redis-server, as this release and a 0.26 replica beside it (or after a
rollback) read them: 0.26 refuses a warning with a field it does not know, takes it for gone and
puts its scale-up back at once, so the scale-ups themselves are kept beside it."""

from __future__ import annotations

import json

from redis.asyncio import Redis

from bot.domain.early_warning import ScaledFrom, WarningState
from bot.storage.early_warning import KEEP_S, WarningStore
from tests.support.store import KEYS

# `WarningState`'s fields in 0.26.0 (`git show 4c0f27d:bot/domain/early_warning.py`): its `load`
# passes every stored field to the dataclass and reads the warning as gone on any other.
FIELDS_026 = {
    "runner_type",
    "channel",
    "uid",
    "phase",
    "text",
    "warned_at",
    "updated_at",
    "version",
    "shown",
    "ts",
    "incident_id",
    "incident_link",
    "by",
    "until",
    "held_since",
    "hold_runners",
    "scalable",
    "scaled",
}
PUT_BACK = ScaledFrom("linux|minRunners", "alice scaled linux by +5.", "It goes back at 10:30.")
LEFT = ScaledFrom("", "bob scaled linux by +2.")


def scaled_up() -> WarningState:
    state = WarningState.raised("linux", "C1", "linux: queue building", 1.0)
    return state.changed(2.0, scaled=(PUT_BACK, LEFT))


async def test_a_warning_scaled_from_is_stored_as_026_reads_it_and_read_back_whole(
    redis: Redis,
) -> None:
    store, state = WarningStore(redis, KEYS), scaled_up()
    assert await store.save(state)
    stored = json.loads(await redis.get(KEYS.warning("linux")))
    assert set(stored) <= FIELDS_026, "0.26 would drop the warning and put its scale-up back"
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


async def test_words_a_026_replica_rewrote_are_read_alone(redis: Redis) -> None:
    store, state = WarningStore(redis, KEYS), scaled_up()
    assert await store.save(state)
    stored = json.loads(await redis.get(KEYS.warning("linux")))
    stored["scaled"] = (
        "alice scaled linux by +5. It went back at 10:30: the queue stopped building."
    )
    stored["hold_runners"] = 4
    await redis.set(KEYS.warning("linux"), json.dumps(stored), keepttl=True)

    said = (ScaledFrom("", stored["scaled"]),)
    read = await store.get("linux")
    assert read is not None and read.scaled == said
    warnings = await store.all()
    assert list(warnings) == ["linux"] and warnings["linux"].scaled == said


async def test_a_new_warning_leaves_no_scale_ups_of_the_last_beside_it(redis: Redis) -> None:
    store = WarningStore(redis, KEYS)
    assert await store.save(scaled_up())
    again = WarningState.raised("linux", "C1", "linux: queue building", 3.0)
    assert await store.save(again)
    assert await store.get("linux") == again
    assert await redis.exists(KEYS.warning_scaled("linux")) == 0
