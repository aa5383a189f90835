"""One set of numbers: at one moment, the root, a status and diagnostics show the same queue,
the same longest wait and the same advice for each runner type, and the same headline totals,
whatever the live reading holds; the scale modal offers that advice, the early warning says it
for its reading, and the summary's peaks are the most that the root and the statuses showed.
The advice drains the queue within the one drain target (`DRAIN_TARGET_MINUTES`) everywhere.
(The demo once showed "busy 20/20" on the root beside 30/30 in diagnostics, "Queued jobs: 20"
beside a type's 30 queued, and a summary's "Peak queued jobs: 36" beside "Peak by runner type:
30" without saying which was which; with a target of 20 minutes, a status said "+N runners
would drain it in 20 min" while the root, diagnostics and the modal said another number "in 30
min".)"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incident_fleet import alert_fleet, as_snapshot, judgement_of
from bot.domain.incident.incidents import (
    Incident,
    Resolution,
    record_status,
    sums_types,
    with_live,
)
from bot.domain.reading.diagnostics import diagnose
from bot.domain.reading.early_warning import Forecast, Point, Thresholds, WarningState, forecast
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.judging import judged
from bot.domain.scale.scaling import Capacity, ScaleOwner, ScalePreview, ScaleTarget, scale_default
from bot.domain.units import minutes, number
from bot.render.diagnostics import render_diagnostics
from bot.render.early_warning import render_warning
from bot.render.numbers import wait_of
from bot.render.replies import render_status, render_summary
from bot.render.root import render_root
from bot.render.scale_modal import ScaleForm, render_scale_form
from tests.support.incidents import changed, make_incident

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
TYPES = ("linux.2xlarge", "linux.4xlarge", "linux.g5.4xlarge.nvidia.gpu")
# Drain targets (`DRAIN_TARGET_MINUTES`): the default and others an operator may set.
TARGETS = (30.0, 20.0, 45.0)
targets = st.sampled_from(TARGETS)


@st.composite
def readings(draw: st.DrawFn) -> FleetSnapshot:
    names = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True))
    types = {}
    for name in names:
        registered = float(draw(st.integers(0, 300)))
        types[name] = RunnerTypeMetrics(
            queued=float(draw(st.integers(1, 500))),
            longest_wait_mins=float(draw(st.integers(0, 240))),
            registered=registered,
            busy=registered,
            maximum=float(draw(st.integers(int(registered), 400))),
            desired=float(draw(st.integers(0, 400))),
            arrival_per_min=draw(st.sampled_from([None, 1.0, 4.0])),
            completed_per_min=draw(st.sampled_from([None, 2.0, 3.0])),
            job_duration_mins=draw(st.sampled_from([None, 6.0, 30.0])),
        )
    return FleetSnapshot(at=NOW, source="prometheus", runner_types=types)


def judged_at(fleet: FleetSnapshot, within: float) -> FleetSnapshot:
    """The reading as it arrives: judged once, at the drain target `within`."""
    return judged(fleet, [], interval=timedelta(minutes=1), within_mins=within)


def text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False).replace("*", "")


def line_of(shown: str, name: str) -> str:
    """The line of one runner type in a message: its queue, wait and advice."""
    found = re.search(r"(?<!Next: )" + re.escape(name) + r"(?: ·|:) ([^\\]*)", shown)
    assert found is not None, f"{name} not shown"
    return found.group(1)


def drains_within(shown: str, within: float) -> bool:
    """Whether every advice in a message drains the queue within `within`, none another target."""
    return not any(f"drain it in {minutes(other)}" in shown for other in TARGETS if other != within)


@settings(max_examples=150, deadline=None)
@given(readings(), targets)
def test_the_root_a_status_and_diagnostics_show_one_set_of_numbers(
    live: FleetSnapshot, within: float
) -> None:
    live = judged_at(live, within)
    incident = make_incident(live=live)
    current = as_snapshot(incident, live, NOW)
    root = text(render_root(incident, now=NOW, within_mins=within).blocks)
    status = text(
        render_status(incident, previous=None, current=current, now=NOW, view=live).blocks
    )
    report = render_diagnostics(incident, diagnose(live), live, by="alice").blocks
    diagnostics = text(report)
    total = number(sum(m.queued or 0 for m in live.runner_types.values()))
    assert f"Queued jobs: {total}" in root and f"Queued jobs: {total}" in status
    shown_types = [name for name in live.runner_types if name in diagnostics]
    assert shown_types, "diagnostics show the queueing types"
    for name in shown_types:
        metrics = live.runner_types[name]
        queued = f"{number(metrics.queued or 0)} queued"
        wait = wait_of(RunnerQueue(longest_wait_mins=metrics.longest_wait_mins))
        for surface in (root, status, diagnostics):
            line = line_of(surface, name)
            assert queued in line and wait in line, (name, line)
        advice = metrics.judged.advice if metrics.judged is not None else ""
        if advice:
            for surface in (root, status, diagnostics):
                assert advice in line_of(surface, name), (name, advice)
    for surface in (root, status, diagnostics):
        assert drains_within(surface, within), (within, surface)


# -- the summary: its peaks are the most the root and the statuses showed -----------------------


@st.composite
def alerts(draw: st.DrawFn) -> tuple[QueueNumbers, dict[str, RunnerQueue]]:
    """An alert's numbers: the types it names with their queues (maybe none), and its own
    figure, its rule's maximum (the largest type's, when it names them)."""
    named = draw(st.lists(st.sampled_from(TYPES), max_size=3, unique=True))
    types = {
        name: RunnerQueue(
            queued=float(draw(st.integers(0, 60))),
            longest_wait_mins=float(draw(st.integers(0, 200))),
        )
        for name in named
    }
    queued = [q.queued or 0 for q in types.values()]
    waits = [q.longest_wait_mins or 0 for q in types.values()]
    figure = max(queued) if queued else float(draw(st.integers(1, 80)))
    wait = max(waits) if waits else float(draw(st.integers(1, 200)))
    return QueueNumbers(wait, figure, queue_size_threshold=20), types


def shown_queued(shown: str) -> float:
    found = re.search(r"Queued jobs: (\d+(?:\.\d)?)", shown)
    assert found is not None, shown
    return float(found.group(1))


def alert_resolved(incident: Incident, at: datetime) -> Incident:
    """As the alert's resolve leaves it: its numbers cleared, its peaks kept."""
    return changed(
        incident,
        resolution=Resolution.ALERT,
        resolved_at=at,
        numbers=QueueNumbers(),
        runner_types={},
    )


