"""An incident's scale-ups per runner type, as every surface tells them: by people and by the
pilot, how many came up, and the minutes from the alert to added capacity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.incident.incidents import Event, Incident
from bot.domain.scale.scale_record import Acts, TypeScaled, alert_fired, scale_record
from bot.domain.scale.scale_ups import ScaleUp

FIRED = datetime(2026, 11, 23, 13, 56, tzinfo=UTC)
BIG, GPU = "linux.2xlarge", "linux.g5.4xlarge.nvidia.gpu"
PILOT = "queuepilot (policy)"


def at(mins: float) -> datetime:
    return FIRED + timedelta(minutes=mins)


def act(
    mins: float,
    added: int,
    runner_type: str = BIG,
    *,
    by: str = "alice",
    came: bool | None = None,
    seen: float | None = None,
) -> Event:
    done = ScaleUp(
        runner_type=runner_type,
        added=added,
        by=by,
        at=at(mins),
        pilot=by == PILOT,
        came=came,
        seen_at=at(seen) if seen is not None else None,
    )
    actor = None if by == PILOT else "U1"
    return Event(at=at(mins), kind="scaled", text="Scaled", actor=actor, scale=done)


def incident(*acts: Event) -> Incident:
    return Incident(
        id="7",
        group_key="g",
        group_hash="h",
        source="grafana",
        title="Jobs queueing",
        started_at=FIRED,
        opened_at=FIRED,
        updated_at=at(1),
        alerted_at=at(30),  # a repeat of the alert: not when it fired
        actions=(Event(at=at(1), kind="acknowledged", text="Ack", actor="U1"), *acts),
    )


def test_each_type_counts_people_and_the_pilot_and_what_came_of_them() -> None:
    record = scale_record(
        incident(
            act(4, 7, by=PILOT, came=True, seen=6),
            act(5, 5, came=False, seen=15),
            act(8, 2, GPU, by="bob"),
            act(9, 3, came=True, seen=12),
        )
    )
    assert [r.runner_type for r in record] == [BIG, GPU], "in the order first scaled"
    big, gpu = record
    assert big.pilot == Acts(count=1, runners=7, came=1, capacity_mins=(6.0,))
    assert big.people == Acts(count=2, runners=8, came=1, not_came=1, capacity_mins=(12.0,))
    assert big.capacity_mins == (6.0,), "the first reading that saw any come"
    assert (big.all.count, big.all.came, big.all.not_came, big.all.not_known) == (3, 2, 1, 0)
    assert gpu == TypeScaled(GPU, people=Acts(count=1, runners=2))
    assert gpu.all.not_known == 1 and gpu.capacity_median is None


def test_minutes_count_from_when_the_alert_fired_and_never_below_zero() -> None:
    fired = incident()
    assert alert_fired(fired) == FIRED != fired.notified.at
    early = scale_record(incident(act(-10, 5, came=True, seen=-2)))
    assert early[0].capacity_mins == (0.0,), "from the early warning: there when it fired"


def test_nothing_scaled_is_no_record_and_incidents_combine_for_the_report() -> None:
    assert scale_record(incident()) == []
    (one,) = scale_record(incident(act(4, 7, by=PILOT, came=True, seen=6)))
    (two,) = scale_record(incident(act(2, 5, came=True, seen=10), act(3, 1)))
    both = one.plus(two)
    assert (both.pilot.count, both.people.count, both.all.came, both.all.not_known) == (1, 2, 2, 1)
    assert both.capacity_mins == (6.0, 10.0) and both.capacity_median == 8.0


def test_a_scale_up_recorded_without_its_moment_still_counts() -> None:
    event = act(4, 7)
    assert event.scale is not None
    bare = event.model_copy(update={"scale": event.scale.model_copy(update={"at": None})})
    (done,) = scale_record(incident(bare))
    assert done.people.count == 1
