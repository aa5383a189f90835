"""A put-back followed to the fleet: back once the runners read are within the bound put back;
at the deadline, still above it or not known; in the words its reply says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.scale.put_back_seen import Back, bounding, landed
from bot.domain.scale.scaling import Capacity, ScaleTarget
from bot.render.follow_ups import back_said

TARGET = ScaleTarget("linux.2xlarge", "arc-runners/linux", cap=20)
MAX = Back(TARGET, "maxRunners", 20)
SAID = datetime(2026, 3, 4, 15, 10, tzinfo=UTC)
DUE = SAID + timedelta(minutes=10)
SPARES = "ARC removes only runners without a job, so no running job was cut"


def at(minutes: float) -> datetime:
    return SAID + timedelta(minutes=minutes)


def test_runners_within_the_bound_are_back_with_what_spared_the_jobs() -> None:
    seen = landed(MAX, Capacity(current=20), scaler="ARC", now=at(4), due=DUE)
    assert seen is not None and seen.back is True
    assert back_said(MAX, seen, SAID, SPARES) == (
        "maxRunners of linux.2xlarge back to 20 at 15:10 UTC: 20 runners by 15:14 UTC; "
        "ARC removes only runners without a job, so no running job was cut"
    )


def test_above_the_bound_is_looked_at_again_until_the_deadline_then_said() -> None:
    assert landed(MAX, Capacity(current=26), scaler="ARC", now=at(9), due=DUE) is None
    seen = landed(MAX, Capacity(current=26), scaler="ARC", now=at(10), due=DUE)
    assert seen is not None and seen.back is False
    assert back_said(MAX, seen, SAID, SPARES) == (
        "maxRunners of linux.2xlarge back to 20 at 15:10 UTC: still 26 runners after 10 min"
    )


def test_an_unread_scaler_is_not_known_at_the_deadline_never_back() -> None:
    failed = "ARC answered 403: forbidden"
    assert landed(MAX, failed, scaler="ARC", now=at(1), due=DUE) is None
    seen = landed(MAX, failed, scaler="ARC", now=at(10), due=DUE)
    assert seen is not None and seen.back is None
    assert back_said(MAX, seen, SAID).endswith(
        "at 15:10 UTC: not known: ARC answered 403: forbidden"
    )
    # ARC taking a spec on reads no runners (phase Pending): never read as back.
    pending = landed(MAX, Capacity(current=None), scaler="ARC", now=at(10), due=DUE)
    assert (
        pending is not None and pending.back is None and pending.why == "ARC reads no runner count"
    )
    nothing = landed(MAX, None, scaler="the scaler webhook", now=at(10), due=DUE)
    assert nothing is not None and nothing.why == "the scaler webhook reads no runners"


def test_an_unset_bound_bounds_nothing() -> None:
    unset = Back(TARGET, "maxRunners", None)
    seen = landed(unset, Capacity(current=40), scaler="ARC", now=at(1), due=DUE)
    assert seen is not None and seen.back is True
    assert back_said(unset, seen, SAID).startswith("maxRunners of linux.2xlarge unset again at")


def test_the_bound_of_fields_put_back_together_is_the_one_put_back_last() -> None:
    floor = Back(TARGET, "minRunners", 0)
    other = Back(ScaleTarget("gpu", "arc-runners/gpu", cap=4), "minRunners", 2)
    order = ("minRunners", "maxRunners")
    assert bounding([floor, MAX, other], order) == [MAX, other]
    assert bounding([MAX, floor], order) == [MAX]
    assert bounding([floor], order) == [floor]
