"""Whether a Resolve by hand is asked about once more: the root's numbers against the alert's
thresholds, a table of cases."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.headline import StillLive, still_live
from bot.domain.incident.incidents import Status
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.numbers import still_live_said
from tests.support.incidents import T0, make_incident

ONE_TYPE = {"linux.2xlarge": RunnerQueue(queued=11, longest_wait_mins=40)}


def live(**types: tuple[float | None, float | None]) -> FleetSnapshot:
    metrics = {n: RunnerTypeMetrics(queued=q, longest_wait_mins=w) for n, (q, w) in types.items()}
    return FleetSnapshot(at=T0 + timedelta(minutes=5), source="hud", runner_types=metrics)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        # The user's incident: 11 queued against a threshold of 0, the wait under its own.
        (
            {"numbers": QueueNumbers(40, 11, 60, 0), "runner_types": ONE_TYPE},
            "11 jobs still queued (the alert's threshold is 0)",
        ),
        # Both over.
        (
            {"numbers": QueueNumbers(114, 11, 60, 0), "runner_types": ONE_TYPE},
            "11 jobs still queued (the alert's threshold is 0), the longest wait 114 min (the "
            "alert's threshold is 60 min)",
        ),
        # Under both thresholds: resolved at once.
        ({"numbers": QueueNumbers(40, 11, 60, 20), "runner_types": ONE_TYPE}, None),
        # The live reading is the latest word: it drained, though the alert still said 11.
        (
            {
                "numbers": QueueNumbers(40, 11, 60, 0),
                "runner_types": ONE_TYPE,
                "live": live(**{"linux.2xlarge": (0, None)}),
            },
            None,
        ),
        # ... or it still queues, more than the alert said.
        (
            {
                "numbers": QueueNumbers(40, 11, 60, 0),
                "runner_types": ONE_TYPE,
                "live": live(**{"linux.2xlarge": (22, 12)}),
            },
            "22 jobs still queued (the alert's threshold is 0)",
        ),
        # A threshold per runner type: 4 + 10 queued against 12 is no type over it.
        ({"numbers": QueueNumbers(40, 14, 60, 12)}, None),
        (
            {"numbers": QueueNumbers(40, 14, 60, 8)},
            "14 jobs still queued (the alert's threshold is 8 for a runner type)",
        ),
        # PyTorch's rule says only whether each was crossed: the wait was, the size was not.
        ({}, "the longest wait 114 min (the alert last said it was over its threshold)"),
        # Neither crossed, or nothing known at all (Alertmanager without numbers).
        ({"numbers": QueueNumbers(114, 14, queue_time_over=False, queue_size_over=False)}, None),
        (
            {"numbers": QueueNumbers(), "peak": QueueNumbers(), "runner_types": {}},
            None,
        ),
        # Resolved already: nothing to ask.
        ({"status": Status.RESOLVED, "resolved_at": T0}, None),
    ],
)
def test_a_resolve_is_asked_about_while_the_queue_is_over_its_thresholds(
    changes: dict[str, object], said: str | None
) -> None:
    found = still_live(make_incident(**changes))
    assert (still_live_said(found) if found else None) == said


def test_the_timeline_says_what_was_left_without_the_thresholds() -> None:
    assert still_live_said(StillLive(queued=1, queued_threshold=0), thresholds=False) == (
        "1 job still queued"
    )
    left = StillLive(queued=11, queued_threshold=0, wait=RunnerQueue(longest_wait_mins=114))
    assert (
        still_live_said(left, thresholds=False) == "11 jobs still queued, the longest wait 114 min"
    )
