"""Which statuses are worth a new reply, an edit of the last one, or nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incidents import (
    Advice,
    DrainRule,
    Incident,
    Snapshot,
    is_material,
    record_status,
)
from bot.status.tick import status_kind
from bot.storage.incident_store import RESTATUS, STATUS
from tests.support.incidents import changed, make_incident

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
DRAIN = DrainRule(max_queued=0, max_wait_mins=5)
NONE: Advice = ("holding", 0, 0, 0)


def snap(
    minutes: float = 0,
    queued: float | None = 25,
    wait: float | None = 30,
    advice: Advice = NONE,
    *,
    size_limit: float | None = None,
    wait_limit: float | None = None,
) -> Snapshot:
    numbers = QueueNumbers(
        max_queue_time_mins=wait,
        max_queue_size=queued,
        queue_time_threshold=wait_limit,
        queue_size_threshold=size_limit,
    )
    return Snapshot(
        at=T0 + timedelta(minutes=minutes),
        numbers=numbers,
        runner_types={"gpu": RunnerQueue(queued, wait)},
        advice={"gpu": advice},
    )


@pytest.mark.parametrize(
    ("before", "after", "material"),
    [
        (None, snap(), True),  # the first status always posts
        (snap(), snap(), False),
        (snap(queued=25), snap(queued=40), False),  # the numbers alone: the root has them
        (snap(wait=30), snap(wait=90), False),
        (snap(), snap(advice=("rising", 0, 0, 0)), True),  # the direction turned
        (snap(), snap(advice=("holding", 5, 0, 0)), True),  # runners to add
        (snap(), snap(advice=("holding", 5, 3, 0)), True),  # a maximum to raise
        (snap(), snap(advice=("holding", 0, 0, 2)), True),  # nodes short
        # The alert's threshold, crossed and cleared by its margin (3 jobs or 25%).
        (snap(queued=10, size_limit=20), snap(queued=26, size_limit=20), True),
        (snap(queued=26, size_limit=20), snap(queued=14, size_limit=20), True),
        (snap(queued=17, size_limit=20), snap(queued=23, size_limit=20), False),  # ±3 of it
        (snap(queued=23, size_limit=20), snap(queued=17, size_limit=20), False),
        (snap(wait=20, wait_limit=30), snap(wait=45, wait_limit=30), True),
        (snap(wait=25, wait_limit=30), snap(wait=35, wait_limit=30), False),
        # The drain rule: looking drained is the root's and the summary's to say; no longer
        # drained is news, once past it by a step.
        (snap(queued=3, wait=4), snap(queued=0, wait=0), False),
        (snap(queued=0, wait=0), snap(queued=1, wait=1), False),
        (snap(queued=0, wait=0), snap(queued=5, wait=1), True),
    ],
)
def test_a_change_is_material_when_people_would_act_on_it(
    before: Snapshot | None, after: Snapshot, material: bool
) -> None:
    assert is_material(before, after, DRAIN) is material


def played(incident: Incident, readings: list[Snapshot]) -> list[str | None]:
    """Each reading through the status decision, as the tick records it."""
    kinds = []
    for reading in readings:
        kind = status_kind(incident, reading, DRAIN)
        incident = record_status(incident, reading, posted=kind == STATUS)
        kinds.append(kind)
    return kinds


def test_a_queue_wobbling_around_its_plateau_posts_one_status() -> None:
    """40 readings 30 s apart (the demo's cadence), the queue ±3 around 25 with the alert's
    threshold at 25 and the wait around its own: one new reply, then edits in place."""
    wobble = [0, 3, -2, 1, -3, 2, -1, 3, -3, 0]
    readings = [
        snap(i / 2, 25 + wobble[i % 10], 30 + wobble[i % 10], size_limit=25, wait_limit=30)
        for i in range(40)
    ]
    kinds = played(make_incident(), readings)
    assert kinds.count(STATUS) <= 3, kinds
    assert kinds.count(STATUS) == 1 and kinds[1:] == [RESTATUS] * 39


def test_two_statuses_are_a_minute_apart_and_a_change_waits_for_it() -> None:
    readings = [snap(0), snap(0.5, advice=("rising", 4, 0, 0)), snap(1, advice=("rising", 4, 0, 0))]
    assert played(make_incident(), readings) == [STATUS, None, STATUS]


def test_nothing_edits_a_status_with_a_reply_below_it() -> None:
    incident = record_status(make_incident(), snap(0))
    below = changed(incident, replied_since_status=True)
    assert status_kind(below, snap(10), DRAIN) is None, "the root has the numbers"
    assert status_kind(below, snap(10, advice=("falling", 0, 0, 0)), DRAIN) == STATUS