@settings(max_examples=150, deadline=None)
@given(alerts(), st.lists(st.one_of(st.none(), readings()), max_size=4))
def test_the_summarys_peaks_are_the_most_the_root_and_the_statuses_showed(
    alert: tuple[QueueNumbers, dict[str, RunnerQueue]], steps: list[FleetSnapshot | None]
) -> None:
    """Each step a status: from a reading, or (None) from the alert's numbers when no reading
    stands in. The summary's peak queue is the most "Queued jobs" any of them showed, said as
    what it was where first shown (the types' queues summed, or the alert's own figure); each
    type's peak is the most it showed, and never more than the total; the resolved root says
    the same as the summary."""
    numbers, types = alert
    incident = make_incident(
        numbers=numbers, runner_types=types, peak=QueueNumbers(), peak_types={}
    )
    incident = with_live(incident, None, incident.snapshot(NOW))  # the intake
    shown = [(shown_queued(text(render_root(incident, now=NOW).blocks)), sums_types(types))]
    per_type: dict[str, list[float]] = {n: [q.queued or 0] for n, q in types.items()}
    waits = [numbers.max_queue_time_mins or 0]
    for i, live in enumerate(steps):
        at = NOW + timedelta(minutes=i + 1)
        view = live if live is not None else alert_fleet(incident, now=at)
        current = as_snapshot(incident, view, at)
        status = text(
            render_status(incident, previous=None, current=current, now=at, view=view).blocks
        )
        shown.append((shown_queued(status), sums_types(current.runner_types)))
        for name, queue in current.runner_types.items():
            assert f"{number(queue.queued or 0)} queued" in line_of(status, name)
            per_type.setdefault(name, []).append(queue.queued or 0)
        waits += [q.longest_wait_mins or 0 for q in current.runner_types.values()]
        incident = record_status(incident, current, live=view)
    done = alert_resolved(incident, NOW + timedelta(hours=1))
    summary = text(render_summary(done, [], now=NOW + timedelta(hours=1)).blocks)
    root = text(render_root(done, now=NOW + timedelta(hours=1)).blocks)

    peak = max(queued for queued, _ in shown)
    summed = next(summed for queued, summed in shown if queued == peak)
    label = "Peak queued jobs"
    if not summed:
        label += " (as the alert said)"
    elif len(per_type) > 1:
        label += " (all runner types)"
    for surface in (summary, root):
        assert f"{label}: {number(peak)}" in surface, (label, peak, surface)
        assert f"Peak longest wait: {minutes(max(waits))}" in surface
    for name, seen in per_type.items():
        assert max(seen) <= peak
        assert f"{number(max(seen))} queued" in line_of(
            summary.split("Peak by runner type")[1], name
        )


# -- the scale modal: the root's recommendation, against the capacity the root shows ------------


