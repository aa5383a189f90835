"""The one backoff: every wait between half its exponential step and the step, never above the
cap, whatever is drawn; the steps double from the first; waits in a row differ (replicas that
failed together come back apart)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.pacing import Backoff, step_after, wait_after

# 1.0 itself is never drawn (random.random is [0, 1)): its neighbour below is.
DRAWS = st.floats(0.0, 1.0, exclude_max=True)
SECONDS = st.floats(0.001, 3600.0)


@given(st.integers(-3, 200), SECONDS, SECONDS, DRAWS)
def test_every_wait_is_within_half_its_step_and_the_step_never_above_the_cap(
    failures: int, first: float, maximum: float, drawn: float
) -> None:
    step = step_after(failures, first=first, maximum=maximum)
    wait = wait_after(failures, first=first, maximum=maximum, draw=lambda: drawn)
    assert step / 2 <= wait <= step <= maximum
    assert step == min(first * 2 ** (max(failures, 1) - 1), maximum)


@given(st.lists(DRAWS, min_size=1, max_size=40), SECONDS, SECONDS)
def test_a_backoff_doubles_from_its_first_up_to_its_cap_and_starts_again_when_reset(
    draws: list[float], first: float, maximum: float
) -> None:
    drawn = iter(draws + draws)
    backoff = Backoff(maximum, first=first, draw=lambda: next(drawn))
    for _ in range(2):
        for failures, _ in enumerate(draws, start=1):
            step = step_after(failures, first=min(first, maximum), maximum=maximum)
            assert step / 2 <= backoff.next() <= step <= maximum
        backoff.reset()


def test_waits_in_a_row_are_spread_not_the_same() -> None:
    waits = {wait_after(3, first=10, maximum=900) for _ in range(50)}
    assert len(waits) > 40 and all(20 <= wait <= 40 for wait in waits)
