"""Causes a CI engineer recognises, as tables of snapshots and their history → finding: each
named with the numbers that show it and the next step that fits it, or left out, saying which
source would tell."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.queue_cost.jobs import Slower, Surge, Trigger
from bot.domain.reading.causes import RULES, Cause, Evidence, Facts, Found, said
from bot.domain.reading.diagnostics import Diagnosis, Verdict, diagnose
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.domain.reading.runner_pods import RunnerPods

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)


def history(name: str, *gauges: dict[str, float], every_mins: float = 1.0) -> list[HistoryPoint]:
    """Past readings of one type, newest first, one per `every_mins` before now."""
    return [
        HistoryPoint(NOW - timedelta(minutes=every_mins * (i + 1)), {}, {}, {name: g})
        for i, g in enumerate(gauges)
    ]


def steady(name: str, minutes: int, **gauges: float) -> list[HistoryPoint]:
    return history(name, *([dict(gauges)] * minutes))


def rule_says(
    cause: Cause, name: str, m: M, evidence: Evidence, fleet: Mapping[str, M] | None = None
) -> Found | str | None:
    """What the table's rules for `cause` say of `name`: a finding, what would tell, or nothing."""
    rules = (rule for rule in RULES if rule.cause is cause)
    found, missing = said(Facts(name, m, evidence, fleet or {name: m}, NOW), rules)
    return found[0] if found else (missing[0] if missing else None)


STALLED = M(queued=43, assigned=163, registered=100, busy=96, idle=4, maximum=120, desired=120)


@pytest.mark.parametrize(
    ("metrics", "past", "finding"),
    [
        # ARCListenerStall: 163 assigned for 16 minutes, 4 idle runners.
        (STALLED, steady("t", 16, assigned=163), "163 jobs assigned and unchanged for 16 min"),
        # Below its maximum with nothing idle still counts: the listener asks for no runners.
        (
            M(queued=9, assigned=30, registered=21, idle=0, maximum=40),
            steady("t", 20, assigned=30),
            "while below its maximum",
        ),
        # Moved 5 minutes ago: not frozen for 15.
        (STALLED, steady("t", 5, assigned=163) + steady("t", 15, assigned=150), None),
        # Frozen, but at the maximum and all busy: a full fleet, not a stall.
        (
            M(queued=43, assigned=163, registered=120, busy=120, idle=0, maximum=120),
            steady("t", 30, assigned=163),
            None,
        ),
        # Nothing assigned: nothing to stall.
        (M(queued=0, assigned=0, idle=4), steady("t", 30, assigned=0), None),
    ],
)
def test_a_listener_that_stopped_acting_on_its_assigned_jobs(
    metrics: M, past: list[HistoryPoint], finding: str | None
) -> None:
    outcome = rule_says(Cause.LISTENER_STALLED, "t", metrics, Evidence(history=past))
    if finding is None:
        assert not isinstance(outcome, Found), outcome
    else:
        assert isinstance(outcome, Found) and outcome.cause is Cause.LISTENER_STALLED
        assert finding in outcome.evidence
        assert "restart the ARC listener of t" in outcome.advice


@pytest.mark.parametrize(
    ("metrics", "past", "says"),
    [
        (M(queued=9, idle=3), [], "needs assigned jobs over time (ARC's listener metrics"),
        (STALLED, steady("t", 10, assigned=163), "needs 15 minutes of readings"),
    ],
)
def test_without_the_data_the_stall_check_says_what_would_tell(
    metrics: M, past: list[HistoryPoint], says: str
) -> None:
    outcome = rule_says(Cause.LISTENER_STALLED, "t", metrics, Evidence(history=past))
    assert isinstance(outcome, str) and says in outcome


