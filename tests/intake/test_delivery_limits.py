"""GitHub's deliveries taken by one replica, on a clock the test moves: a second's worth at once
then one per interval, Retry-After in whole seconds, a delivery past the concurrency refused at
once and taken again when one is done, and one summary line a minute however many are refused."""

from __future__ import annotations

import logging

import pytest

from bot.intake.delivery_limits import DeliveryLimits
from bot.pacing import Pacing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limits(rate: float, concurrency: int = 100) -> tuple[DeliveryLimits, Clock]:
    clock = Clock()
    return DeliveryLimits(rate, concurrency, pacing=Pacing(clock)), clock


def taken(limits: DeliveryLimits) -> bool:
    refusal = limits.admit()
    if refusal is None:
        limits.done()
    return refusal is None


def test_a_seconds_worth_at_once_then_one_per_interval() -> None:
    four, clock = limits(4)
    assert [taken(four) for _ in range(5)] == [True] * 4 + [False]
    refusal = four.admit()
    assert refusal is not None
    assert (refusal.status, refusal.reason, refusal.retry_after_s) == (429, "rate_limited", 1)
    assert "GITHUB_WEBHOOK_RATE" in refusal.message and "4 deliveries a second" in refusal.message
    clock.now += 0.25
    assert [taken(four), taken(four)] == [True, False]
    clock.now += 1.0
    assert [taken(four) for _ in range(5)] == [True] * 4 + [False], "no more than the burst"


@pytest.mark.parametrize(("rate", "retry_after_s"), [(0.25, 4), (0.4, 3), (1, 1)])
def test_retry_after_is_whole_seconds_to_the_next_slot(rate: float, retry_after_s: int) -> None:
    slow, _ = limits(rate)
    assert taken(slow)
    refusal = slow.admit()
    assert refusal is not None and refusal.retry_after_s == retry_after_s


def test_past_the_concurrency_a_delivery_is_refused_and_one_done_frees_a_place() -> None:
    two, _ = limits(1000, concurrency=2)
    assert two.admit() is None and two.admit() is None
    refusal = two.admit()
    assert refusal is not None
    assert (refusal.status, refusal.reason, refusal.retry_after_s) == (503, "busy", 1)
    assert "GITHUB_WEBHOOK_CONCURRENCY" in refusal.message and "2 deliveries" in refusal.message
    two.done()
    assert two.admit() is None


def test_refusals_are_summed_up_in_a_line_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.intake.delivery_limits")
    one, clock = limits(1, concurrency=1)
    assert one.admit() is None  # in progress, and the second's delivery taken
    for _ in range(500):
        assert one.admit() is not None
    clock.now += 30
    for _ in range(10):
        assert one.admit() is not None  # busy: the one in progress still is
    one.done()
    clock.now += 30
    assert one.admit() is None
    assert one.admit() is not None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("github webhook: deliveries refused in the last 0 s: 1 over")
    assert lines[1].startswith("github webhook: deliveries refused in the last 60 s: 500 over")
    assert "10 with GITHUB_WEBHOOK_CONCURRENCY (1) in progress (503)" in lines[1]
