"""One recommendation: for any reading of a runner type, the root's and a status's line, the
scale modal's prefill and diagnostics' next step advise the same number of runners, in the same
words, from one computation (`bot.domain.forecast.outlook`), and none advises more runners for a
queue that drains by itself."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.forecast import metrics_outlook
from bot.domain.next_step import Course, drain_amount, more_runners
from bot.render.queue import recommend_for, type_lines, type_outlook
from tests.support.incidents import make_incident

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
TYPE = "linux.2xlarge"

rates = st.one_of(st.none(), st.floats(0, 20, allow_nan=False).map(lambda x: round(x, 1)))
counts = st.one_of(st.none(), st.integers(0, 200).map(float))


@st.composite
def readings(draw: st.DrawFn) -> RunnerTypeMetrics:
    registered = draw(counts)
    return RunnerTypeMetrics(
        queued=float(draw(st.integers(1, 300))),
        arrival_per_min=draw(rates),
        completed_per_min=draw(rates),
        job_duration_mins=draw(st.one_of(st.none(), st.floats(0.5, 120).map(lambda x: round(x)))),
        registered=registered,
        busy=registered,
        desired=draw(counts),
        maximum=draw(counts),
    )


@given(readings())
def test_every_surface_advises_the_same_runners(metrics: RunnerTypeMetrics) -> None:
    live = FleetSnapshot(at=NOW, source="prometheus", runner_types={TYPE: metrics})
    incident = make_incident(live=live)
    ahead = type_outlook(TYPE, metrics, incident.trend)
    assert ahead == metrics_outlook(metrics)  # the root's, a status's and `/queue`'s line
    assert ahead is not None
    (line,) = type_lines(live, incident.trend)
    if ahead.advice:
        assert ahead.advice in line.replace("*", "")
    # The scale modal prefills it (nothing when the queue drains or booting runners cover it).
    modal = recommend_for(incident, TYPE)
    assert modal is not None and modal.runners == (ahead.runners or 0)
    assert modal.why == ahead.text
    # Diagnostics' next step asks for the same number, or none.
    course = Course(ahead, None, NOW)
    amount = drain_amount(metrics, course)
    step = more_runners(TYPE, *amount, course, verb=f"scale {TYPE} by") if amount else ""
    if ahead.clears_in:
        assert "draining" in step and "+" not in step, "a draining queue needs no more runners"
    elif ahead.runners:
        assert f"scale {TYPE} by +{ahead.runners}" in step
    elif ahead.booting and ahead.needed:
        assert step.startswith("wait: "), "what is booting covers it"


@given(readings())
def test_a_draining_queue_is_never_told_to_add_runners(metrics: RunnerTypeMetrics) -> None:
    draining = metrics.model_copy(update={"arrival_per_min": 1.0, "completed_per_min": 4.0})
    ahead = metrics_outlook(draining)
    assert ahead is not None and ahead.runners is None and ahead.advice == ""
    assert ahead.text.startswith("draining ~3.0 jobs/min → clear in ~")
