"""The runbook's checks as tables of cases: what each verdict is for which numbers, and which
cause and next step a responder is told."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.reading.diagnostics import (
    Cause,
    Verdict,
    arrivals,
    autoscaling,
    constraints,
    diagnose,
    duration,
    utilization,
)
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.domain.reading.judging import judged

NOW = datetime(2026, 11, 22, 18, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("metrics", "verdict", "says"),
    [
        (M(queued=5), Verdict.UNKNOWN, "needs runners registered and busy"),
        (M(queued=5, registered=120, busy=120), Verdict.BAD, "120/120 busy (100%)"),
        (M(queued=5, registered=100, busy=60, idle=40), Verdict.WARN, "40 idle while jobs wait"),
        (M(queued=0, registered=100, busy=60, idle=40), Verdict.OK, "60/100 busy (60%)"),
        (M(queued=5, registered=0, busy=0), Verdict.BAD, "no runner registered"),
    ],
)
def test_utilization(metrics: M, verdict: Verdict, says: str) -> None:
    check = utilization(metrics)
    assert (check.verdict, says in check.text) == (verdict, True), check.text


@pytest.mark.parametrize(
    ("now", "usual", "verdict"),
    [
        (None, 2.0, Verdict.UNKNOWN),
        (2.0, None, Verdict.UNKNOWN),
        (2.0, 0.0, Verdict.UNKNOWN),
        (2.2, 2.0, Verdict.OK),
        (3.2, 2.0, Verdict.WARN),
        (6.5, 2.0, Verdict.BAD),
    ],
)
def test_arrival_rate_against_its_baseline(
    now: float | None, usual: float | None, verdict: Verdict
) -> None:
    assert arrivals(M(arrival_per_min=now, arrival_baseline_per_min=usual)).verdict is verdict


@pytest.mark.parametrize(
    ("now", "usual", "verdict"),
    [
        (None, 20.0, Verdict.UNKNOWN),
        (21.0, 20.0, Verdict.OK),
        (28.0, 20.0, Verdict.WARN),
        (45.0, 20.0, Verdict.BAD),
    ],
)
def test_job_duration_against_its_baseline(
    now: float | None, usual: float, verdict: Verdict
) -> None:
    assert duration(M(job_duration_mins=now, duration_baseline_mins=usual)).verdict is verdict


@pytest.mark.parametrize(
    ("metrics", "verdict", "says"),
    [
        (M(queued=3), Verdict.UNKNOWN, "needs capacity limits"),
        (M(registered=120, maximum=120), Verdict.BAD, "at its maximum (120/120)"),
        (M(registered=80, maximum=120, scale_errors=3), Verdict.BAD, "3 scale-up errors"),
        (M(registered=80, maximum=120, offline=4), Verdict.WARN, "4 runners offline"),
        (M(registered=80, maximum=120, offline=0, scale_errors=0), Verdict.OK, "below the maximum"),
    ],
)
def test_resource_constraints(metrics: M, verdict: Verdict, says: str) -> None:
    check = constraints(metrics)
    assert (check.verdict, says in check.text) == (verdict, True), check.text


@pytest.mark.parametrize(
    ("metrics", "verdict", "says"),
    [
        (M(queued=43, busy=120), Verdict.UNKNOWN, "needs the maximum"),
        (
            M(queued=43, busy=120, maximum=120),
            Verdict.BAD,
            "0 fit under the maximum of 120: 43 short",
        ),
        # Runners booting (desired beyond busy) count against the queue: the rest fit.
        (M(queued=10, busy=50, maximum=120, desired=52), Verdict.OK, "fits the maximum of 120"),
        (M(queued=0, busy=50, maximum=120), Verdict.OK, "fits the maximum of 120"),
    ],
)
def test_autoscaling_configuration_is_the_judgements_advice_against_the_maximum(
    metrics: M, verdict: Verdict, says: str
) -> None:
    check = autoscaling(snapshot(t=metrics).runner_types["t"])
    assert (check.verdict, says in check.text) == (verdict, True), check.text


def snapshot(**types: M) -> FleetSnapshot:
    """A reading of `types`, judged as readings are when they arrive (none before it)."""
    fleet = FleetSnapshot(at=NOW, source="prometheus", runner_types=types)
    return judged(fleet, [], interval=timedelta(minutes=1))


@pytest.mark.parametrize(
    ("metrics", "cause", "confidence", "next_step"),
    [
        # The ARC listener fixture: 163 assigned, 120 running, at a maximum of 120.
        (
            M(
                queued=43,
                longest_wait_mins=30,
                registered=120,
                busy=120,
                idle=0,
                maximum=120,
                desired=120,
            ),
            Cause.AUTOSCALING,
            "high",
            "t: +43 runners would drain it in 30 min; raise the maximum by 43 (120 → 163) "
            "(for ARC, maxRunners)",
        ),
        (
            M(
                queued=20,
                registered=40,
                busy=40,
                maximum=200,
                desired=60,
                arrival_per_min=9,
                arrival_baseline_per_min=2,
                completed_per_min=3,
                job_duration_mins=15,
                duration_baseline_mins=15,
            ),
            Cause.WORKLOAD,
            "high",
            "t: +",
        ),
        (
            M(
                queued=12,
                registered=50,
                busy=50,
                maximum=200,
                desired=62,
                arrival_per_min=2,
                arrival_baseline_per_min=2,
                job_duration_mins=60,
                duration_baseline_mins=20,
            ),
            Cause.LONG_JOBS,
            "high",
            "find the slow jobs of t",
        ),
        (
            M(queued=12, registered=50, busy=20, idle=30, maximum=200, desired=62),
            Cause.INFRASTRUCTURE,
            "high",
            "idle t runners take no jobs",
        ),
        (
            M(queued=12, registered=50, busy=50, maximum=200, desired=62, scale_errors=5),
            Cause.SCALE_UP_FAILING,
            "high",
            "fix what the autoscaler reports for t",
        ),
    ],
)
def test_the_likely_cause_and_the_next_step(
    metrics: M, cause: Cause, confidence: str, next_step: str
) -> None:
    diagnosis = diagnose(snapshot(t=metrics))
    assert (diagnosis.cause, diagnosis.confidence) == (cause, confidence), diagnosis.why
    assert next_step in diagnosis.recommendation


def test_from_the_alert_alone_the_report_says_what_it_cannot_know_and_still_advises() -> None:
    alert_only = FleetSnapshot(
        at=NOW, source="alert", runner_types={"linux.2xlarge": M(queued=14, longest_wait_mins=114)}
    )
    diagnosis = diagnose(judged(alert_only, [], interval=timedelta(minutes=1)))
    assert diagnosis.cause is None and diagnosis.confidence == "low"
    assert all(c.verdict is Verdict.UNKNOWN for c in diagnosis.findings[0].checks)
    assert "the alert carries only the queue" in diagnosis.why
    assert diagnosis.recommendation == "linux.2xlarge: +14 runners would drain it in 30 min"


def test_the_worst_queues_are_diagnosed_first_and_at_most_three() -> None:
    types = {f"t{i}": M(queued=i, longest_wait_mins=10 * i) for i in range(1, 6)}
    diagnosis = diagnose(FleetSnapshot(at=NOW, source="alert", runner_types=types))
    assert [f.runner_type for f in diagnosis.findings] == ["t5", "t4", "t3"]


def test_a_short_jobs_duration_is_said_in_tenths_of_a_minute_not_as_0_min() -> None:
    """A fleet whose jobs take 20 s (the demo's, on the wall clock) read "0 min per job"."""
    check = duration(M(job_duration_mins=0.3, duration_baseline_mins=0.25))
    assert check.text == "0.3 min per job against 0.2 min usually (1.2×)"
