"""The app's pacing, in the leader's memory: a 429's hold waited out, a slot taken once per
interval however many callers compete, and a deadline that refuses with the time to wait. Each
timing assertion is a bound that load can only make safer (a slot is never taken early)."""

from __future__ import annotations

import asyncio
import time

from bot.pacing import FORGET_AFTER, Pacing

EDIT = "chat.update"


async def test_a_hold_holds_only_its_method_and_refuses_past_a_deadline() -> None:
    pacing = Pacing()
    pacing.hold("chat.postMessage", 30)
    pacing.hold("chat.postMessage", 5)  # a shorter hold does not end a longer one

    assert 29 < pacing.held_for("chat.postMessage") <= 30
    assert pacing.held_for(EDIT) == 0, "other methods are not held"
    assert 29 < await pacing.wait_for_slot("chat.postMessage", 0, within_s=1) <= 30


async def test_a_short_hold_is_waited_out_before_the_slot_is_taken() -> None:
    pacing = Pacing()
    pacing.hold(EDIT, 0.3)
    started = time.monotonic()

    assert await pacing.wait_for_slot(EDIT, 5000, within_s=30) == 0, "taken"
    assert time.monotonic() - started >= 0.3
    assert pacing.held_for(EDIT) == 0


async def test_competing_callers_take_a_slot_once_per_interval() -> None:
    pacing = Pacing()
    started = time.monotonic()
    turns = await asyncio.gather(
        pacing.wait_for_slot(EDIT, 1000, within_s=0), pacing.wait_for_slot(EDIT, 1000, within_s=0)
    )
    assert sorted(away_s == 0 for away_s in turns) == [False, True], "one slot, one taker"
    assert 0 < max(turns) <= 1, "told when the slot frees"

    # Both wait their turn: the next slot after the interval, then one more after another.
    taken_at = []

    async def take() -> None:
        assert await pacing.wait_for_slot(EDIT, 300, within_s=30) == 0
        taken_at.append(time.monotonic() - started)

    await asyncio.gather(take(), take())
    assert min(taken_at) >= 1.0, "not before the 1 s slot ended"
    assert max(taken_at) - min(taken_at) >= 0.3, "one 300 ms slot apart"


async def test_a_method_without_a_slot_is_paced_by_holds_alone() -> None:
    pacing = Pacing()
    turns = [await pacing.wait_for_slot("chat.getPermalink", 0, within_s=0) for _ in range(3)]
    assert turns == [0, 0, 0]


async def test_a_429_after_an_answered_call_spaces_the_method_for_every_caller_from_then_on() -> (
    None
):
    """Slack answered a history read at 0 s and refused the next until 60 s: its calls are a
    minute apart (a distributed app's Tier 1), for the next read after a loss and for the send
    path's lookups alike, however small the interval they ask for."""
    now = [100.0]
    pacing = Pacing(clock=lambda: now[0])
    history = "conversations.history"
    pacing.answered(history, 100.0)
    now[0] = 101.0
    pacing.refused(history, 59)
    assert pacing.spacing_s(history) == 60
    now[0] = 160.0  # the hold is over: one call, then the next a minute later
    assert await pacing.wait_for_slot(history, 0, within_s=0) == 0
    assert await pacing.wait_for_slot(history, 1200, within_s=0) == 60
    assert pacing.spacing_s("chat.update") == 0, "other methods keep their own pace"


def test_a_429_after_a_quiet_spell_or_of_a_method_of_known_tier_spaces_nothing() -> None:
    """A 429 ten minutes after the last answer (another reader used the budget) is waited out,
    not taken as the pace; nor is one of `views.publish` (App Home publishes a view a minute)."""
    now = [0.0]
    pacing = Pacing(clock=lambda: now[0])
    for method in ("conversations.history", "views.publish"):
        pacing.answered(method, 0.0)
    now[0] = 600.0
    pacing.refused("conversations.history", 30)
    assert pacing.spacing_s("conversations.history") == 0
    assert pacing.held_for("conversations.history") == 30
    pacing.answered("views.publish", 600.0)
    now[0] = 601.0
    pacing.refused("views.publish", 59)
    assert pacing.spacing_s("views.publish") == 0


def test_a_learned_pace_is_forgotten_after_a_run_of_answered_calls() -> None:
    now = [0.0]
    pacing = Pacing(clock=lambda: now[0])
    history = "conversations.history"
    pacing.answered(history, 0.0)
    now[0] = 1.0
    pacing.refused(history, 29)
    assert pacing.spacing_s(history) == 30
    for n in range(FORGET_AFTER - 1):
        pacing.answered(history, 30.0 * (n + 1))
    assert pacing.spacing_s(history) == 30, "kept while calls go at that pace"
    pacing.answered(history, 30.0 * FORGET_AFTER)
    assert pacing.spacing_s(history) == 0, "forgotten after a run of answered calls"


async def test_at_a_learned_pace_the_next_call_waits_a_whole_spacing_from_the_answer() -> None:
    """Slack counts a call somewhere between its sending and its answer: a read sent at 200 s
    and answered at 200.4 s (a slow network, a busy Slack) takes the next slot at 230.4 s,
    not 230 s, so the next call cannot reach Slack less than the pace after this one did."""
    now = [100.0]
    pacing = Pacing(clock=lambda: now[0])
    history = "conversations.history"
    pacing.answered(history, 100.0)
    now[0] = 101.0
    pacing.refused(history, 29)
    now[0] = 200.0
    assert await pacing.wait_for_slot(history, 0, within_s=0) == 0
    now[0] = 200.4
    pacing.answered(history, 200.0)
    assert await pacing.wait_for_slot(history, 0, within_s=0) == 30
