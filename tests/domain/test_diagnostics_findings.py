"""Diagnostics that agree with themselves: each finding said once, the cause it rests on first,
and a next step that reads the queue's course (draining, runners still booting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.reading.causes import Evidence
from bot.domain.reading.diagnostics import Cause, Verdict, diagnose
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.domain.reading.judging import judged

NOW = datetime(2026, 11, 22, 14, 5, tzinfo=UTC)
T = "linux.2xlarge"
# The demo's incident: the periodic workflow's matrix on top of the usual 2 jobs/min, at the
# type's maximum of 20.
SURGING = M(
    queued=40, longest_wait_mins=9, registered=20, busy=20, idle=0, maximum=20, desired=20,
    arrival_per_min=5.0, arrival_baseline_per_min=2.0, job_duration_mins=6,
    duration_baseline_mins=6, completed_per_min=3.3,
)  # fmt: skip
FULL = M(queued=43, registered=120, busy=120, idle=0, maximum=120, desired=120)
GROWING = M(queued=30, registered=40, busy=40, maximum=200, desired=40, job_duration_mins=10)


class _Surge:
    workflow = "periodic"
    text = "periodic (schedule): 28 jobs queued, 70% of the queue"
    history = True


def of(metrics: M, *before: float) -> FleetSnapshot:
    """A reading of `metrics`, judged with the queue at the readings `before` it (a minute
    apart)."""
    history = [
        HistoryPoint(NOW - timedelta(minutes=len(before) - i), {}, {}, {T: {"queued": q}})
        for i, q in enumerate(before)
    ]
    fleet = FleetSnapshot(at=NOW, source="prometheus", runner_types={T: metrics})
    return judged(fleet, history, interval=timedelta(minutes=1))


def said(evidence: Evidence | None, metrics: M) -> list[str]:
    diagnosis = diagnose(of(metrics), evidence)
    return [f"{check.name}: {check.text}" for _, check in diagnosis.evidence]


@pytest.mark.parametrize(
    ("evidence", "cause", "lead", "not_said"),
    [
        # The jobs name the workflow: the 2.5× arrival rate *is* that surge, said once.
        (Evidence(surges={T: _Surge()}, jobs_note=""), Cause.SURGE, "periodic", "no stalled"),
        # The jobs do not say which workflow: still the surge, not the maximum's fault, and no
        # line says "no surge".
        (Evidence(jobs_note=""), Cause.WORKLOAD, "2.5×", "workflow's surge"),
    ],
)
def test_a_surge_is_one_finding_and_the_likely_cause(
    evidence: Evidence, cause: Cause, lead: str, not_said: str
) -> None:
    diagnosis = diagnose(of(SURGING), evidence)
    assert diagnosis.cause is cause and diagnosis.cause is not Cause.AUTOSCALING
    assert diagnosis.lead is not None and lead in diagnosis.lead.text
    assert diagnosis.evidence[0] == (T, diagnosis.lead)  # the cause leads the evidence
    lines = said(evidence, SURGING)
    assert sum("2.5×" in line for line in lines) == 1
    assert not any(not_said in line for line in lines), lines


@pytest.mark.parametrize(
    ("metrics", "before", "advice", "not_advised"),
    [
        # The queue fell over the last readings: it clears, do not raise the maximum.
        (FULL, (51, 47), "linux.2xlarge: none: it clears in ~11 min", "raise"),
        (GROWING, (36, 33), "linux.2xlarge: none: it clears in ~10 min", "+"),
        # Holding steady: the amount stands, and the maximum must rise for it.
        (FULL, (43, 43), "linux.2xlarge: +43 runners would drain it in 30 min; raise the maximum "
         "by 43 (120 → 163)", "clears"),
    ],
)  # fmt: skip
def test_a_falling_queue_gets_when_it_clears_instead_of_more_runners(
    metrics: M, before: tuple[float, ...], advice: str, not_advised: str
) -> None:
    diagnosis = diagnose(of(metrics, *before))
    assert diagnosis.recommendation.startswith(advice), diagnosis.recommendation
    assert not_advised not in diagnosis.recommendation


@pytest.mark.parametrize(
    ("desired", "advice"),
    [
        # 10 asked for and not up yet, against the 10 needed: none more.
        (50, "linux.2xlarge: +10 runners on their way should drain it in 30 min"),
        # 4 of 10: the rest only.
        (44, "linux.2xlarge: +6 runners would drain it in 30 min"),
        # Nothing booting: the whole amount.
        (40, "linux.2xlarge: +10 runners would drain it in 30 min"),
    ],
)
def test_runners_still_booting_count_before_more_are_advised(desired: float, advice: str) -> None:
    booting = GROWING.model_copy(update={"desired": desired})
    diagnosis = diagnose(of(booting, 30, 30))
    assert diagnosis.recommendation == advice


def test_no_surge_is_said_only_when_the_arrival_rate_agrees() -> None:
    calm = M(
        queued=12, assigned=0, registered=50, busy=50, maximum=200, desired=50,
        arrival_per_min=2.0, arrival_baseline_per_min=2.0,
    )  # fmt: skip
    known = "Known causes: no stalled listener, unregistered runners, failing scale-up"
    assert f"{known} or workflow's surge" in said(Evidence(jobs_note=""), calm)
    surging = calm.model_copy(update={"arrival_per_min": 5.0})
    lines = said(Evidence(jobs_note=""), surging)
    assert known in lines  # the rest is still ruled out, the surge no longer


def test_what_the_numbers_cannot_tell_is_said_once_for_every_type() -> None:
    types = {f"t{i}": M(queued=i, longest_wait_mins=10 * i) for i in range(1, 4)}
    diagnosis = diagnose(FleetSnapshot(at=NOW, source="alert", runner_types=types))
    unknown = [(names, c) for names, c in diagnosis.evidence if c.verdict is Verdict.UNKNOWN]
    assert [c.name for _, c in unknown] == ["Not in these numbers", "Known causes"]
    assert unknown[0][0] == "t3, t2, t1"

    assert "(METRICS_BACKEND=prometheus, github or hud)" in unknown[0][1].text


def test_what_a_live_backend_does_not_read_names_that_backend_not_the_setting() -> None:
    """On the HUD's numbers, a missing runner count is what the HUD does not read: the
    backends to set are no advice to someone who has set one already."""
    types = {"t1": M(queued=12, longest_wait_mins=30)}
    diagnosis = diagnose(FleetSnapshot(at=NOW, source="hud", runner_types=types))
    [cannot] = [c for _, c in diagnosis.evidence if c.name == "Not in these numbers"]
    assert cannot.text.endswith("(not read by the HUD)") and "METRICS_BACKEND" not in cannot.text


rates = st.one_of(st.none(), st.floats(0, 20))
counts = st.one_of(st.none(), st.integers(0, 200))


@given(
    queued=st.integers(1, 200),
    registered=counts,
    busy=counts,
    maximum=counts,
    arrival=rates,
    usual=rates,
    duration=rates,
    usual_duration=rates,
    surge=st.booleans(),
)
def test_every_finding_is_said_once_and_never_against_another(
    queued: int,
    registered: int | None,
    busy: int | None,
    maximum: int | None,
    arrival: float | None,
    usual: float | None,
    duration: float | None,
    usual_duration: float | None,
    surge: bool,
) -> None:
    metrics = M(
        queued=queued, registered=registered, busy=busy, maximum=maximum, arrival_per_min=arrival,
        arrival_baseline_per_min=usual, job_duration_mins=duration,
        duration_baseline_mins=usual_duration,
    )  # fmt: skip
    evidence = Evidence(surges={T: _Surge()} if surge else {}, jobs_note="")
    diagnosis = diagnose(of(metrics), evidence)
    names = [check.name for _, check in diagnosis.evidence]
    assert len(names) == len(set(names)) <= 8
    text = " ".join(check.text for _, check in diagnosis.evidence)
    elevated = arrival is not None and usual and arrival / usual >= 1.5
    if elevated or surge:
        assert "or workflow's surge" not in text
    if diagnosis.lead is not None:
        assert diagnosis.evidence[0][1] == diagnosis.lead