@pytest.mark.parametrize(
    ("metrics", "past", "finding"),
    [
        # Asked for 60, 40 registered for 12 minutes; boots take 5.
        (
            M(queued=20, desired=60, registered=40, maximum=100),
            steady("t", 12, desired=60, registered=40),
            "wants 60 runners, 40 registered, for 12 min",
        ),
        # Short for 3 minutes only: still booting.
        (
            M(queued=20, desired=60, registered=40, maximum=100),
            steady("t", 3, desired=60, registered=40) + steady("t", 9, desired=40, registered=40),
            None,
        ),
        # Offline runners while jobs wait.
        (M(queued=5, registered=30, offline=6), [], "6 of 36 runners offline"),
        # Everything asked for is there.
        (M(queued=5, desired=40, registered=40), steady("t", 30, desired=40, registered=40), None),
        # The missing runners' pods cannot be scheduled: that cause says it, with their numbers.
        (
            M(queued=20, desired=60, registered=40, pods=RunnerPods(unschedulable=20)),
            steady("t", 12, desired=60, registered=40),
            None,
        ),
        # One pod stuck among twenty missing explains one, not the other nineteen.
        (
            M(queued=20, desired=60, registered=40, pods=RunnerPods(image_pull=1)),
            steady("t", 12, desired=60, registered=40),
            "wants 60 runners, 40 registered, for 12 min",
        ),
    ],
)
def test_runners_the_autoscaler_asked_for_that_never_register(
    metrics: M, past: list[HistoryPoint], finding: str | None
) -> None:
    outcome = rule_says(Cause.NOT_REGISTERING, "t", metrics, Evidence(history=past))
    if finding is None:
        assert not isinstance(outcome, Found), outcome
    else:
        assert isinstance(outcome, Found) and outcome.cause is Cause.NOT_REGISTERING
        assert finding in outcome.evidence


def test_a_short_boot_is_said_in_tenths_of_a_minute_not_about_zero() -> None:
    past = steady("t", 2, desired=14, registered=10)
    evidence = Evidence(history=past, boot_mins=0.1)  # the demo's boot at ×60
    short = M(queued=20, desired=14, registered=10)
    outcome = rule_says(Cause.NOT_REGISTERING, "t", short, evidence)
    assert isinstance(outcome, Found) and "(a boot takes about 0.1 min)" in outcome.evidence


@pytest.mark.parametrize(
    ("failures", "errors", "says", "advice"),
    [
        (
            {"t": ["Launching a new EC2 instance failed: InsufficientInstanceCapacity"]},
            None,
            "InsufficientInstanceCapacity",
            "fix what the autoscaler reports",
        ),
        (
            {"t": ["You have requested more vCPU capacity than your current vCPU limit"]},
            None,
            "vCPU",
            "raise the quota",
        ),
        ({}, 4.0, "4 scale-up errors", "fix what the autoscaler reports"),
        ({"t": None}, None, None, None),
        ({"t": []}, 0.0, None, None),
    ],
)
def test_a_scale_up_the_autoscaler_itself_reports_failing(
    failures: dict[str, list[str] | None],
    errors: float | None,
    says: str | None,
    advice: str | None,
) -> None:
    m, evidence = M(queued=9, scale_errors=errors), Evidence(scaler_failures=failures)
    found = rule_says(Cause.SCALE_UP_FAILING, "t", m, evidence)
    if says is None:
        assert found is None
    else:
        assert found is not None and found.cause is Cause.SCALE_UP_FAILING
        assert says in found.evidence and advice is not None and advice in found.advice


def short(name: str, minutes: int) -> list[HistoryPoint]:
    return steady(name, minutes, desired=30, registered=10)


@pytest.mark.parametrize(
    ("fleet", "found"),
    [
        # Two types below their maximum, both short of runners for 20 minutes: a shared limit.
        (
            {
                "a": M(queued=9, desired=30, registered=10, maximum=50),
                "b": M(queued=4, desired=30, registered=10, maximum=50),
            },
            True,
        ),
        # One type alone: its own nodes, not the organisation.
        ({"a": M(queued=9, desired=30, registered=10, maximum=50)}, False),
        # Another queueing type is at its maximum: the limit is that type's own.
        (
            {
                "a": M(queued=9, desired=30, registered=10, maximum=50),
                "b": M(queued=4, desired=50, registered=50, maximum=50),
            },
            False,
        ),
    ],
)
def test_the_organisations_limit_when_no_type_gets_runners_below_its_maximum(
    fleet: dict[str, M], found: bool
) -> None:
    past = [
        HistoryPoint(
            NOW - timedelta(minutes=i + 1),
            {},
            {},
            {name: {"desired": 30, "registered": 10} for name in fleet},
        )
        for i in range(20)
    ]
    outcome = rule_says(Cause.ORG_LIMIT, "a", fleet["a"], Evidence(history=past), fleet)
    assert (outcome is not None) is found
    if outcome is not None:
        assert outcome.cause is Cause.ORG_LIMIT and "2 runner types" in outcome.evidence
        assert "quota" in outcome.advice


