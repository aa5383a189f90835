"""Charts that hold what the text says: the summary's chart covers the incident from the alert's
reading and has the peak the summary names, and the postmortem's table lists the moments that
matter once each. (The demo's summary chart once started at 18:15:15 with 31 queued, so the 32
at 18:14 that the summary named was not on it, and a GPU chart's axis ran 0-6 for a peak of 12;
its postmortem's "Queue over time" had "18:18 | 0" three times.) The incident is made as the
product makes it: opened from the alert, a root following a reading between statuses, the
statuses, the drain checks and the resolve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from bot.domain.alerting.alerts import parse_notification
from bot.domain.alerting.delivery import delivery_of
from bot.domain.incident.incident_fleet import as_snapshot
from bot.domain.incident.incidents import (
    Event,
    Incident,
    chart_drawn,
    open_incident,
    record_status,
    resolve_drained,
    trend_end,
    with_live,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.render.chart import BLOCK_TYPE
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_summary, summaries
from tests.support.payloads import fixture_json

OPENED = datetime(2026, 11, 22, 18, 13, 35, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"  # the alert's runner type


def reading(at: datetime, queued: float) -> FleetSnapshot:
    metrics = {GPU: RunnerTypeMetrics(queued=queued, longest_wait_mins=2.0)}
    return FleetSnapshot(at=at, source="prometheus", runner_types=metrics)


def opened() -> Incident:
    """The alert (14 queued on the GPU type) opens incident 1 at 18:13:35."""
    delivery = delivery_of(
        parse_notification(
            "alertmanager", fixture_json("alertmanager/runner-queue-am-00-firing.json")
        )
    )
    return open_incident(delivery, incident_id="1", uid="u1", channel="C1", now=OPENED)


def followed(incident: Incident, view: FleetSnapshot) -> Incident:
    """A reading the root follows between statuses (the status tick's `_roots_to_reading`)."""
    return with_live(incident, view, as_snapshot(incident, view, view.at))


def status(incident: Incident, view: FleetSnapshot) -> Incident:
    return record_status(incident, as_snapshot(incident, view, view.at), live=view)


def demo_incident() -> Incident:
    """32 queued at 18:14 between statuses; the first status at 18:15:15 with 31; drained, its
    drain checks reading 0 three times, and resolved at 18:18:35."""
    incident = followed(opened(), reading(OPENED + timedelta(seconds=40), 32))
    at = OPENED + timedelta(seconds=100)
    for queued in (31, 24, 12):
        incident = status(incident, reading(at, queued))
        at += timedelta(seconds=50)
    for _ in range(3):
        incident = status(incident, reading(at, 0))
        at += timedelta(seconds=10)
    return resolve_drained(incident, now=at)


def summary_chart(incident: Incident) -> dict:
    done = incident.resolved.at or OPENED
    rendered = render_summary(incident, [], now=done, chart=True)
    [block] = [b for b in rendered.blocks if b["type"] == BLOCK_TYPE]
    return block["chart"]


def test_the_summary_chart_starts_at_the_alert_and_holds_the_peak_it_names() -> None:
    incident = demo_incident()
    summary = str(render_summary(incident, [], now=incident.resolved.at).blocks[1])
    chart = summary_chart(incident)

    assert "Peak queued jobs: *32* at " in summary
    categories = chart["axis_config"]["categories"]
    assert categories[0] == "18:13:35", "from the alert's reading"
    [series] = chart["series"]
    values = {p["label"]: p["value"] for p in series["data"]}
    assert values["18:13:35"] == 14 and values["18:14:15"] == 32, "the peak, at its moment"
    assert max(values.values()) == 32, "the axis reaches the peak the summary names"
    assert series["name"] == "linux.g5.4xlarge…gpu", "no part of the type's name cut"


def queue_rows(postmortem: str) -> list[str]:
    table = postmortem.split("## Queue over time", 1)[1].split("\n## ", 1)[0]
    return [line for line in table.splitlines() if line.startswith("| 2026")]


def long_incident() -> Incident:
    """Thirty statuses a minute apart, the queue rising by one a minute but for its peak of 99
    at the seventh."""
    incident = opened()
    at = OPENED
    for minute in range(1, 31):
        at = OPENED + timedelta(minutes=minute)
        incident = status(incident, reading(at, 99 if minute == 7 else 20 + minute))
    return resolve_drained(incident, now=at)


def test_a_long_incident_keeps_its_first_reading_and_its_peak_among_twenty_moments() -> None:
    chart = summary_chart(long_incident())

    categories = chart["axis_config"]["categories"]
    assert len(categories) == 20
    assert categories[0] == "18:13" and categories[-1] == "18:43"
    assert "18:20" in categories, "the peak's moment"
    assert max(p["value"] for p in chart["series"][0]["data"]) == 99


def test_a_long_postmortem_table_keeps_the_peak_and_the_reading_after_each_action() -> None:
    incident = long_incident()
    done = incident.resolved.at
    assert done is not None
    scaled = Event(
        at=OPENED + timedelta(minutes=11.5), kind="scaled", text="Scaled up", actor="U0ALICE"
    )
    rows = queue_rows(render_postmortem(incident, [scaled], now=done))

    assert len(rows) == 12
    times = [row.split(" | ", 1)[0][2:] for row in rows]
    assert times[0] == "2026-11-22 18:13" and times[-1] == "2026-11-22 18:43"
    assert "2026-11-22 18:20" in times, "the peak"
    assert "2026-11-22 18:25" in times, "the reading after the scale-up"


def test_the_postmortem_table_lists_each_moment_that_matters_once() -> None:
    incident = demo_incident()
    done = incident.resolved.at
    assert done is not None
    events = [
        Event(at=OPENED, kind="opened", text="Alert fired"),
        Event(at=OPENED + timedelta(seconds=130), kind="scaled", text="Scaled up by +10"),
        Event(at=done, kind="resolved", text="The queue drained"),
    ]
    rows = queue_rows(render_postmortem(incident, events, now=done))

    cells = [row.split(" | ", 1)[1] for row in rows]
    assert all(a != b for a, b in pairwise(cells)), "no row repeats the last"
    times = [row.split(" | ", 1)[0][2:] for row in rows]
    # Seconds, where two rows share a minute (18:16:05 and 18:16:55).
    assert times[0] == "2026-11-22 18:13:35", "opened"
    assert "2026-11-22 18:14:15" in times, "the peak"
    assert "2026-11-22 18:16:05" in times, "the reading after the scale-up"
    assert cells[-1].startswith("0"), "drained"
    assert len(rows) == len(set(rows))


def test_a_peak_after_the_last_statuss_chart_puts_a_chart_in_the_summary() -> None:
    """The first status drew its chart at 24 queued; the queue rose to 36 at a reading the root
    followed before the next status could come (a minute on), then drained and resolved. The
    status's chart does not reach the summary's peak: the summary draws its own, which does.
    (A loaded demo's thread showed a last chart of 24 under "Peak queued jobs: 36".)"""
    incident = status(opened(), reading(OPENED + timedelta(seconds=20), 24))
    drawn = incident.shown.model_copy(update={"charted_at": trend_end(incident)})
    incident = incident.model_copy(update={"shown": drawn})
    assert chart_drawn(incident, incident.shown.charted_at), "the status's chart is the latest"
    incident = followed(incident, reading(OPENED + timedelta(seconds=30), 36))
    incident = resolve_drained(incident, now=OPENED + timedelta(seconds=50))

    summary, with_chart = summaries(incident, [], now=OPENED + timedelta(seconds=50))
    assert with_chart is None, "the summary itself carries the chart"
    [block] = [b for b in summary.blocks if b["type"] == BLOCK_TYPE]
    assert "Peak queued jobs: *36* at " in str(summary.blocks)
    assert max(p["value"] for p in block["chart"]["series"][0]["data"]) == 36
