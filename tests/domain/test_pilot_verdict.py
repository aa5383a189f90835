"""The pilot's judgement for one runner type, as Kubernetes' HPA scales on desired capacity. Each
reading wants a capacity: the runners it found running and booting, and those it alone wanted
beyond them (`Judgement.desired`). The pilot acts only once its readings have wanted more than
the capacity there was through the whole hold; it adds the least capacity they wanted over the
hold window less the capacity there is now, its own earlier acts booting included (so it never
asks twice for one need), within its step, its up_to in the incident and the request's cap; its
own acts pace it by `period_s`, a person's scale-up cools it down for `cooldown_s`. Otherwise it
says why not, in the words `/queue pilot` shows.

The readings here reach the pilot as the incident shows them (`with_action` counting the
scale-ups made since, or booting before, each reading), as the pilot reads them in production."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import takewhile

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from bot.domain.incident.incidents import PILOT, Event, Incident, with_action
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.judgement import Direction, Judgement, added
from bot.domain.reading.runner_pods import PodCause, Trouble
from bot.domain.scale.pilot import Hold, Verdict, held, scale_ups, verdict
from bot.domain.scale.scale_ups import ScaleUp, follow, outcome_of
from bot.domain.scale.scaling import Policy

T0 = datetime(2026, 11, 28, 14, 0, tzinfo=UTC)
TYPE = "linux.2xlarge"
POLICY = Policy(up_to=60, step=20, hold_s=180, cooldown_s=600)  # period_s: 60
EVERY = timedelta(seconds=15)
RUNNING = 20


def reading(
    at: datetime,
    own: int,
    *,
    running: int = RUNNING,
    booting: int = 0,
    cap: int = 200,
    **more: object,
) -> Judgement:
    """A reading that found `running` runners registered and busy and `booting` more, and wanted
    `own` runners beyond them: it desires `running + booting + own`."""
    return Judgement(  # type: ignore[arg-type]
        at=at,
        queued=24,
        registered=running,
        busy=running,
        booting=booting,
        own=own,
        runners=own,
        cap=cap,
        **more,
    )


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


def seen(raw: Judgement, *acts: Event) -> tuple[Judgement, list[ScaleUp]]:
    """The reading as the incident with `acts` shows it, and the incident's scale-ups of the
    type: what the pilot reads."""
    incident = incident_at(raw, acts)
    assert incident.live is not None
    judged = incident.live.runner_types[TYPE].judged
    assert judged is not None
    return judged, scale_ups(incident, TYPE)


def replay(
    owns: list[int],
    *acts: Event,
    start: datetime = T0,
    hold: Hold | None = None,
    running: int = RUNNING,
    hold_s: float = POLICY.hold_s,
) -> tuple[Hold | None, Judgement]:
    """A reading every 15 s from `start`, each wanting `own` beyond the `running` it found, as
    the incident with `acts` shows it: the hold after the last, and the last as read."""
    last = None
    for n, own in enumerate(owns):
        last = reading(start + n * EVERY, own, running=running)
        hold = held(hold, seen(last, *acts)[0], hold_s)
    assert last is not None
    return hold, last


def look(
    hold: Hold | None,
    raw: Judgement,
    *acts: Event,
    now: datetime | None = None,
    policy: Policy = POLICY,
    **more: object,
) -> Verdict:
    judged, mine = seen(raw, *acts)
    return verdict(policy, hold, judged, mine, now or raw.at, **more)  # type: ignore[arg-type]


def scaled(
    at: datetime,
    added: int,
    *,
    by: str = "alice",
    came: bool | None = None,
    followed: bool = False,
    seen_at: datetime | None = None,
) -> Event:
    """A scale-up made at `at`: the pilot's when `by` is PILOT; `followed` until its runners are
    seen to come (or not)."""
    pilot = by == PILOT
    done = ScaleUp(
        runner_type=TYPE,
        added=added,
        by=by,
        at=at,
        pilot=pilot,
        came=came,
        due=at + timedelta(minutes=10) if followed else None,
        seen_at=seen_at,
    )
    return Event(at=at, kind="scaled", text="Scaled", actor=None if pilot else "U1", scale=done)


def test_it_waits_for_the_whole_hold_then_adds_the_least_desired_less_the_capacity() -> None:
    # 20 running; the readings want 29, 32, 27, 30, 31, 34 runners: 75 s of wanting more.
    hold, last = replay([9, 12, 7, 10, 11, 14])
    # Clock times, not a countdown: the thread's line and the root keep what it said.
    waiting = "its readings have wanted more runners since 14:00 UTC: it acts from 14:03 UTC"
    assert look(hold, last) == Verdict(0, f"{waiting} if they still do")
    hold, last = replay([9, 12, 7, 10, 11, 14, 12, 13, 12, 11, 12])  # 150 s
    assert look(hold, last) == Verdict(0, f"{waiting} if they still do")
    hold, last = replay([9, 12, 7, 10, 11, 14, 12, 13, 12, 11, 12, 12, 13])  # 180 s
    assert hold is not None and hold.least == 27
    assert look(hold, last) == Verdict(7, "+7 wanted for 3 min (20 → 27), within up_to 60")


def test_a_long_ramp_acts_on_the_least_of_the_hold_window_not_on_its_first_reading() -> None:
    hold, last = replay(list(range(1, 40)))  # wanting 1, 2, ... 39 beyond the 20, over 9.5 min
    # The window is the last 3 min: from 14:06:30, when a reading wanted 27 beyond the 20.
    assert hold is not None and hold.least == 47 and hold.since == T0
    assert look(hold, last) == Verdict(20, "+27 wanted for 9 min (20 → 47), +20 by its step")


def test_a_low_reading_slides_out_of_the_window() -> None:
    hold, last = replay([3] + [12] * 12)  # 14:00:00 to 14:03:00: 14:00 still in the window
    assert look(hold, last) == Verdict(3, "+3 wanted for 3 min (20 → 23), within up_to 60")
    hold, last = replay([3] + [12] * 13)  # a reading later, it has slid out
    assert look(hold, last) == Verdict(12, "+12 wanted for 3 min (20 → 32), within up_to 60")


def test_a_reading_that_wants_no_more_than_the_capacity_ends_the_hold() -> None:
    hold, _ = replay([9, 12, 7, 10, 11, 14, 12, 13])  # 14:00:00 to 14:01:45
    assert hold is not None
    enough = reading(T0 + timedelta(minutes=2), 0)
    assert held(hold, enough, POLICY.hold_s) is None
    assert look(None, enough) == Verdict(
        0, "its readings want no more than the 20 runners running and booting it has"
    )
    # Runners a person added after a reading, that cover what it wanted, end it as well.
    covered = added(reading(T0 + timedelta(minutes=2), 9), 9)
    assert (covered.supply, covered.desired) == (29, 29)
    assert held(hold, covered, POLICY.hold_s) is None
    # The next reading that wants more starts the whole hold again.
    hold, last = replay([9] * 12, start=T0 + timedelta(minutes=2, seconds=15))  # to 14:05
    assert hold is not None and hold.since == T0 + timedelta(minutes=2, seconds=15)
    assert look(hold, last) == Verdict(
        0,
        "its readings have wanted more runners since 14:02:15 UTC: it acts from 14:05:15 UTC if "
        "they still do",
    )


def test_a_reading_already_counted_changes_nothing() -> None:
    hold, last = replay([9, 12, 7, 10])  # 14:00:00 to 14:00:45
    assert hold is not None
    for again in (last, reading(last.at, 3), reading(last.at - EVERY, 2)):
        assert held(hold, again, POLICY.hold_s) == hold
    assert held(hold, reading(last.at, 0), POLICY.hold_s) is None, "but one that wants none ends it"


def test_its_own_act_is_capacity_so_the_next_adds_only_what_the_window_still_wants() -> None:
    slow = Policy(up_to=60, step=20, hold_s=180, cooldown_s=3600)  # its cooldown: an hour
    hold, last = replay([30] * 13)  # 20 running, 50 wanted from 14:00 to 14:03
    assert look(hold, last, policy=slow) == Verdict(
        20, "+30 wanted for 3 min (20 → 50), +20 by its step"
    )
    first = scaled(last.at, 20, by=PILOT, followed=True)  # 14:03, followed until they come
    judged, _ = seen(last, first)
    assert (judged.booting, judged.added_since, judged.supply, judged.desired) == (20, 20, 40, 50)
    assert held(hold, judged, slow.hold_s) == hold, "the same reading counts once"
    # The next readings still find 20 running, want 50 in all, and count its 20 booting.
    after = T0 + timedelta(minutes=3, seconds=15)
    hold, last = replay([30, 30], first, start=after, hold=hold)  # 14:03:15, 14:03:30
    assert look(hold, last, first, policy=slow) == Verdict(
        0, "it acted at 14:03 UTC: again from 14:04 UTC"
    )
    hold, last = replay([30, 30], first, start=after + 2 * EVERY, hold=hold)  # to 14:04:00
    # A period on, unverified and however long its cooldown: only the 10 still wanted.
    assert look(hold, last, first, policy=slow) == Verdict(
        10, "+10 wanted for 4 min (40 → 50), within up_to 60"
    )
    second = scaled(last.at, 10, by=PILOT, followed=True)  # 14:04
    hold, last = replay([30] * 8, first, second, start=last.at + EVERY, hold=hold)  # to 14:06
    judged, _ = seen(last, first, second)
    assert (judged.supply, judged.desired) == (50, 50)
    assert hold is None, "what it added covers what they want: the hold ended"
    assert look(hold, last, first, second, policy=slow) == Verdict(
        0, "its readings want no more than the 50 runners running and booting it has"
    )


def test_a_rise_after_its_act_waits_for_the_window_to_hold_it() -> None:
    hold, last = replay([15] * 13)  # 35 wanted from 14:00 to 14:03
    assert look(hold, last) == Verdict(15, "+15 wanted for 3 min (20 → 35), within up_to 60")
    act = scaled(last.at, 15, by=PILOT, followed=True)
    # The queue grows: the readings after want 40, 5 beyond the 35 there are with its act.
    hold, last = replay([20] * 8, act, start=last.at + EVERY, hold=hold)  # to 14:05
    assert look(hold, last, act) == Verdict(
        0, "the 35 runners running and booting it has cover the least its readings want"
    )
    hold, last = replay([20] * 4, act, start=last.at + EVERY, hold=hold)  # to 14:06
    assert look(hold, last, act) == Verdict(
        0, "the 35 runners running and booting it has cover the least its readings want"
    ), "the reading of 14:03, before its act, is still in the window"
    hold, last = replay([20], act, start=last.at + EVERY, hold=hold)  # 14:06:15
    assert look(hold, last, act) == Verdict(5, "+5 wanted for 6 min (35 → 40), within up_to 60")


def test_a_person_s_scale_up_cools_it_down_and_their_runners_count_as_capacity() -> None:
    hold, _ = replay([9] * 5)  # 29 wanted, 14:00 to 14:01
    person = scaled(T0 + timedelta(minutes=1), 5, by="alice", came=True)
    hold, last = replay([9] * 8, person, start=T0 + timedelta(minutes=1, seconds=15), hold=hold)
    cooling = "cooling down after alice's scale-up until 14:11 UTC"
    assert look(hold, last, person) == Verdict(0, cooling)
    # From 14:06 the 5 are registered; the readings want 4 beyond the 25.
    hold, last = replay([9] * 11, person, start=last.at + EVERY, hold=hold)  # to 14:05:45
    hold, last = replay([4] * 21, person, start=last.at + EVERY, hold=hold, running=25)
    assert last.at == T0 + timedelta(minutes=11)
    assert look(hold, last, person, now=last.at - timedelta(seconds=1)) == Verdict(0, cooling)
    assert look(hold, last, person) == Verdict(4, "+4 wanted for 11 min (25 → 29), within up_to 60")


def test_an_unverified_scale_up_of_a_person_holds_it_and_its_own_does_not() -> None:
    hold, last = replay([9] * 5)  # 14:00 to 14:01
    person = scaled(T0 + timedelta(minutes=1), 5, by="alice", followed=True)
    start = T0 + timedelta(minutes=1, seconds=15)
    hold, last = replay([9] * 8, person, start=start, hold=hold)  # to 14:03
    assert look(hold, last, person) == Verdict(0, "the +5 at 14:01 UTC is not verified yet")
    later = last.at + timedelta(minutes=20)  # long past its cooldown
    assert look(hold, last, person, now=later) == Verdict(
        0, "the +5 at 14:01 UTC is not verified yet"
    )
    hold, last = replay([9] * 5)
    own = scaled(T0 + timedelta(minutes=1), 5, by=PILOT, followed=True)
    hold, last = replay([9] * 8, own, start=start, hold=hold)
    assert look(hold, last, own) == Verdict(4, "+4 wanted for 3 min (25 → 29), within up_to 60")
    # Its act in another incident, unverified, may not show here: it holds it.
    judged, _ = seen(last)
    assert own.scale is not None
    assert verdict(POLICY, hold, judged, [], last.at, others=[own.scale]) == Verdict(
        0, "the +5 at 14:01 UTC is not verified yet"
    )


def test_it_declines_while_the_queue_falls() -> None:
    hold, last = replay([9] * 13)
    falling = last.model_copy(update={"direction": Direction.FALLING})
    assert look(hold, falling) == Verdict(0, "the queue is falling")
    rising = last.model_copy(update={"direction": Direction.RISING})
    assert look(hold, rising) == Verdict(9, "+9 wanted for 3 min (20 → 29), within up_to 60")


def test_runners_that_cannot_start_decline_it_before_any_hold() -> None:
    cause = PodCause(
        trouble=Trouble.UNSCHEDULABLE,
        evidence="4 runner pods Pending: 0/12 nodes fit",
        advice="look",
    )
    stuck = reading(T0, 9, causes=(cause,), cannot_start=4)
    assert stuck.desired == stuck.supply == 20, "while pods cannot start it wants what it has"
    assert held(None, stuck, POLICY.hold_s) is None
    assert look(None, stuck) == Verdict(
        0, "runners cannot start: 4 runner pods Pending: 0/12 nodes fit"
    )
    hold, last = replay([9] * 13)
    assert look(hold, last.model_copy(update={"cannot_start": 1})) == Verdict(
        0, "runners cannot start: 1 pod"
    )
    assert held(hold, stuck.model_copy(update={"at": last.at + EVERY}), POLICY.hold_s) is None
    short = reading(T0, 9, nodes_short=3, unplaced=2)
    for hold_then in (None, hold):
        assert look(hold_then, short.model_copy(update={"at": last.at})) == Verdict(
            0, "runners cannot start: 2 new runner pods find no node"
        )


def test_its_acts_stay_within_up_to_and_the_bound_that_limits_one_is_named() -> None:
    # Its earlier acts registered long ago: 65 running, 95 wanted.
    acts = (
        scaled(T0 - timedelta(minutes=40), 20, by=PILOT, came=True),
        scaled(T0 - timedelta(minutes=25), 20, by=PILOT, came=True),
    )
    hold, last = replay([30] * 13, *acts, running=65)
    assert look(hold, last, *acts) == Verdict(20, "+30 wanted for 3 min (65 → 95), +20 by its step")
    three = (*acts, scaled(T0 - timedelta(minutes=18), 5, by=PILOT, came=True))
    assert look(hold, last, *three) == Verdict(
        15, "+30 wanted for 3 min (65 → 95), +15 by up_to 60"
    )
    capped = last.model_copy(update={"cap": 4})
    assert look(hold, capped, *acts) == Verdict(4, "+30 wanted for 3 min (65 → 95), +4 by the cap")
    full = (*three, scaled(T0 - timedelta(minutes=10), 15, by=PILOT, came=True))
    assert look(hold, last, *full) == Verdict(0, "it added its up_to of 60 in this incident")
    assert look(hold, last, *full, within="early warning") == Verdict(
        0, "it added its up_to of 60 in this early warning"
    )
    # A person's runners do not count against its up_to.
    people = (scaled(T0 - timedelta(minutes=30), 60, by="alice", came=True),)
    assert look(hold, last, *people) == Verdict(
        20, "+30 wanted for 3 min (65 → 95), +20 by its step"
    )


def test_a_scale_up_in_another_open_incident_counts_for_the_cooldown_and_the_period() -> None:
    hold, last = replay([9] * 13)
    judged, mine = seen(last)
    bob = scaled(last.at - timedelta(minutes=2), 20, by="bob", came=True)
    elsewhere = scale_ups(incident_at(last, (bob,)), TYPE)
    assert verdict(POLICY, hold, judged, mine, last.at, others=elsewhere) == Verdict(
        0, "cooling down after bob's scale-up until 14:11 UTC"
    )
    act = scaled(last.at - timedelta(seconds=45), 20, by=PILOT, came=True)
    elsewhere = scale_ups(incident_at(last, (act,)), TYPE)
    assert verdict(POLICY, hold, judged, mine, last.at, others=elsewhere) == Verdict(
        0, "it acted at 14:02:15 UTC: again from 14:03:15 UTC"
    )
    # Its acts elsewhere do not count against its up_to here.
    long_ago = [
        up.model_copy(update={"at": T0 - timedelta(hours=1), "added": 60}) for up in elsewhere
    ]
    assert verdict(POLICY, hold, judged, mine, last.at, others=long_ago) == Verdict(
        9, "+9 wanted for 3 min (20 → 29), within up_to 60"
    )


def test_a_failure_someone_resumed_the_pilot_after_no_longer_holds_it() -> None:
    hold, last = replay([9] * 13)  # to 14:03
    failed = scaled(
        T0 - timedelta(minutes=17), 5, by=PILOT, came=False, seen_at=T0 - timedelta(minutes=6)
    )
    held_by = Verdict(0, "the +5 at 13:43 UTC did not come up")
    assert look(hold, last, failed) == held_by
    before = T0 - timedelta(minutes=12)  # resumed before its runners were seen not to come
    assert look(hold, last, failed, resumed=before) == held_by, "a resume before forgives nothing"
    after = last.at - timedelta(minutes=1)
    assert look(hold, last, failed, resumed=after) == Verdict(
        9, "+9 wanted for 3 min (20 → 29), within up_to 60"
    )


def test_a_hold_survives_its_stored_shape_and_refuses_another() -> None:
    hold, _ = replay([9, 12, 7, 10])
    assert hold is not None and hold.asks == ((T0 + 2 * EVERY, 27), (T0 + 3 * EVERY, 30))
    assert Hold.model_validate_json(hold.model_dump_json()) == hold
    for stored in (
        {"since": "x", "asks": [[T0.isoformat(), 27]]},
        {"since": T0.isoformat(), "asks": []},
        {"since": T0.isoformat(), "asks": [[T0.isoformat(), 0]]},
    ):
        with pytest.raises(ValidationError):
            Hold.model_validate(stored)


# A reading: the runners it wanted beyond those it found, those it found running and booting,
# and the seconds since the reading before.
READINGS = st.tuples(
    st.integers(0, 40), st.integers(0, 100), st.integers(0, 30), st.integers(1, 60)
)


@given(
    st.lists(READINGS, min_size=1, max_size=50),
    st.integers(0, 600),
    st.integers(1, 30),
    st.integers(1, 80),
    st.integers(1, 200),
)
@example([(5, 100, 0, 10)] * 3, 10, 20, 60, 200)  # within a tenth of 100: no act
def test_an_act_never_exceeds_its_bounds_nor_what_the_window_wanted_beyond_the_capacity(
    readings: list[tuple[int, int, int, int]], hold_s: int, step: int, up_to: int, cap: int
) -> None:
    policy = Policy(up_to=up_to, step=step, hold_s=hold_s, cooldown_s=0)
    hold, at, last, kept = None, T0, None, []
    for own, running, booting, gap_s in readings:
        at += timedelta(seconds=gap_s)
        last = reading(at, own, running=running, cap=cap, booting=booting)
        hold = held(hold, last, hold_s)
        kept.append((at, running + booting + own, own))
    assert last is not None
    said = verdict(policy, hold, last, [], last.at)
    wanting = list(takewhile(lambda r: r[2] > 0, reversed(kept)))  # latest first
    wanted_s = (wanting[0][0] - wanting[-1][0]).total_seconds() if wanting else -1.0
    start = last.at - timedelta(seconds=hold_s)
    window = [desired for t, desired, _ in wanting if t >= start]
    beyond = min(window) - last.supply if window else 0
    if said.runners:
        assert wanted_s >= hold_s, "never before its readings wanted more for the whole hold"
        assert said.runners <= min(step, up_to, cap)
        assert said.runners <= beyond
    # And whenever they did, it adds all it may.
    # Runners the autoscaler started itself are waited for first, a boot (5 min) at most.
    waits = last.booting and wanted_s < 300
    tolerated = bool(window) and min(window) <= last.supply * 1.1  # HPA's tenth
    sure = wanted_s >= hold_s and beyond > 0 and not waits and not tolerated
    expected = min(beyond, step, up_to, cap) if sure else 0
    assert said.runners == expected


def test_runners_the_autoscaler_started_are_waited_for_and_its_own_booting_are_not() -> None:
    """A node group at its limit leaves the autoscaler's new pods Pending: until they register
    (or are seen stuck) more runners may wait the same way, so it waits, a boot from the hold's
    start at most; its own act's runners booting are capacity it asked for, and the next act
    adds beyond them."""
    hold, _ = replay([9] * 13)  # to 14:03
    starting = reading(T0 + 13 * EVERY, 9, booting=5)
    assert look(hold, starting) == Verdict(
        0, "waiting for 5 runners the autoscaler started to register"
    )
    one = reading(T0 + 13 * EVERY, 9, booting=1)
    assert look(hold, one).why == "waiting for 1 runner the autoscaler started to register"
    # Ephemeral runners replaced as jobs finish keep some booting for good: a boot at most.
    later = T0 + timedelta(minutes=5)
    assert look(hold, one, now=later) == Verdict(
        8, "+8 wanted for 3 min (21 → 29), within up_to 60"
    )
    act = scaled(T0 + 12 * EVERY, 5, by=PILOT, followed=True)
    ours = reading(T0 + 13 * EVERY, 9)
    assert seen(ours, act)[0].booting == 5, "its act's runners count as booting"
    said = look(hold, ours, act, now=T0 + 13 * EVERY + timedelta(minutes=1))
    assert said == Verdict(4, "+4 wanted for 3 min (25 → 29), within up_to 60"), said


def test_with_its_pods_read_and_placed_it_does_not_wait_for_the_autoscaler_s_runners() -> None:
    """Where the runner pods are read and every one has a node, the autoscaler's runners are
    starting, not unknown: it acts at once, beyond them. One pod waiting for a node (however
    young) leaves whether they start unknown, and it waits as where the pods are not read."""
    hold, _ = replay([9] * 13)
    placed = reading(T0 + 13 * EVERY, 9, booting=5).model_copy(update={"pods_read": True})
    assert look(hold, placed) == Verdict(4, "+4 wanted for 3 min (25 → 29), within up_to 60")
    no_node = placed.model_copy(update={"unplaced": 1})
    assert look(hold, no_node) == Verdict(
        0, "waiting for 5 runners the autoscaler started to register"
    )


def test_a_want_within_a_tenth_of_the_capacity_moves_nothing() -> None:
    """HPA's tolerance: 20 runners and readings that want 22 at least (a tenth more) is no act,
    a reply and a put-back for no drain anyone would see; 23 is one."""
    hold, last = replay([2] * 13)
    assert look(hold, last) == Verdict(
        0, "the 20 runners running and booting it has cover the least its readings want"
    )
    hold, last = replay([3] * 13)
    assert look(hold, last) == Verdict(3, "+3 wanted for 3 min (20 → 23), within up_to 60")


def test_a_hold_kept_by_an_older_version_starts_again() -> None:
    """An earlier release's hold kept the advice's deltas: read as desired capacities they would say
    the runners there are cover the need. Such a hold starts again at the next reading."""
    old = Hold(since=T0, asks=((T0, 4.0), (T0 + EVERY, 5.0)))
    assert old.of is None
    hold = held(old, reading(T0 + 2 * EVERY, 9), POLICY.hold_s)
    assert hold is not None and hold.since == T0 + 2 * EVERY and hold.least == 29


def test_a_person_s_runners_on_their_way_are_theirs_not_the_autoscaler_s() -> None:
    """A person's +5, still followed, shown booting in the reading: the pilot waits for it to be
    verified, and says so, not that the autoscaler started them."""
    hold, _ = replay([9] * 13)  # to 14:03
    person = scaled(T0 + 12 * EVERY, 5, followed=True)
    shown = reading(T0 + 13 * EVERY, 9, booting=5)
    said = look(hold, shown, person, now=T0 + 13 * EVERY + timedelta(minutes=11))
    assert said == Verdict(0, "the +5 at 14:03 UTC is not verified yet"), said


def test_its_act_kept_by_a_folded_warning_and_its_incident_is_one_act() -> None:
    """The incident took the warning's act on: the warning's copy (its own words and follow-up)
    and the incident's are one act, the pilot's own, whose runners count as capacity: no wait
    for its verification."""
    act = scaled(T0 + 11 * EVERY, 5, by=PILOT, followed=True)
    hold, last = replay([9] * 13, act)
    assert act.scale is not None
    copy = act.scale.model_copy(update={"said": "on the warning's message"})
    judged, mine = seen(last, act)
    now = T0 + 13 * EVERY + timedelta(minutes=1)
    said = verdict(POLICY, hold, judged, mine, now, others=[copy])
    assert said.runners > 0 and "not verified" not in said.why, said


def test_its_acts_of_the_last_boot_are_not_the_autoscaler_s_once_their_follow_up_decided() -> None:
    """Its +20 registered as far as its follow-up can tell (came), while the reading still shows
    runners of it booting: they are its own, not the autoscaler's to wait for."""
    act = scaled(T0 + 11 * EVERY, 20, by=PILOT, came=True)
    hold, _ = replay([30] * 13)
    shown = reading(T0 + 13 * EVERY, 30, booting=20)
    said = look(hold, shown, act, now=T0 + 13 * EVERY + timedelta(minutes=2))
    assert "autoscaler" not in said.why, said


