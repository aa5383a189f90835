"""An incident's share of the fleet reading, drain detection and baselines: pure, tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.alerting.routes import Routing, parse_routes
from bot.domain.incident.incident_fleet import (
    DrainRule,
    as_snapshot,
    drain_checks,
    incident_fleet,
    is_drained,
    judgement_of,
    type_drained,
    with_baselines,
)
from bot.domain.incident.incidents import (
    Event,
    Incident,
    counting_scale_ups,
    record_status,
    with_action,
)
from bot.domain.incident.trend import sparkline
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, Reading, RunnerTypeMetrics
from bot.domain.reading.judging import judged
from bot.domain.reading.runner_names import derived_scale_set
from bot.domain.scale.scale_ups import ScaleUp
from bot.render import mrkdwn as md
from bot.render.numbers import type_lines
from tests.support.incidents import changed

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def incident(*types: str, checks: int = 0) -> Incident:
    return Incident(
        id="7",
        group_key="g",
        group_hash="h",
        source="grafana",
        title="jobs queueing",
        runner_types={name: RunnerQueue(queued=14, longest_wait_mins=114) for name in types},
        started_at=NOW - timedelta(hours=1),
        opened_at=NOW - timedelta(hours=1),
        updated_at=NOW,
        drain_checks=checks,
    )


def fleet(**types: tuple[float | None, float | None]) -> FleetSnapshot:
    return FleetSnapshot(
        at=NOW,
        source="prometheus",
        runner_types={
            n: RunnerTypeMetrics(queued=q, longest_wait_mins=w) for n, (q, w) in types.items()
        },
    )


def view_of(inc: Incident, reading: Reading | None) -> FleetSnapshot:
    return incident_fleet(inc, reading, backend="Prometheus", now=NOW, interval=MINUTE)


def test_the_incident_shows_the_alerts_runner_types_matched_by_name() -> None:
    reading = Reading(fleet(**{"GPU": (14, 100), "cpu": (2, 3), "arm": (0, None)}), NOW)
    view = view_of(incident("gpu"), reading)
    # Under the alert's name: the incident's peaks and trend keep one name per type.
    assert list(view.runner_types) == ["gpu"] and view.is_live and not view.note


def test_an_alerts_runner_type_finds_its_arc_scale_set_with_nothing_configured() -> None:
    """ARC names the scale set of `linux.2xlarge` `linux-2xlarge`: the same type, derived."""
    reading = Reading(
        fleet(**{"linux-2xlarge": (43, 12), "linux-4xlarge": (0, 0), "linux-g5": (9, 3)}), NOW
    )
    view = view_of(incident("linux.2xlarge"), reading)
    assert list(view.runner_types) == ["linux.2xlarge"] and not view.note
    assert view.runner_types["linux.2xlarge"].queued == 43
    assert drain_checks(incident("linux.2xlarge"), view, DRAIN) == 0  # a live view of its type


@given(st.text(st.sampled_from("abcXYZ019.-_ "), min_size=1, max_size=30))
def test_any_alert_label_finds_the_reading_of_its_derived_scale_set(label: str) -> None:
    assume(derived_scale_set(label))
    reading = Reading(fleet(**{derived_scale_set(label): (43, 12), "other": (5, 1)}), NOW)
    view = view_of(incident(label), reading)
    assert {n: m.queued for n, m in view.runner_types.items()} == {label: 43}


def test_history_fills_the_baselines_of_a_type_the_readings_name_otherwise() -> None:
    inc = incident("linux.2xlarge")
    history = [HistoryPoint(inc.started_at - timedelta(hours=1), {"linux-2xlarge": 3.0}, {})]
    reading = Reading(fleet(**{"linux-2xlarge": (43, 12)}), NOW)
    view = incident_fleet(inc, reading, history, backend="Prometheus", now=NOW, interval=MINUTE)
    assert view.runner_types["linux.2xlarge"].arrival_baseline_per_min == 3.0


def test_an_alert_naming_no_type_shows_every_type_that_queues() -> None:
    reading = Reading(fleet(gpu=(14, 100), cpu=(2, 3), arm=(0, None)), NOW)
    assert sorted(view_of(incident(), reading).runner_types) == ["cpu", "gpu"]


@pytest.mark.parametrize(
    ("reading", "says"),
    [
        (Reading(None, NOW, "Prometheus did not answer within 10 s"), "did not answer within 10 s"),
        (Reading(None, NOW), "no reading from Prometheus yet"),
        (
            Reading(fleet(gpu=(1, 1)).model_copy(update={"at": NOW - 10 * MINUTE}), NOW),
            "10 min old",
        ),
    ],
)
def test_without_a_fresh_reading_the_incident_keeps_the_alerts_numbers_and_says_why(
    reading: Reading, says: str
) -> None:
    view = view_of(incident("gpu"), reading)
    assert not view.is_live
    assert view.runner_types["gpu"].queued == 14  # the alert's number
    assert says in view.note and "these are the alert's numbers" in view.note


DRAIN = DrainRule(max_queued=0, max_wait_mins=5)


@pytest.mark.parametrize(
    ("types", "drained"),
    [
        ({"gpu": (0, 0)}, True),
        ({"gpu": (0, None)}, True),  # no job waited recently: only the queue counts
        ({"gpu": (0, 5)}, True),  # at the threshold
        ({"gpu": (0, 6)}, False),  # the last jobs still waited long
        ({"gpu": (1, 0)}, False),
        ({"gpu": (0, 0), "cpu": (3, 2)}, False),  # every type shown must be drained
        ({}, True),  # nothing queues anywhere
    ],
)
def test_drained_means_every_type_at_or_below_both_thresholds(types: dict, drained: bool) -> None:
    assert is_drained(fleet(**types), DRAIN) is drained


@pytest.mark.parametrize(
    ("inc", "view", "checks"),
    [
        (incident("gpu", checks=0), fleet(gpu=(0, 0)), 1),
        (incident("gpu", checks=2), fleet(gpu=(0, 0)), 3),
        (incident("gpu", checks=2), fleet(gpu=(4, 0)), 0),  # queueing again: start over
        # A reading that does not know the alert's type never counts toward closing it.
        (incident("gpu", checks=1), fleet(cpu=(0, 0)), 1),
        # The alert's own numbers (a failed backend) never count either, and reset nothing.
        (incident("gpu", checks=2), fleet(gpu=(0, 0)).model_copy(update={"source": "alert"}), 0),
        # No numbers never count, and reset nothing: a type read without its queue, and a view
        # of no type (an alert naming none, read before the listener that queues was scraped).
        (incident("gpu", checks=1), fleet(gpu=(None, None)), 1),
        (incident("gpu", checks=1), fleet(gpu=(0, 0), cpu=(None, 2)), 1),
        (
            incident(checks=1).model_copy(update={"opened_at": NOW - timedelta(minutes=1)}),
            fleet(),
            1,
        ),
        # ... until every target was surely scraped: an hour on, none queues (it drained before
        # a live reading saw it).
        (incident(checks=1), fleet(), 2),
        # A source that lists every queue (GitHub's jobs) says so by showing none.
        (incident(checks=1), fleet().model_copy(update={"absent_means_empty": True}), 2),
    ],
)
def test_drain_checks_count_consecutive_drained_readings(
    inc: Incident, view: FleetSnapshot, checks: int
) -> None:
    assert drain_checks(inc, view, DRAIN) == checks


def test_a_reading_that_stands_longer_than_a_check_counts_as_one_drain_check() -> None:
    """GitHub's readings stand ~5 min (paced to its quota), the drain checks come every minute:
    three checks of one drained reading leave the incident open; three readings close it."""
    inc, needed = incident("gpu"), 3
    paced = Reading(fleet(gpu=(0, 0)).model_copy(update={"paced_s": 285.0}), NOW)
    for _ in range(needed):
        view = view_of(inc, paced)
        checks = drain_checks(inc, view, DRAIN)
        inc = record_status(inc, as_snapshot(inc, view, NOW), live=view, drain_checks=checks)
    assert inc.drain.checks == 1, "one reading, one check: still open"

    for minutes in (5, 10):
        later = fleet(gpu=(0, 0)).model_copy(update={"at": NOW + minutes * MINUTE})
        view = view_of(inc, Reading(later, later.at))
        checks = drain_checks(inc, view, DRAIN)
        inc = record_status(inc, as_snapshot(inc, view, NOW), live=view, drain_checks=checks)
    assert inc.drain.checks == needed


def test_the_trend_keeps_queued_and_wait_per_type_and_the_totals() -> None:
    snap = as_snapshot(incident("gpu"), fleet(gpu=(14, 100), cpu=(3, 20)), NOW)
    assert snap.numbers.max_queue_size == 17 and snap.numbers.max_queue_time_mins == 100
    assert snap.runner_types["cpu"] == RunnerQueue(3, 20)


def test_baselines_come_from_the_hours_before_the_incident_when_the_backend_has_none() -> None:
    inc = incident("gpu")
    history = [
        HistoryPoint(inc.started_at - timedelta(hours=2), {"gpu": 4.0}, {"gpu": 20.0}),
        HistoryPoint(inc.started_at - timedelta(hours=1), {"gpu": 6.0}, {"gpu": 30.0}),
        # During the incident and just before it: not "normal".
        HistoryPoint(inc.started_at + timedelta(minutes=5), {"gpu": 50.0}, {"gpu": 90.0}),
        HistoryPoint(inc.started_at - timedelta(minutes=2), {"gpu": 40.0}, {"gpu": 90.0}),
    ]
    view = FleetSnapshot(
        at=NOW,
        source="github",
        runner_types={
            "gpu": RunnerTypeMetrics(queued=5),
            "cpu": RunnerTypeMetrics(queued=1, arrival_baseline_per_min=9.0),
        },
    )
    filled = with_baselines(view, history, started_at=inc.started_at)
    assert filled.runner_types["gpu"].arrival_baseline_per_min == 5.0
    assert filled.runner_types["gpu"].duration_baseline_mins == 25.0
    assert filled.runner_types["cpu"].arrival_baseline_per_min == 9.0  # the backend's own wins


def test_sparkline() -> None:
    assert sparkline([0, 2, 4, 8]) == "▁▃▅█"
    assert sparkline([3]) == ""  # one reading is no trend
    assert sparkline([None, 0, 0]) == " ▁▁"


def test_the_first_status_shows_a_type_whose_backend_knows_only_its_wait() -> None:
    # A one-status trend's unknown cell is "": it once read as no cell at all, and the
    # first status of such an incident failed instead of posting.
    inc = incident("gpu")
    view = fleet(gpu=(None, 12))
    trend = record_status(inc, as_snapshot(inc, view, NOW), live=view).trend

    assert type_lines(view, trend) == ["• gpu: longest wait *12 min*"]
    assert trend.queued_of("gpu") == [None]
    assert trend.points("gpu") == [(NOW.timestamp(), None, 12)]


def test_a_type_that_drained_stays_in_view_and_one_that_vanished_blocks_the_drain() -> None:
    followed = changed(
        incident(), peak_types={"gpu": RunnerQueue(43, 10), "cpu": RunnerQueue(3, 2)}
    )
    # gpu drained and is still read; cpu's listener is being recreated: no numbers for it.
    view = view_of(followed, Reading(fleet(gpu=(0, None), arm=(0, None)), NOW))
    assert list(view.runner_types) == ["gpu"] and view.runner_types["gpu"].queued == 0
    assert view.missing == ("cpu",) and "no numbers for cpu" in view.note
    assert drain_checks(changed(followed, drain_checks=2), view, DRAIN) == 2


def test_the_judgement_shown_is_the_live_readings_else_the_alerts() -> None:
    growing = RunnerTypeMetrics(
        queued=10, arrival_per_min=5, completed_per_min=2, job_duration_mins=10, busy=8
    )
    read = FleetSnapshot(at=NOW, source="prometheus", runner_types={"GPU": growing})
    live = judged(read, [], interval=MINUTE)
    inc = incident("gpu").model_copy(update={"live": live})
    shown = judgement_of(inc, "gpu", now=NOW)
    # No queue observed before it: the rates alone, ceil((10 + 3 * 30) * 10 / 30) = 34.
    assert shown is live.runner_types["GPU"].judged
    assert shown is not None and shown.advice == "+34 runners would drain it in 30 min"
    # Without a live reading: the alert's numbers judged, one runner per job it counted.
    fallback = judgement_of(incident("gpu"), "gpu", now=NOW)
    assert fallback is not None and fallback.runners == 14


def test_the_alerts_numbers_are_one_judgement_whenever_read_and_count_a_scale_up() -> None:
    """With only the alert's numbers, the form, diagnostics and the root judge the same numbers
    the same way at any time, and a scale-up made since counts as booting at once."""
    alerted = changed(
        incident("gpu"),
        alerted_at=NOW,
    )
    early = judgement_of(alerted, "gpu", now=NOW + MINUTE)
    late = judgement_of(alerted, "gpu", now=NOW + 25 * MINUTE)
    assert early == late and early is not None and early.runners == 14
    scaled = Event(
        at=NOW + 2 * MINUTE,
        kind="scaled",
        text="Scaled gpu by +10: minRunners 0 → 10 (ARC)",
        scale=ScaleUp(runner_type="gpu", added=10, by="alice", at=NOW + 2 * MINUTE),
    )
    after = judgement_of(with_action(alerted, scaled), "gpu", now=NOW + 3 * MINUTE)
    assert after is not None and (after.booting, after.runners) == (10, 4)
    assert after.advice == "+4 runners would drain it in 30 min"


def test_a_scale_up_counts_whatever_people_did_after_it() -> None:
    alerted = changed(
        incident("gpu"),
        alerted_at=NOW,
    )
    at = NOW + 2 * MINUTE
    scale = ScaleUp(runner_type="gpu", added=10, by="alice", at=at)
    acted = with_action(alerted, Event(at=at, kind="scaled", text="Scaled gpu by +10", scale=scale))
    for kind in ("acknowledged", "diagnosed", "silenced"):
        acted = with_action(acted, Event(at=at, kind=kind, text=kind, actor="U2", actor_name="bob"))
    shown = judgement_of(acted, "gpu", now=NOW + 3 * MINUTE)
    assert shown is not None and (shown.booting, shown.runners) == (10, 4)


def test_a_big_fleet_keeps_the_worst_ten_and_a_hidden_queue_blocks_the_drain() -> None:
    many = {f"t{i:02d}": (i % 3, 20 + i) for i in range(25)}
    view = view_of(incident(), Reading(fleet(**many), NOW))
    # 16 of the 25 queue (i % 3 != 0); the ten with the longest waits are kept.
    assert len(view.runner_types) == 10 and view.hidden == 6
    assert min(m.longest_wait_mins or 0 for m in view.runner_types.values()) == 30
    assert view.hidden_queueing > 0
    assert drain_checks(incident(), view, DrainRule(max_queued=5, max_wait_mins=100)) == 0


# What absence means, as a table. Each row: whether the reading's absence means "nothing queued"
# (the HUD, over its threshold) or "unknown" (Prometheus); what the incident follows, and whether
# a live reading has shown it those types before; the reading; then what the incident shows,
# what it misses, and the drain checks after two drained ones (DRAIN's wait limit: 5 min).
Types = dict[str, tuple[float | None, float | None]]


def followed(*named: str, read: Types | None = None) -> Incident:
    """An incident whose alert names `named`, with two drained checks behind it; `read`: the
    types its last live view showed."""
    inc = incident(*named, checks=2)
    if read is None:
        return inc
    last = fleet(**read).model_copy(update={"source": "hud"})
    peaks = {n: RunnerQueue(43, 20) for n in read}
    return changed(inc, live=last, peak_types={**inc.peaks.types, **peaks})


def reading(
    empty: bool, *, over: float | None = None, **types: tuple[float | None, float | None]
) -> Reading:
    """`over`: the source counts only jobs queued longer than that (the HUD's threshold)."""
    update = {"absent_means_empty": empty, "queued_over_mins": over}
    return Reading(fleet(**types).model_copy(update=update), NOW)


EMPTY, UNKNOWN = True, False
GPU_READ = {"gpu": (43.0, 20.0)}


@pytest.mark.parametrize(
    ("inc", "now_read", "shown", "missing", "checks"),
    [
        # The followed type left the reading: drained when absence means empty ...
        (followed("gpu", read=GPU_READ), reading(EMPTY, cpu=(5, 30)), {"gpu": 0}, (), 3),
        # ... and unknown otherwise (a restarted listener): the count waits, and the view falls
        # back to every type that queues.
        (followed("gpu", read=GPU_READ), reading(UNKNOWN, cpu=(5, 30)), {"cpu": 5}, ("gpu",), 2),
        # Every label left: an empty answer is "all drained" for the HUD ...
        (followed("gpu", read=GPU_READ), reading(EMPTY), {"gpu": 0}, (), 3),
        # ... asked for jobs queued over 5 min, the drain's own wait limit: the same bar ...
        (followed("gpu", read=GPU_READ), reading(EMPTY, over=5), {"gpu": 0}, (), 3),
        (followed("gpu", read=GPU_READ), reading(EMPTY, over=5, cpu=(5, 30)), {"gpu": 0}, (), 3),
        # ... but over 30: a job may have waited 29 minutes. Shown as such; the count waits.
        (followed("gpu", read=GPU_READ), reading(EMPTY, over=30), {"gpu": 0}, (), 2),
        (followed(read=GPU_READ), reading(EMPTY, over=30, arm=(0, None)), {"gpu": 0}, (), 2),
        # ... and no reading at all for Prometheus: the alert's numbers, which never count.
        (followed("gpu", read=GPU_READ), reading(UNKNOWN), None, (), 0),
        # Present types are read as given, whatever absence means.
        (followed("gpu", read=GPU_READ), reading(EMPTY, gpu=(3, 10)), {"gpu": 3}, (), 0),
        (followed("gpu", read=GPU_READ), reading(EMPTY, gpu=(0, 12)), {"gpu": 0}, (), 0),
        (followed("gpu", read=GPU_READ), reading(EMPTY, gpu=(0, None)), {"gpu": 0}, (), 3),
        (followed("gpu", read=GPU_READ), reading(UNKNOWN, gpu=(0, 4)), {"gpu": 0}, (), 3),
        # An alert's type the source has never listed is more likely misspelt than drained.
        (followed("gpu"), reading(EMPTY, **{"lf.gpu": (5, 30)}), {"lf.gpu": 5}, ("gpu",), 2),
        (followed("gpu"), reading(EMPTY), None, (), 0),
        # A fleet-wide alert: the types it followed, and every type that queues now.
        (followed(read=GPU_READ), reading(EMPTY, arm=(0, None)), {"gpu": 0}, (), 3),
        (followed(read=GPU_READ), reading(EMPTY, cpu=(4, 20)), {"gpu": 0, "cpu": 4}, (), 0),
        (followed(read=GPU_READ), reading(UNKNOWN, arm=(0, None)), {}, ("gpu",), 2),
        # A type nobody follows that is absent changes nothing.
        (followed(read=GPU_READ), reading(EMPTY, gpu=(0, None)), {"gpu": 0}, (), 3),
        # A fleet-wide alert that never read a type: an empty answer may be a wrong org.
        (followed(), reading(EMPTY), None, (), 0),
    ],
)
def test_a_type_absent_from_the_reading_is_drained_only_where_absence_means_empty(
    inc: Incident, now_read: Reading, shown: dict | None, missing: tuple, checks: int
) -> None:
    view = incident_fleet(inc, now_read, backend="the HUD", now=NOW, interval=MINUTE)
    if shown is None:
        assert not view.is_live and "these are the alert's numbers" in view.note
    else:
        assert {n: m.queued for n, m in view.runner_types.items()} == shown
    assert view.missing == missing
    assert drain_checks(inc, view, DRAIN) == checks


@pytest.mark.parametrize(
    ("over", "line"),
    [
        (5, "• gpu: none queued over 5 min"),  # the HUD's queries: only jobs queued over 5 min
        (30, "• gpu: none queued over 30 min"),
        (None, "• gpu: none queued"),  # a GitHub listing read to the end: nothing at all
    ],
)
def test_a_type_that_left_the_answer_reads_as_the_source_said_not_missing(
    over: float | None, line: str
) -> None:
    inc = followed("gpu", read=GPU_READ)
    view = incident_fleet(
        inc, reading(EMPTY, over=over), backend="the HUD", now=NOW, interval=MINUTE
    )
    assert type_lines(view) == [line]
    assert "no numbers" not in view.note and "alert's numbers" not in view.note


def test_a_type_read_at_zero_still_reads_zero_queued() -> None:
    """Only absence is said differently: a count the source gave is shown as given."""
    inc = followed("gpu", read=GPU_READ)
    view = incident_fleet(
        inc, reading(EMPTY, over=5, gpu=(0, None)), backend="the HUD", now=NOW, interval=MINUTE
    )
    assert type_lines(view) == ["• gpu: *0* queued"]


def test_after_a_failed_reading_a_drained_type_the_alert_never_named_still_reads_zero() -> None:
    # The failed reading put the alert's numbers in `live`; the peaks remember what was read.
    inc = followed(read=GPU_READ)
    failed = incident_fleet(inc, Reading(None, NOW, "down"), backend="the HUD", now=NOW,
                            interval=MINUTE)  # fmt: skip
    inc = inc.model_copy(update={"live": failed})
    view = incident_fleet(inc, reading(EMPTY), backend="the HUD", now=NOW, interval=MINUTE)
    assert {n: m.queued for n, m in view.runner_types.items()} == {"gpu": 0}


def test_an_alert_naming_no_type_leaves_another_teams_types_to_its_channel() -> None:
    routing = Routing(
        parse_routes('[{"match": ["runner_type=~\\"gpu.*\\""], "channel": "C0GPU"}]'), "C0CI"
    )
    reading = Reading(fleet(**{"gpu.a10": (12, 40), "cpu": (9, 20), "arm": (0, None)}), NOW)

    def shown(channel: str) -> list[str]:
        inc = incident().model_copy(update={"channel": channel})
        view = incident_fleet(
            inc, reading, backend="Prometheus", now=NOW, interval=MINUTE, routing=routing
        )
        return list(view.runner_types)

    assert shown("C0CI") == ["cpu"]  # the GPU team's alerts speak for its type
    assert shown("C0GPU") == ["gpu.a10"]
    # Without routes every queueing type is every incident's, as before.
    assert list(view_of(incident(), reading).runner_types) == ["gpu.a10", "cpu"]


@pytest.mark.parametrize(
    ("reading", "drained"),
    [
        ({"linux-2xlarge": 0}, True),  # ARC's scale set, named for the type
        ({"linux.2xlarge": 4}, False),
        ({"linux.4xlarge": 0}, None),  # the type is not in the reading: nobody can tell
        ({"linux-2xlarge": None}, None),  # read without its queue: nobody can tell either
    ],
)
def test_a_put_back_reads_its_types_queue_whatever_the_reading_names_it(
    reading: dict[str, float], drained: bool | None
) -> None:
    types = {name: RunnerTypeMetrics(queued=q) for name, q in reading.items()}
    view = FleetSnapshot(
        at=datetime(2026, 11, 25, tzinfo=UTC), source="prometheus", runner_types=types
    )
    assert type_drained(view, "linux.2xlarge", DRAIN) is drained


@pytest.mark.parametrize(
    ("shown_maximum", "desired", "counted"),
    [
        (40.0, 40.0, True),  # the listener has not restarted on the new spec: not shown yet
        (60.0, 60.0, False),  # it has: its desired runners count the 20 booting themselves
    ],
)
def test_a_scale_up_counts_until_a_reading_shows_it(
    shown_maximum: float, desired: float, counted: bool
) -> None:
    """maxRunners 40 → 60 a minute before a reading: a reading still showing a maximum of 40
    predates it in all but its time, so the 20 count as booting; one showing 60 counts them
    itself (desired beyond registered), never twice."""
    scaled_at = NOW - MINUTE
    scaled = Event(
        at=scaled_at,
        kind="scaled",
        text="Scaled gpu by +20: maxRunners 40 → 60 (ARC)",
        scale=ScaleUp(
            runner_type="gpu", added=20, by="alice", at=scaled_at, field="maxRunners", after=60
        ),
    )
    metrics = RunnerTypeMetrics(
        queued=160, busy=40, registered=40, desired=desired, maximum=shown_maximum,
        job_duration_mins=5,
    )  # fmt: skip
    read = judged(FleetSnapshot(at=NOW, source="prometheus", runner_types={"gpu": metrics}), [],
                  interval=MINUTE)  # fmt: skip
    shown = counting_scale_ups(read, [scaled]).runner_types["gpu"].judged
    assert shown is not None
    assert shown.booting == 20
    assert shown.maximum == 60
    assert shown.added_since == (20 if counted else 0)
    assert shown.runners == 7  # 27 needed, 20 of them booting either way


def test_where_the_reading_knows_no_wait_the_alerts_stands_in_said_as_the_alerts() -> None:
    """The GPU type queues and Prometheus knows no wait of it (no start in the last hour): its
    line says the alert's 114 min and when the alert said it, where it read "not known"; the CPU
    type keeps the reading's wait. The drain reads the reading's numbers, never the old alert's."""
    said_at = NOW - 2 * MINUTE
    inc = changed(
        incident("gpu", "cpu"),
        alerted_at=said_at,
    )
    reading = judged(fleet(gpu=(14, None), cpu=(3, 2)), [], interval=MINUTE)
    view = view_of(inc, Reading(reading, NOW))
    cpu, gpu = type_lines(view)
    alerts = f"longest wait *114 min* as the alert said at {md.time_of(said_at)}"
    assert gpu.startswith(f"• gpu: *14* queued · {alerts} · ")
    assert cpu.startswith("• cpu: *3* queued · longest wait *2 min* · ")
    assert view.runner_types["gpu"].longest_wait_mins is None
    # An alert naming no type speaks for the one type shown, not for one of several.
    fleetwide = changed(
        incident(),
        numbers=QueueNumbers(max_queue_time_mins=0.3),
        alerted_at=said_at,
    )
    alone = view_of(fleetwide, Reading(judged(fleet(gpu=(14, None)), [], interval=MINUTE), NOW))
    assert "longest wait *0.3 min* as the alert said at" in type_lines(alone)[0]
    both = judged(fleet(gpu=(14, None), cpu=(3, None)), [], interval=MINUTE)
    assert all(
        "as the alert said" not in line
        for line in type_lines(view_of(fleetwide, Reading(both, NOW)))
    )


def test_a_wait_nothing_knows_is_said_plainly_in_the_line_every_surface_shares() -> None:
    """No alert wait and no start in the last hour: said once, plainly, never in bold."""
    inc = incident().model_copy(update={"runner_types": {"gpu": RunnerQueue(queued=14)}})
    view = view_of(inc, Reading(judged(fleet(gpu=(14, None)), [], interval=MINUTE), NOW))
    unknown = (
        "longest wait not known: ARC times jobs only as they start, and none started in the "
        "last hour"
    )
    assert type_lines(view) == [
        f"• gpu: *14* queued · {unknown} · +14 runners would drain it in 30 min"
    ]
