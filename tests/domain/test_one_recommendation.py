"""One judgement: for any reading of a runner type and any queue before it, the root's and a
status's line, the scale form's default and diagnostics' next step render the judgement the
reading carries, in the same words; none advises runners for a queue that visibly falls and
clears in time. (The served bot is held to the same on scripted fleets in
tests/system/test_trajectories.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.incident.incident_fleet import judgement_of
from bot.domain.reading.diagnostics import diagnose
from bot.domain.reading.fleet import FleetSnapshot, HistoryPoint, RunnerTypeMetrics
from bot.domain.reading.judging import judged
from bot.render.numbers import type_lines
from tests.support.incidents import make_incident

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
TYPE = "linux.2xlarge"

rates = st.one_of(st.none(), st.floats(0, 20, allow_nan=False).map(lambda x: round(x, 1)))
counts = st.one_of(st.none(), st.integers(0, 200).map(float))


@st.composite
def readings(draw: st.DrawFn) -> FleetSnapshot:
    registered = draw(counts)
    metrics = RunnerTypeMetrics(
        queued=float(draw(st.integers(1, 300))),
        arrival_per_min=draw(rates),
        completed_per_min=draw(rates),
        job_duration_mins=draw(st.one_of(st.none(), st.floats(0.5, 120).map(lambda x: round(x)))),
        registered=registered,
        busy=registered,
        desired=draw(counts),
        maximum=draw(counts),
    )
    before = draw(st.lists(st.integers(0, 300), max_size=3))
    history = [
        HistoryPoint(NOW - timedelta(minutes=len(before) - i), {}, {}, {TYPE: {"queued": q}})
        for i, q in enumerate(before)
    ]
    fleet = FleetSnapshot(at=NOW, source="prometheus", runner_types={TYPE: metrics})
    return judged(fleet, history, interval=timedelta(minutes=1))


@given(readings())
def test_every_surface_renders_the_one_judgement(live: FleetSnapshot) -> None:
    judgement = live.runner_types[TYPE].judged
    assert judgement is not None
    incident = make_incident(live=live)
    (line,) = type_lines(live, incident.trend)  # the root's, a status's and `/queue`'s line
    assert judgement.advice in line.replace("*", "")
    assert judgement.heading in line
    # The scale form's default.
    assert judgement_of(incident, TYPE, now=NOW) == judgement
    # Diagnostics' next step says the same words, or names another fix first.
    step = diagnose(live).recommendation
    if judgement.advice and "+" in step:
        assert judgement.advice in step
    if judgement.clears_in_mins is not None:
        assert "+" not in line and "raise" not in line, "a queue that clears needs no runners"