@settings(max_examples=150, deadline=None)
@given(readings(), targets)
def test_the_scale_modal_offers_the_roots_recommendation(
    live: FleetSnapshot, within: float
) -> None:
    """The modal's "Now:" is the runners and maximum the root's line and advice speak of (a
    scaler reporting the same fleet), its amount the root's advice."""
    live = judged_at(live, within)
    incident = make_incident(live=live)
    root = text(render_root(incident, now=NOW, within_mins=within).blocks)
    for name, metrics in live.runner_types.items():
        line = line_of(root, name)
        runners, most = int(metrics.registered or 0), int(metrics.maximum or 0)
        capacity = Capacity(current=runners, minimum=0, maximum=most)
        judgement = judgement_of(incident, name, now=NOW, within_mins=within)
        assert judgement is not None and judgement == metrics.judged
        target = ScaleTarget(name, "arc-runners/" + name, cap=50)
        default = scale_default(
            judgement, target, capacity, can_raise_maximum=True, refusal=lambda _d, _r: ""
        )
        preview = ScalePreview(
            target, capacity, "", judgement, can_raise_maximum=True, default=default
        )
        form = render_scale_form(
            ScaleForm("12:u12", "C1", name), ScaleOwner((name,), incident=incident), preview
        )
        modal = text(form["blocks"])
        assert f"busy {number(metrics.busy or 0)}/{runners}" in line
        assert f"Now: {runners} runners (min 0, max {most})" in modal
        assert drains_within(modal, within), (within, modal)
        if judgement.advice:
            assert judgement.advice in line and judgement.advice in modal, (line, modal)
        amount = next(b for b in form["blocks"] if b.get("block_id") == "amount")
        filled = amount["element"].get("initial_value")
        if not judgement.runners:
            assert filled is None, "nothing advised: nothing filled in"
        elif default.raise_maximum and judgement.new_maximum is not None:
            # The maximum raised to the advice's new maximum, from the target's own.
            assert filled == str(min(judgement.new_maximum - most, 50))
        else:
            assert filled == str(min(judgement.runners, 50))


# -- the early warning: its queue and its advice, as the root's for the same reading ------------


Case = tuple[RunnerTypeMetrics, list[Point], Thresholds]


@st.composite
def building(draw: st.DrawFn) -> Case:
    """A runner type whose jobs in the system (busy and queued) rose in a line, `rise` a
    minute, to the reading now; the alert's threshold a few jobs above its queue."""
    rise = float(draw(st.integers(2, 10)))
    now = float(draw(st.integers(0, 40))) + 4 * rise
    busy = float(draw(st.integers(0, int(now))))
    rates = draw(st.sampled_from([(None, None), (4.0, 2.0), (6.0, 1.0), (3.0, 2.5), (9.0, 0.0)]))
    metrics = RunnerTypeMetrics(
        queued=now - busy,
        registered=busy,
        busy=busy,
        maximum=float(draw(st.integers(int(busy), 120))),
        desired=draw(st.sampled_from([None, busy, busy + 5])),
        arrival_per_min=rates[0],
        completed_per_min=rates[1],
        job_duration_mins=draw(st.sampled_from([None, 6.0, 30.0])),
    )
    past = [Point(NOW - timedelta(minutes=k), now - rise * k) for k in (4, 3, 2, 1)]
    return metrics, past, Thresholds(queued=now - busy + draw(st.integers(1, 10)))


def warned(case: Case, within: float = TARGETS[0]) -> tuple[str, Forecast, str]:
    """The warning's forecast for the case's reading, its message, and the root's line for that
    reading, at the drain target `within`."""
    raw, past, thresholds = case
    name = TYPES[0]
    live = judged_at(FleetSnapshot(at=NOW, source="prometheus", runner_types={name: raw}), within)
    metrics = live.runner_types[name]
    said = forecast(name, metrics, NOW, past, thresholds, boot_mins=30, horizon_mins=60)
    assert said is not None, "the case builds towards the threshold"
    state = WarningState.raised(name, "C1", said.text, NOW.timestamp())
    root = text(render_root(make_incident(live=live), now=NOW, within_mins=within).blocks)
    return text(render_warning(state).blocks), said, line_of(root, name)


@settings(max_examples=200, deadline=None)
@given(building())
def test_the_early_warning_says_the_roots_queue_for_its_reading(case: Case) -> None:
    warning, _, root = warned(case)
    queued = case[0].queued or 0
    assert f"{number(queued)} queued" in root
    assert ("no jobs queued yet" if queued == 0 else f"{number(queued)} job") in warning


# A reading whose backend counts arrivals (6/min) and completions (1/min) while the warning's
# fitted line rises 2/min: the root, a status, diagnostics and the modal advise at 5 jobs/min.
COUNTED = (
    RunnerTypeMetrics(
        queued=8,
        registered=0,
        busy=0,
        maximum=0,
        arrival_per_min=6,
        completed_per_min=1,
        job_duration_mins=6,
    ),
    [Point(NOW - timedelta(minutes=k), 8 - 2 * k) for k in (4, 3, 2, 1)],
    Thresholds(queued=9),
)


@example(COUNTED, 20.0)
@settings(max_examples=200, deadline=None)
@given(building(), targets)
def test_the_early_warning_advises_as_the_root_for_its_reading(case: Case, within: float) -> None:
    """The warning's runners and advice are its reading's judgement, as the root's line for
    that reading says it."""
    warning, said, root = warned(case, within)
    assert drains_within(warning, within), (within, warning)
    if said.advice:
        assert said.advice in warning and said.advice in root, (said.advice, root)
