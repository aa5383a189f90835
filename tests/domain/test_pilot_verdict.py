"""The pilot's judgement for one runner type, as HPA's `behavior` bounds a scale-up: it acts only
once the advice has asked through the whole hold, by the least it asked, within its step, its
up_to and the request's cap; and it says why not otherwise, in the words `/queue pilot` shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.domain.incident.incidents import Event, Incident, with_action
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.judgement import Direction, Judgement
from bot.domain.reading.runner_pods import PodCause, Trouble
from bot.domain.scale.pilot import Hold, held, scale_ups, verdict
from bot.domain.scale.scale_ups import ScaleUp
from bot.domain.scale.scaling import Policy

T0 = datetime(2026, 11, 28, 14, 0, tzinfo=UTC)
TYPE = "linux.2xlarge"
POLICY = Policy(up_to=60, step=20, hold_s=180, cooldown_s=600)


def judged(at: datetime, runners: int, **more: object) -> Judgement:
    return Judgement(at=at, queued=24, runners=runners, cap=200, **more)  # type: ignore[arg-type]


def incident_at(judgement: Judgement, actions: tuple[Event, ...] = ()) -> Incident:
    live = FleetSnapshot(
        at=judgement.at,
        source="prometheus",
        runner_types={TYPE: RunnerTypeMetrics(judged=judgement)},
    )
    incident = Incident(
        id="3",
        group_key="g",
        group_hash="h",
        source="grafana",
        title="Jobs queueing",
        started_at=T0,
        opened_at=T0,
        updated_at=T0,
        live=live,
    )
    for event in actions:
        incident = with_action(incident, event)
    return incident


def replay(asks: list[int], every_s: float = 15.0) -> tuple[Hold | None, Judgement]:
    hold, last = None, None
    for n, asked in enumerate(asks):
        last = judged(T0 + timedelta(seconds=n * every_s), asked)
        hold = held(hold, last, POLICY.hold_s)
    assert last is not None
    return hold, last


def test_it_waits_for_the_whole_hold_then_takes_the_least_asked_in_it() -> None:
    hold, last = replay([9, 12, 7, 10, 11, 14])  # 75 s of asking
    said = verdict(POLICY, hold, last, scale_ups(incident_at(last), TYPE), last.at)
    assert (
        said.runners == 0 and said.why == "the advice has asked for 1 min of the 3 min it must hold"
    )
    hold, last = replay([9, 12, 7, 10, 11, 14, 12, 13, 12, 11, 12, 12, 13])  # 180 s
    said = verdict(POLICY, hold, last, scale_ups(incident_at(last), TYPE), last.at)
    assert said.runners == 7 and said.why == "+7 asked for 3 min, within up_to 60"


def test_the_least_is_the_hold_window_s_not_the_first_ask_of_a_long_ramp() -> None:
    hold, last = replay(list(range(1, 40)))  # a ramp asking 1, 2, ... 39 over 9.5 min
    said = verdict(POLICY, hold, last, scale_ups(incident_at(last), TYPE), last.at)
    assert said.runners == 20 and said.why == "+27 asked for 9 min, +20 by its step"


def test_a_reading_that_asks_for_nothing_ends_the_hold() -> None:
    hold, _ = replay([9, 12, 7, 10, 11, 14, 12, 13])
    assert held(hold, judged(T0 + timedelta(minutes=3), 0), POLICY.hold_s) is None


def test_it_declines_while_the_queue_falls_or_pods_cannot_start() -> None:
    hold, last = replay([9] * 13)
    falling = last.model_copy(update={"direction": Direction.FALLING})
    assert (
        verdict(POLICY, hold, falling, scale_ups(incident_at(falling), TYPE), last.at).why
        == "the queue is falling"
    )
    cause = PodCause(
        trouble=Trouble.UNSCHEDULABLE,
        evidence="4 runner pods Pending: 0/12 nodes fit",
        advice="look",
    )
    stuck = last.model_copy(update={"causes": (cause,), "cannot_start": 4})
    said = verdict(POLICY, hold, stuck, scale_ups(incident_at(stuck), TYPE), last.at)
    assert said == said.__class__(0, "runners cannot start: 4 runner pods Pending: 0/12 nodes fit")


def scaled(at: datetime, added: int, *, pilot: bool, came: bool | None = None) -> Event:
    done = ScaleUp(runner_type=TYPE, added=added, by="alice", at=at, pilot=pilot, came=came)
    return Event(at=at, kind="scaled", text="Scaled", actor=None if pilot else "U1", scale=done)


def test_a_person_s_scale_up_counts_for_the_cooldown_and_an_unverified_one_holds_it() -> None:
    hold, last = replay([9] * 13)
    person = scaled(last.at - timedelta(minutes=4), 5, pilot=False, came=True)
    said = verdict(POLICY, hold, last, scale_ups(incident_at(last, (person,)), TYPE), last.at)
    assert said.runners == 0 and said.why == "cooling down: 6 min left since the last scale-up"
    assert person.scale is not None
    followed = person.scale.model_copy(
        update={"came": None, "due": person.at + timedelta(minutes=10)}
    )
    unverified = incident_at(last, (person.model_copy(update={"scale": followed}),))
    assert verdict(POLICY, hold, last, scale_ups(unverified, TYPE), last.at).why.endswith(
        "is not verified yet"
    )
    failed = scaled(last.at - timedelta(minutes=20), 5, pilot=False, came=False)
    said = verdict(POLICY, hold, last, scale_ups(incident_at(last, (failed,)), TYPE), last.at)
    assert said.why == "the +5 at 13:43 UTC did not come up"


def test_its_own_acts_in_the_incident_stay_within_up_to() -> None:
    hold, last = replay([30] * 13)
    acts = tuple(
        scaled(last.at - timedelta(minutes=m), 20, pilot=True, came=True) for m in (40, 20)
    )
    said = verdict(POLICY, hold, last, scale_ups(incident_at(last, acts), TYPE), last.at)
    assert said.runners == 20 and said.why == "+30 asked for 3 min, +20 by its step"
    more = (*acts, scaled(last.at - timedelta(minutes=11), 20, pilot=True, came=True))
    said = verdict(POLICY, hold, last, scale_ups(incident_at(last, more), TYPE), last.at)
    assert said == said.__class__(0, "it added its up_to of 60 in this incident")


@given(st.lists(st.integers(min_value=0, max_value=500), max_size=60), st.integers(0, 600))
def test_an_act_never_exceeds_any_bound_nor_any_ask_of_the_hold(
    asks: list[int], hold_s: int
) -> None:
    policy = Policy(up_to=60, step=20, hold_s=hold_s, cooldown_s=0)
    hold, last = None, judged(T0, 0)
    for n, asked in enumerate(asks):
        last = judged(T0 + timedelta(seconds=n * 10), asked)
        hold = held(hold, last, hold_s)
    said = verdict(policy, hold, last, scale_ups(incident_at(last), TYPE), last.at)
    window = [a for n, a in enumerate(asks) if n * 10 >= (len(asks) - 1) * 10 - hold_s]
    if said.runners:
        assert said.runners <= min(policy.step, policy.up_to, 200)
        assert said.runners <= min(window) and all(a > 0 for a in window)
        assert (len(asks) - 1) * 10 >= hold_s or hold_s == 0


def test_a_hold_survives_its_stored_shape_and_refuses_another() -> None:
    hold, _ = replay([9, 12, 7, 10])
    assert hold is not None and Hold.model_validate_json(hold.model_dump_json()) == hold
    for stored in ({"since": "x", "asks": []}, {"since": T0.isoformat(), "asks": []}):
        with pytest.raises(ValidationError):
            Hold.model_validate(stored)


def test_the_bound_that_limits_an_act_is_the_one_named() -> None:
    hold, last = replay([10] * 13)
    capped = last.model_copy(update={"cap": 4})
    said = verdict(POLICY, hold, capped, scale_ups(incident_at(capped), TYPE), last.at)
    assert said == said.__class__(4, "+10 asked for 3 min, +4 by the cap")
    short = last.model_copy(update={"nodes_short": 3, "unplaced": 2})
    said = verdict(POLICY, hold, short, scale_ups(incident_at(short), TYPE), last.at)
    assert said.why == "runners cannot start: 2 new runner pods find no node"


def test_a_scale_up_in_another_open_incident_counts_for_the_cooldown() -> None:
    hold, last = replay([9] * 13)
    elsewhere = incident_at(last, (scaled(last.at - timedelta(minutes=2), 20, pilot=False),))
    said = verdict(
        POLICY,
        hold,
        last,
        scale_ups(incident_at(last), TYPE),
        last.at,
        others=scale_ups(elsewhere, TYPE),
    )
    assert said.why == "cooling down: 8 min left since the last scale-up"


def test_a_failure_someone_resumed_the_pilot_after_no_longer_holds_it() -> None:
    hold, last = replay([9] * 13)
    failed = scaled(last.at - timedelta(minutes=20), 5, pilot=True, came=False)
    failed = failed.model_copy(
        update={
            "scale": failed.scale.model_copy(update={"seen_at": last.at - timedelta(minutes=9)})
        }
    )
    incident = incident_at(last, (failed,))
    resumed_before_it_failed = last.at - timedelta(minutes=15)
    said = verdict(
        POLICY, hold, last, scale_ups(incident, TYPE), last.at, resumed=resumed_before_it_failed
    )
    assert said.why.endswith("did not come up"), "a resume before the failure forgives nothing"
    assert verdict(POLICY, hold, last, scale_ups(incident, TYPE), last.at).why.endswith(
        "did not come up"
    )
    resumed = last.at - timedelta(minutes=1)
    said = verdict(POLICY, hold, last, scale_ups(incident, TYPE), last.at, resumed=resumed)
    assert said.runners == 9