def test_a_stalled_listener_is_the_likely_cause_and_the_advice_is_not_to_scale() -> None:
    """The fixture's numbers (163 assigned at a maximum of 120) read "raise the maximum" on their
    own; with assigned frozen and runners idle, the report says restart the listener."""
    snapshot = FleetSnapshot(at=NOW, source="prometheus", runner_types={"t": STALLED})
    diagnosis = diagnose(snapshot, Evidence(history=steady("t", 16, assigned=163)))
    assert diagnosis.cause is Cause.LISTENER_STALLED and diagnosis.confidence == "high"
    assert "163 jobs assigned and unchanged for 16 min" in diagnosis.why
    assert "infrastructure problems" in diagnosis.why
    assert diagnosis.recommendation.startswith("restart the ARC listener of t")
    # The named cause is a finding of its own, and the report's first line of evidence.
    assert diagnosis.lead == diagnosis.findings[0].check("Listener stalled")
    assert diagnosis.lead is not None and diagnosis.lead.verdict is Verdict.BAD
    assert diagnosis.evidence[0] == ("t", diagnosis.lead)


class _Surge:
    workflow = "periodic"
    text = "periodic (schedule): 38 arrivals in the last hour against 12 a day before (3.2×)"
    history = True


def test_one_workflows_surge_is_named_with_its_numbers_and_the_advice_to_defer_it() -> None:
    at_max = M(queued=43, registered=120, busy=120, idle=0, maximum=120, desired=120)
    snapshot = FleetSnapshot(at=NOW, source="prometheus", runner_types={"t": at_max})
    diagnosis = diagnose(snapshot, Evidence(surges={"t": _Surge()}))
    assert diagnosis.cause is Cause.SURGE
    assert "38 arrivals in the last hour against 12 a day before" in diagnosis.why
    assert "cancel or defer periodic" in diagnosis.recommendation


def test_most_of_the_queue_without_a_day_before_is_a_surge_only_when_arrivals_rose() -> None:
    """With no arrivals a day before to compare, a workflow holding most of the queue is named
    only while the type's arrivals are above their usual rate: at it, the workflow holds its
    usual share of a queue that capacity left, and the runners at their maximum are the cause."""
    surge = Surge("t", "pull", Trigger.PULL_REQUEST, 14, 0, 6, 0.6, history=False)

    def cause_at(arrivals: float) -> Diagnosis:
        at_max = M(
            queued=21,
            registered=20,
            busy=20,
            idle=0,
            maximum=20,
            desired=20,
            arrival_per_min=arrivals,
            arrival_baseline_per_min=2.0,
        )
        snapshot = FleetSnapshot(at=NOW, source="prometheus", runner_types={"t": at_max})
        return diagnose(snapshot, Evidence(surges={"t": surge}))

    usual = cause_at(2.0)
    assert usual.cause is not Cause.SURGE and "cancel or defer" not in usual.recommendation
    assert "One workflow's surge" not in str(usual.findings)
    risen = cause_at(8.0)
    assert risen.cause is Cause.SURGE and "cancel or defer pull" in risen.recommendation
    assert "60% of the queue" in risen.why


def test_without_jobs_or_history_the_report_says_which_source_would_tell() -> None:
    snapshot = FleetSnapshot(at=NOW, source="alert", runner_types={"t": M(queued=14)})
    check = diagnose(snapshot).findings[0].checks[-1]
    assert check.verdict is Verdict.UNKNOWN
    assert "ARC's listener metrics" in check.text and "JOBS_BACKEND=github or hud" in check.text


def test_jobs_that_got_slower_are_named_with_the_workflows_and_the_advice_to_find_why() -> None:
    busy = M(queued=12, registered=50, busy=50, maximum=200, desired=62)
    snapshot = FleetSnapshot(at=NOW, source="github", runner_types={"t": busy})
    slower = Slower("periodic", 40, 20)
    diagnosis = diagnose(snapshot, Evidence(slower={"t": [slower]}))
    assert diagnosis.cause is Cause.LONG_JOBS
    assert "periodic jobs take 40 min against 20 a day before (2.0×)" in diagnosis.why
    assert diagnosis.recommendation.startswith("find why periodic jobs got slower")