def test_an_act_while_the_last_one_s_runners_boot_is_followed_from_what_that_one_brings() -> None:
    """The walk's case: +10 at 08:40:40 and +4 at 08:41:15, both from a reading of 20
    registered. The second's runners are the four past the first's 30: 30 registered (the
    first's ten) is not the second come."""
    first = follow(
        ScaleUp(runner_type=TYPE, added=10, by=PILOT, at=T0, pilot=True),
        reading(T0, 10),
        verify_s=600,
    )
    second = follow(
        ScaleUp(runner_type=TYPE, added=4, by=PILOT, at=T0 + EVERY, pilot=True),
        reading(T0 + EVERY, 10),
        verify_s=600,
        earlier=[first],
    )
    assert (first.baseline, second.baseline) == (20, 30)
    view = FleetSnapshot(
        at=T0 + 4 * EVERY,
        source="prometheus",
        runner_types={TYPE: RunnerTypeMetrics(judged=reading(T0 + 4 * EVERY, 0, running=30))},
    )
    assert outcome_of(second, view, T0 + 4 * EVERY) is None, "not yet: the first's ten came"
    assert outcome_of(first, view, T0 + 4 * EVERY).came is True


def test_the_autoscaler_s_booting_runners_are_told_apart_from_an_act_not_read_yet() -> None:
    """4 runners the autoscaler started are booting when a person adds 10 just before a reading
    that does not show them yet: booting counts 14, and 4 of them are the autoscaler's."""
    hold, _ = replay([30] * 13)
    person = scaled(T0 + 12 * EVERY + timedelta(seconds=10), 10, came=True)
    shown = reading(T0 + 13 * EVERY, 30, booting=4)
    judged, mine = seen(shown, person)
    assert judged.booting == 14
    said = verdict(POLICY, hold, judged, mine, T0 + 13 * EVERY)  # a boot from the hold's start
    assert said.why == "waiting for 4 runners the autoscaler started to register", said
