"""Plain quantities as text: numbers, minutes, durations and changes, in the words every message
uses."""

from __future__ import annotations

from datetime import timedelta

import pytest

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


def test_minutes() -> None:
    assert minutes(114) == "114 min"
    assert minutes(0.5) == "0.5 min"


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
