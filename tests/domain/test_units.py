"""Plain quantities as text: numbers, minutes, durations and changes, in the words every message
uses."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.units import change, duration, minutes, number


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (14, "14"),
        (14.0, "14"),
        (0, "0"),
        (2.5, "2.5"),
        (2.25, "2.2"),
        (2.96, "3"),
        (-3.0, "-3"),
        (-0.04, "0"),
        (0.05, "0.1"),
        (1234567.0, "1234567"),
        (float("inf"), "inf"),
    ],
)
def test_number(value: float, expected: str) -> None:
    assert number(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (114, "114 min"),
        (0.5, "0.5 min"),
        (16.21, "16 min"),  # a job duration averaged over runs: ~16.21 min told too much
        (9.94, "9.9 min"),
        (9.96, "10 min"),
        (130.5, "130 min"),
        (-12.4, "-12 min"),
    ],
)
def test_minutes(value: float, expected: str) -> None:
    assert minutes(value) == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_minutes_never_tell_more_than_a_tenth_and_none_past_ten(value: float) -> None:
    amount = minutes(value).removesuffix(" min")
    assert "e" not in amount
    decimals = amount.partition(".")[2]
    assert len(decimals) <= 1
    if abs(value) >= 10:
        assert decimals == ""


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        (timedelta(seconds=0), "0 s"),
        (timedelta(seconds=45), "45 s"),
        (timedelta(seconds=59.9), "59 s"),
        (timedelta(minutes=1), "1 min"),
        (timedelta(minutes=18, seconds=40), "18 min"),
        (timedelta(hours=1), "1 h"),
        (timedelta(hours=1, minutes=18), "1 h 18 min"),
        (timedelta(hours=23, minutes=59), "23 h 59 min"),
        (timedelta(days=1), "1 d"),
        (timedelta(days=2, hours=3, minutes=20), "2 d 3 h"),
        (timedelta(minutes=-5), "0 s"),
    ],
)
def test_duration(span: timedelta, expected: str) -> None:
    assert duration(span) == expected


@pytest.mark.parametrize(
    ("current", "previous", "unit", "expected"),
    [
        (114, 102, "min", "▲ +12 min"),
        (90, 102, "min", "▼ -12 min"),
        (14, 16, "", "▼ -2"),
        (14, 14, "", "no change"),
        (14.02, 14, "", "no change"),
        (14.5, 14, "", "▲ +0.5"),
        (14, None, "", None),
        (None, 14, "", None),
    ],
)
def test_change(
    current: float | None, previous: float | None, unit: str, expected: str | None
) -> None:
    assert change(current, previous, unit) == expected
