"""Drained means drained: an incident that resolves with jobs still queued says how many and why
it resolved anyway, in the summary, the postmortem and the GitHub issue's resolve comment alike;
"Drained in" only when the drain rule saw the queue drain. (The demo's GPU incident once said
"Drained in: 5 min" while 1 job still queued.) Each incident is made as the product makes it:
the alert firing over a live reading, cleared, followed and resolved by the domain's own steps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerting.alert_issue import Moment, moment_key
from bot.domain.alerting.alerts import QueueNumbers, parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incident_fleet import as_snapshot, follow_ended, still_queued
from bot.domain.incident.incidents import (
    DrainRule,
    Event,
    Incident,
    apply_notification,
    record_status,
    resolve_drained,
    resolve_manually,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.alert_issue import comment
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_summary
from tests.support.incidents import make_incident
from tests.support.payloads import fixture_json

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"
RULE = DrainRule(max_queued=0, max_wait_mins=5)
CAP = timedelta(minutes=30)
RESOLVED = "grafana/queue-alert-resolved.json"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def reading(minutes: float, queued: float, wait: float = 1.0) -> FleetSnapshot:
    metrics = {GPU: RunnerTypeMetrics(queued=queued, longest_wait_mins=wait)}
    return FleetSnapshot(at=at(minutes), source="prometheus", runner_types=metrics)


def seen(incident: Incident, view: FleetSnapshot) -> Incident:
    """A live reading, as the status tick records it."""
    return record_status(incident, as_snapshot(incident, view, view.at), live=view)


def firing_gpu() -> Incident:
    """The GPU alert (size threshold 5), its queue read at 12 then 6."""
    incident = make_incident(
        numbers=QueueNumbers(3, 12, queue_size_threshold=5),
        peak=QueueNumbers(),
        runner_types={},
        started_at=T0,
        opened_at=T0,
    )
    for view in (reading(1, 12), reading(3, 6)):
        incident = seen(incident, view)
    return incident


def cleared(incident: Incident, minutes: float) -> Incident:
    resolved = delivery_of(parse_notification("grafana", fixture_json(RESOLVED)))
    after, _ = apply_notification(
        incident,
        resolved,
        entry_id="9999999999999-0",
        now=at(minutes),
        still_queued=still_queued(incident, RULE),
    )
    return after


def ended(incident: Incident, view: FleetSnapshot, checks: int = 0) -> Incident:
    """The status tick's end of a followed queue, at `view`."""
    incident = seen(incident, view)
    why = follow_ended(incident, checks, needed=3, rule=RULE, cap=CAP, now=view.at)
    assert why, "the follow-up ends here"
    return resolve_drained(incident, now=view.at, ended=why)


def under_its_thresholds() -> Incident:
    """The alert clears with 6 queued over its 5; the queue falls to 1, under it: resolved."""
    return ended(cleared(firing_gpu(), 4), reading(5, 1))


def capped() -> Incident:
    return ended(cleared(firing_gpu(), 4), reading(4 + 30, 7))


def cleared_under() -> Incident:
    """The alert clears while 2 jobs queue, under its threshold: resolved at once."""
    return cleared(seen(firing_gpu(), reading(4, 2)), 4)


def drained() -> Incident:
    return ended(cleared(firing_gpu(), 4), reading(6, 0, 0), checks=3)


def by_hand() -> Incident:
    return resolve_manually(firing_gpu(), by="U0ALICE", name="alice", now=at(5))


def surfaces(incident: Incident) -> dict[str, str]:
    """What each reader sees of the resolve: the summary, the postmortem, the GitHub comment."""
    done = incident.resolved.at
    assert done is not None and not incident.is_open
    resolve = Event(at=done, kind="resolved", text="Resolved")
    events = [Event(at=T0, kind="opened", text="Alert fired"), resolve]
    summary = render_summary(incident, events, now=done)
    return {
        "summary": str(summary.blocks[1]),
        "postmortem": render_postmortem(incident, events, now=done),
        "github": comment(
            incident, Moment(moment_key(resolve), resolve), timeline=events, now=done
        ),
    }


LEFT = [
    (under_its_thresholds, "1 job", "the alert cleared and the queue fell under its thresholds"),
    (capped, "7 jobs", "the alert cleared; following stopped at its cap, 30 min later"),
    (cleared_under, "2 jobs", "the alert cleared under its thresholds"),
    (by_hand, "6 jobs", "resolved by hand"),
]


@pytest.mark.parametrize(("made", "left", "why"), LEFT, ids=[row[0].__name__ for row in LEFT])
def test_jobs_still_queued_at_resolve_are_counted_with_why_and_never_drained(
    made, left: str, why: str
) -> None:
    for where, text in surfaces(made()).items():
        assert "Drained in" not in text, where
        assert f"Still queued at resolve: *{left}* ({why})" in text.replace("**", "*"), where


def test_a_queue_the_readings_saw_drain_says_drained_in_and_nothing_left() -> None:
    for where, text in surfaces(drained()).items():
        assert "Drained in: *5 min* from the peak" in text.replace("**", "*"), where
        assert "Still queued" not in text, where
