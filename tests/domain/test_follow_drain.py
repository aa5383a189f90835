"""A queue followed after its alert cleared: whether jobs still queue over the alert's thresholds,
when the follow-up ends, and what the thread, the root and a Resolve say of it. Pure, tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerting.alert_issue import Moment, moment_key, moments
from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue, parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.headline import still_live
from bot.domain.incident.incident_fleet import follow_ended, still_queued
from bot.domain.incident.incidents import (
    CAPPED,
    DRAINED,
    UNDER,
    Change,
    DrainRule,
    Event,
    Incident,
    Resolution,
    apply_notification,
    resolve_drained,
    resolve_manually,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.alert_issue import comment
from bot.render.replies import (
    drained_said,
    following_said,
    render_status,
    render_summary,
    resolved_how,
)
from bot.render.root import render_root
from tests.support.incidents import make_incident
from tests.support.payloads import fixture_json

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
RULE = DrainRule(max_queued=0, max_wait_mins=5)
CAP = timedelta(hours=2)
MIN = timedelta(minutes=1)
RESOLVED = "grafana/queue-alert-resolved.json"


def live(**types: tuple[float | None, float | None]) -> FleetSnapshot:
    metrics = {
        name.replace("_", "."): RunnerTypeMetrics(queued=q, longest_wait_mins=w)
        for name, (q, w) in types.items()
    }
    return FleetSnapshot(at=NOW, source="prometheus", runner_types=metrics)


def firing(view: FleetSnapshot | None, **numbers: float) -> Incident:
    """The alert firing with `numbers` as its thresholds, its latest live view `view`."""
    return make_incident(
        numbers=QueueNumbers(114, 14, **numbers),
        peak=QueueNumbers(114, 14, **numbers),
        live=view,
    )


def cleared(incident: Incident, *, at: datetime = NOW) -> tuple[Incident, Change]:
    resolved = delivery_of(parse_notification("grafana", fixture_json(RESOLVED)))
    queued = still_queued(incident, RULE)
    return apply_notification(
        incident, resolved, entry_id="9999999999999-0", now=at, still_queued=queued
    )


# (the live view, the alert's thresholds, jobs still queued over them or None)
STILL_QUEUED = [
    ("6 queued, the size threshold 5", live(linux_2xlarge=(6, 2)), {"queue_size_threshold": 5}, 6),
    (
        "6 queued, the size threshold 6",
        live(linux_2xlarge=(6, 2)),
        {"queue_size_threshold": 6},
        None,
    ),
    # The rule holds each type's queue to it: 4 + 4 queued is no type over 5.
    (
        "two types under it, their sum over it",
        live(linux_2xlarge=(4, 2), linux_4xlarge=(4, 1)),
        {"queue_size_threshold": 5},
        None,
    ),
    ("a wait over the time one", live(linux_2xlarge=(2, 45)), {"queue_time_threshold": 30}, 2),
    (
        "no job queued, a start's wait",
        live(linux_2xlarge=(0, 45)),
        {"queue_time_threshold": 30},
        None,
    ),
    # No threshold known (PyTorch's rule says only "crossed"): the drain rule decides.
    ("no threshold, not drained", live(linux_2xlarge=(3, 1)), {}, 3),
    ("no threshold, drained", live(linux_2xlarge=(0, 0)), {}, None),
    ("a queue not read", live(linux_2xlarge=(None, 40)), {"queue_time_threshold": 30}, None),
    ("the alert's numbers only (METRICS_BACKEND=alert)", None, {"queue_size_threshold": 5}, None),
]


@pytest.mark.parametrize(
    ("view", "thresholds", "expected"),
    [row[1:] for row in STILL_QUEUED],
    ids=[row[0] for row in STILL_QUEUED],
)
def test_jobs_still_queued_over_the_alerts_thresholds(
    view: FleetSnapshot | None, thresholds: dict[str, float], expected: float | None
) -> None:
    assert still_queued(firing(view, **thresholds), RULE) == expected


def test_the_alert_clearing_over_its_thresholds_keeps_the_incident_followed() -> None:
    before = firing(live(linux_2xlarge=(6, 2)), queue_size_threshold=5)

    after, change = cleared(before)

    assert change is Change.FOLLOWED and after.is_open
    assert after.drain.follow is not None and after.drain.follow.queued == 6
    assert after.numbers == QueueNumbers(queue_size_threshold=5), "its thresholds stay"
    assert set(after.runner_types) == set(before.runner_types), "its types stay followed"
    assert all(q == RunnerQueue() for q in after.runner_types.values()), "not their numbers"
    assert after.peaks.numbers.max_queue_size == before.peaks.numbers.max_queue_size
    assert following_said(after) == (
        "The alert cleared; 6 jobs still queue over its thresholds: following until the queue "
        "drains"
    )
    root = render_root(after, now=NOW).blocks
    assert "Alert cleared" in str(root[1]), "the root says so"
    (resolve,) = [
        e
        for b in root
        if b["type"] == "actions"
        for e in b["elements"]
        if e.get("action_id") == "incident_resolve"
    ]
    assert "Its alert cleared already: nothing reopens it." in resolve["confirm"]["text"]["text"]
    assert "If the alert fires again" not in resolve["confirm"]["text"]["text"]
    later = NOW + MIN * 3
    status = render_status(after, previous=None, current=after.snapshot(later), now=later)
    assert "Alert cleared *3 min* ago: following until the queue drains" in str(status.blocks[0])


def test_the_alert_clearing_under_them_resolves_at_once_as_before() -> None:
    after, change = cleared(firing(live(linux_2xlarge=(3, 2)), queue_size_threshold=5))

    assert change is Change.RESOLVED and after.resolved.how is Resolution.ALERT
    assert after.drain.follow is None


def followed(view: FleetSnapshot, *, cleared_at: datetime = NOW - timedelta(minutes=4)) -> Incident:
    incident, change = cleared(
        firing(live(linux_2xlarge=(6, 2)), queue_size_threshold=5), at=cleared_at
    )
    assert change is Change.FOLLOWED
    return incident.model_copy(update={"live": view})


# (the latest live view, drained checks in a row, how long since the alert cleared, the end)
ENDS = [
    ("still over", live(linux_2xlarge=(7, 3)), 0, timedelta(minutes=4), ""),
    ("drained: the drain checks", live(linux_2xlarge=(0, 0)), 3, timedelta(minutes=4), DRAINED),
    ("under its thresholds", live(linux_2xlarge=(3, 1)), 0, timedelta(minutes=4), UNDER),
    # Nothing queued is drained, said once the drain checks agree.
    ("empty, checks to go", live(linux_2xlarge=(0, 0)), 1, timedelta(minutes=4), ""),
    ("still over past the cap", live(linux_2xlarge=(7, 3)), 0, CAP, CAPPED),
    ("unreadable, within the cap", live(linux_2xlarge=(None, 3)), 0, timedelta(minutes=4), ""),
    ("unreadable, past the cap", live(linux_2xlarge=(None, 3)), 0, CAP, CAPPED),
]


@pytest.mark.parametrize(
    ("view", "checks", "since", "expected"),
    [row[1:] for row in ENDS],
    ids=[row[0] for row in ENDS],
)
def test_a_followed_queue_is_followed_until_it_drains_falls_under_or_the_cap(
    view: FleetSnapshot, checks: int, since: timedelta, expected: str
) -> None:
    incident = followed(view, cleared_at=NOW - since)

    assert follow_ended(incident, checks, needed=3, rule=RULE, cap=CAP, now=NOW) == expected


def test_an_incident_not_followed_never_ends_a_follow_up() -> None:
    incident = firing(live(linux_2xlarge=(0, 0)), queue_size_threshold=5)

    assert follow_ended(incident, 3, needed=3, rule=RULE, cap=CAP, now=NOW) == ""


@pytest.mark.parametrize(
    ("ended", "resolution", "said"),
    [
        (DRAINED, Resolution.DRAINED, "alert cleared, queue drained 4 min later"),
        (UNDER, Resolution.DRAINED, "alert cleared, queue under its thresholds 4 min later"),
        (
            CAPPED,
            Resolution.ALERT,
            "alert cleared, jobs still queued when following stopped 4 min later",
        ),
    ],
)
def test_the_summary_comes_once_with_the_combined_reason(
    ended: str, resolution: Resolution, said: str
) -> None:
    resolved = resolve_drained(followed(live(linux_2xlarge=(0, 0))), now=NOW, ended=ended)

    assert resolved.resolved.how is resolution and not resolved.is_open
    assert resolved_how(resolved) == f"({said})"
    assert drained_said(resolved) == f"Resolved: {said}"
    assert said in render_summary(resolved, [], now=NOW).blocks[0]["text"]["text"]
    root = render_root(resolved, now=NOW)
    assert said in str(root.blocks[1]), "the root says the same reason"


def test_resolving_by_hand_while_followed_is_not_asked_again() -> None:
    """The alert cleared: nothing fires to reopen it, so "still live … anyway?" would be
    asked of an alert that is not firing."""
    incident = followed(live(linux_2xlarge=(9, 40)))

    assert still_live(incident) is None
    resolved = resolve_manually(incident, by="U0ALICE", name="alice", now=NOW)
    assert resolved.resolved.how is Resolution.MANUAL
    assert "alice" in resolved_how(resolved)


def test_an_ordinary_drain_says_what_it_said_before() -> None:
    resolved = resolve_drained(firing(live(linux_2xlarge=(0, 0))), now=NOW)

    assert resolved.drain.follow is None and resolved.resolved.how is Resolution.DRAINED
    assert drained_said(resolved) == "The queue drained: resolved automatically"
    assert resolved_how(resolved) == "(queue drained)"


def test_the_alerts_issue_hears_the_alert_cleared_and_later_the_resolve() -> None:
    incident = followed(live(linux_2xlarge=(6, 2)))
    cleared_event = Event(at=NOW, kind="alert_cleared", text=following_said(incident))
    resolved = resolve_drained(incident, now=NOW + MIN * 4)
    resolve_event = Event(at=NOW + MIN * 4, kind="resolved", text=drained_said(resolved))

    told = [m.event for m in moments([cleared_event, resolve_event]) if m.event is not None]
    said = comment(incident, Moment(moment_key(cleared_event), cleared_event), now=NOW)

    assert told == [cleared_event, resolve_event]
    assert said.startswith("**Alert cleared** at ")
    assert "6 jobs still queue over its thresholds" in said


@pytest.mark.parametrize("ended_by", ["drained", "by hand"])
def test_a_followed_incident_that_fires_again_after_it_ended_is_firing_not_followed(
    ended_by: str,
) -> None:
    """Followed, then resolved (the drain, or a person), then fired again: reopened as any
    incident, its next resolved notification resolves or follows it afresh, never ignored."""
    followed, _ = cleared(firing(live(linux_2xlarge=(6, 2)), queue_size_threshold=5))
    ended = (
        resolve_drained(followed, now=NOW + MIN)
        if ended_by == "drained"
        else resolve_manually(followed, by="U1", name="alice", now=NOW + MIN)
    )
    firing_again = delivery_of(
        parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
    )
    reopened, change = apply_notification(
        ended, firing_again, entry_id="9999999999999-5", now=NOW + 2 * MIN
    )
    assert change is Change.REOPENED and reopened.drain.follow is None
    assert follow_ended(reopened, 0, needed=3, rule=RULE, cap=CAP, now=NOW + 3 * CAP) == ""
    resolved = delivery_of(parse_notification("grafana", fixture_json(RESOLVED)))
    again, change = apply_notification(
        reopened.model_copy(update={"live": live(linux_2xlarge=(0, 0))}),
        resolved,
        entry_id="9999999999999-9",
        now=NOW + 3 * MIN,
        still_queued=None,
    )
    assert change is Change.RESOLVED and not again.is_open
