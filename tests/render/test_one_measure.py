"""One measure per label: "Longest wait" is the age of the oldest queued job, "Slowest recent
start" (ARC's startup histogram) a row of its own, on the root, a status, the summary, the
postmortem, the GitHub issue and `/queue report`. A change compares a measure with itself, and a
peak is one measure's, at the moment it was reached, from the stored record. (A responder once
read "Slowest recent start: 1.5 min" where the previous status said "Longest wait: 1 min", and a
summary's "Peak longest wait" that was a slowest start from another moment.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.alerting.alert_issue import Moment, moment_key
from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import Event, Incident, Snapshot, record_status, resolve_drained
from bot.domain.reading.capacity import capacity_report
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render import mrkdwn as md
from bot.render.alert_issue import comment
from bot.render.capacity import render_report
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_status, render_summary
from bot.render.root import render_root
from bot.storage.incident_store import state_json
from tests.support.incidents import make_incident

T0 = datetime(2026, 11, 25, 12, tzinfo=UTC)
CPU, GPU = "linux.2xlarge", "linux.g5.4xlarge.nvidia.gpu"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def reading(
    minute: float, cpu: tuple[float, float | None], gpu: tuple[float, float]
) -> FleetSnapshot:
    """The CPU type's wait from its jobs listing (the oldest job's age), the GPU's from ARC's
    startup histogram."""
    types = {
        CPU: RunnerTypeMetrics(queued=cpu[0], longest_wait_mins=cpu[1]),
        GPU: RunnerTypeMetrics(queued=gpu[0], longest_wait_mins=gpu[1], wait_of_starts=True),
    }
    return FleetSnapshot(at=at(minute), source="prometheus", runner_types=types)


# The longest wait peaks at 12:04 (2 min), the slowest start at 12:07 (3.5 min), the queue at
# 12:04 (20): each peak at its own moment, none the other's number.
READINGS = (
    reading(1, (10, 1.0), (5, 0.5)),
    reading(4, (12, 2.0), (8, 1.5)),
    reading(7, (6, 1.0), (12, 3.5)),
    reading(10, (1, None), (2, 2.0)),
)


def stored(incident: Incident) -> Incident:
    return Incident.model_validate_json(state_json(incident))


def followed() -> tuple[Incident, list[Snapshot]]:
    """The incident through the readings, as the tick records them, and the statuses' snapshots
    (the alert said no numbers of its own)."""
    incident = make_incident(
        started_at=T0, opened_at=T0, numbers=QueueNumbers(), peak=QueueNumbers()
    )
    snapshots = []
    for view in READINGS:
        snapshot = as_snapshot(incident, view, view.at)
        incident = stored(record_status(incident, snapshot, live=view))
        snapshots.append(snapshot)
    return incident, snapshots


def fields_of(blocks: list[dict]) -> list[str]:
    return [f["text"] for b in blocks for f in b.get("fields", ())]


def test_a_status_says_each_measure_in_its_own_row_with_its_own_change() -> None:
    incident, snapshots = followed()

    status = render_status(
        incident, previous=snapshots[0], current=snapshots[1], now=at(4), view=READINGS[1]
    )

    fields = fields_of(status.blocks)
    assert "Longest wait: *2 min* (▲ +1 min)" in fields, fields
    assert "Slowest recent start: *1.5 min* (▲ +1 min)" in fields, fields
    assert status.text.startswith(
        "Status update: longest wait 2 min (▲ +1 min), slowest recent start 1.5 min (▲ +1 min)"
    ), status.text


def test_a_change_is_never_from_the_other_measure() -> None:
    """The previous status read only an oldest job's age; the slowest start now read has nothing
    of its own measure to change from."""
    incident = make_incident(started_at=T0, opened_at=T0)
    before = FleetSnapshot(
        at=at(1),
        source="prometheus",
        runner_types={CPU: RunnerTypeMetrics(queued=4, longest_wait_mins=1)},
    )
    now = READINGS[1].model_copy(update={"at": at(3)})
    previous, current = (as_snapshot(incident, view, view.at) for view in (before, now))

    fields = fields_of(
        render_status(incident, previous=previous, current=current, now=at(3)).blocks
    )

    assert "Slowest recent start: *1.5 min*" in fields, fields
    assert "Longest wait: *2 min* (▲ +1 min)" in fields, fields


def test_the_root_shows_the_two_measures_as_two_rows() -> None:
    incident, _ = followed()
    live = incident.model_copy(update={"live": READINGS[2]})

    fields = fields_of(render_root(live, now=at(7)).blocks)

    assert any(f.startswith("Longest wait: *1 min*") for f in fields), fields
    assert any(f.startswith("Slowest recent start: *3.5 min*") for f in fields), fields


def test_summary_postmortem_issue_and_resolved_root_say_each_peak_at_its_own_moment() -> None:
    incident, _ = followed()
    done = stored(resolve_drained(incident, now=at(12)))
    resolve = Event(at=at(12), kind="resolved", text="Resolved: the queue drained")
    events = [Event(at=T0, kind="opened", text="Alert fired"), resolve]

    summary = fields_of(render_summary(done, events, now=at(12)).blocks)
    root = fields_of(render_root(done, now=at(13)).blocks)
    postmortem = render_postmortem(done, events, now=at(13))
    issue = comment(done, Moment(moment_key(resolve), resolve), timeline=events, now=at(13))

    wait, start = f"Peak longest wait: *2 min* at {md.time_of(at(4))}", "Peak slowest recent start"
    assert wait in summary, summary
    assert f"{start}: *3.5 min* at {md.time_of(at(7))}" in summary, summary
    assert f"Peak queued jobs (all runner types): *20* at {md.time_of(at(4))}" in summary
    assert any(f.startswith(wait) for f in root), root
    assert any(f.startswith(f"{start}: *3.5 min* at {md.time_of(at(7))}") for f in root), root
    for text in (postmortem, issue):
        assert "- Peak longest wait: **2 min** at 2026-11-25 12:04 UTC" in text, text
        assert "- Peak slowest recent start: **3.5 min** at 2026-11-25 12:07 UTC" in text, text


def test_a_record_from_before_the_measures_were_apart_says_its_peak_as_the_start_it_was() -> None:
    """0.27 kept a slowest start as the peak wait, its type saying how it was measured."""
    old = make_incident(
        started_at=T0,
        opened_at=T0,
        peak=QueueNumbers(max_queue_time_mins=3.5, max_queue_size=12),
        peak_wait_at=at(7),
        peak_types={GPU: RunnerQueue(queued=12, longest_wait_mins=3.5, wait_of_starts=True)},
    )
    done = stored(resolve_drained(old, now=at(12)))

    summary = " ".join(fields_of(render_summary(done, [], now=at(12)).blocks))

    assert f"Peak slowest recent start: *3.5 min* at {md.time_of(at(7))}" in summary, summary
    assert "Peak longest wait" not in summary, summary


def test_the_report_says_the_longest_wait_and_the_slowest_start_apart() -> None:
    aged = make_incident(
        id="1", started_at=at(0), peak_types={GPU: RunnerQueue(queued=9, longest_wait_mins=5)}
    )
    started = make_incident(
        id="2",
        started_at=at(30),
        peak_types={GPU: RunnerQueue(queued=4, longest_wait_mins=8, wait_of_starts=True)},
    )
    incidents = [
        (stored(resolve_drained(i, now=i.started_at + timedelta(minutes=20))), [])
        for i in (aged, started)
    ]

    [report] = capacity_report(incidents, {}, since=T0, now=at(90), only=GPU)
    text = render_report([report], days=7, kept_days=30)

    assert "longest wait 5 min" in text, text
    assert "slowest recent start 8 min" in text, text
