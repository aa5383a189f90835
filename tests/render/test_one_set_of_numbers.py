"""One set of numbers: at one moment, the root, a status and diagnostics show the same queue,
the same longest wait and the same advice for each runner type, and the same headline totals,
whatever the live reading holds. (The demo once showed "busy 20/20" on the root beside 30/30 in
diagnostics, and "Queued jobs: 20" beside a type's 30 queued.)"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.causes import Evidence
from bot.domain.diagnostics import diagnose
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.forecast import metrics_outlook
from bot.domain.incident_fleet import as_snapshot
from bot.domain.units import number, wait_said
from bot.render.diagnostics import render_diagnostics
from bot.render.queue import type_outlook
from bot.render.replies import render_status
from bot.render.root import render_root
from tests.support.incidents import make_incident

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)
TYPES = ("linux.2xlarge", "linux.4xlarge", "linux.g5.4xlarge.nvidia.gpu")


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


def text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False).replace("*", "")


def line_of(shown: str, name: str) -> str:
    """The line of one runner type in a message: its queue, wait and advice."""
    found = re.search(re.escape(name) + r"(?: ·|:) ([^\\]*)", shown)
    assert found is not None, f"{name} not shown"
    return found.group(1)


@settings(max_examples=150, deadline=None)
@given(readings())
def test_the_root_a_status_and_diagnostics_show_one_set_of_numbers(live: FleetSnapshot) -> None:
    incident = make_incident(live=live)
    current = as_snapshot(incident, live, NOW)
    root = text(render_root(incident, now=NOW).blocks)
    status = text(
        render_status(incident, previous=None, current=current, now=NOW, view=live).blocks
    )
    # As the action gathers it: each queue's outlook from the incident's trend, as the root's.
    outlooks = {
        n: o for n, m in live.runner_types.items() if (o := type_outlook(n, m, incident.trend))
    }
    evidence = Evidence(outlooks=outlooks)
    report = render_diagnostics(incident, diagnose(live, evidence), live, by="alice").blocks
    diagnostics = text(report)
    total = number(sum(m.queued or 0 for m in live.runner_types.values()))
    assert f"Queued jobs: {total}" in root and f"Queued jobs: {total}" in status
    shown_types = [name for name in live.runner_types if name in diagnostics]
    assert shown_types, "diagnostics show the queueing types"
    for name in shown_types:
        metrics = live.runner_types[name]
        queued = f"{number(metrics.queued or 0)} queued"
        wait = wait_said(metrics.longest_wait_mins)
        for surface in (root, status, diagnostics):
            line = line_of(surface, name)
            assert queued in line and wait in line, (name, line)
        ahead = metrics_outlook(metrics)
        advice = ahead.advice if ahead is not None else ""
        if advice:
            for surface in (root, status, diagnostics):
                assert advice in line_of(surface, name), (name, advice)
