"""The capacity report's runner pods numbers, as a table of reports → the line a reader sees:
minutes of Pending and OOM kills with their workflows where known, nothing where not."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from bot.domain.reading.capacity import TypeReport
from bot.render.capacity import render_report

BASE = TypeReport(runner_type="linux.2xlarge", incidents=2, firing=timedelta(hours=3))


@pytest.mark.parametrize(
    ("update", "said", "unsaid"),
    [
        ({}, "", ("Pending", "OOM")),  # no runner pods source: nothing, no zeros
        (
            {"pending_pod_mins": 4320, "pending_longest_mins": 360, "unschedulable_hours": 5.9},
            "runner pods Pending 72 pod-hours, the longest 6 h, 5.9 h unschedulable",
            ("OOM",),
        ),
        (
            {"pending_pod_mins": 45, "pending_longest_mins": 12, "unschedulable_hours": 0},
            "runner pods Pending 45 pod-min, the longest 12 min",
            ("unschedulable",),
        ),
        ({"pending_pod_mins": 0}, "runner pods Pending 0 pod-min", ("the longest",)),
        (
            {"oom_kills": 7, "oom_workflows": (("pull", 5), ("trunk", 2))},
            "7 OOM kills (pull 5, trunk 2)",
            ("Pending",),
        ),
        ({"oom_kills": 1}, "1 OOM kill", ("OOM kill (",)),  # none named: the count alone
        (
            {"oom_kills": 2, "oom_workflows": (("<!channel> *x*", 2),)},
            "2 OOM kills (&lt;!channel&gt;",
            ("<!channel>",),
        ),
    ],
)
def test_the_runner_pods_numbers_of_a_type(
    update: dict[str, Any], said: str, unsaid: tuple[str, ...]
) -> None:
    text = render_report([replace(BASE, **update)], days=7, kept_days=30)
    line = next(x for x in text.splitlines() if x.startswith("• *linux.2xlarge*"))
    assert said in line, line
    for word in unsaid:
        assert word not in line, line


def test_the_sources_say_the_kills_are_queuepilots_own_and_kept_eight_days() -> None:
    """The workflows come from the killed pods queuepilot's readings caught, kept 8 days; kills
    only the nodes counted come with the history, said with it."""
    caught = TypeReport(
        runner_type="linux.2xlarge", incidents=1, oom_kills=3, oom_workflows=(("pull", 2),)
    )
    text = render_report([caught], days=30, kept_days=30)
    assert "the OOM-killed pods its readings caught, kept 8 days" in text.splitlines()[-1]
    counted = TypeReport(runner_type="linux.2xlarge", incidents=1, oom_kills=18)
    assert "caught" not in render_report([counted], days=7, kept_days=30).splitlines()[-1]
