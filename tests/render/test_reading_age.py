"""A reading paced to GitHub's quota stands for minutes: every surface that shows it says when it
was read and when the next comes, in the reader's time zone, without a warning (it is ordinary);
a rate limit met still warns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.domain.alerting.routes import Routing
from bot.domain.incident.incident_fleet import incident_fleet
from bot.domain.reading.fleet import FleetSnapshot, Reading, RunnerTypeMetrics
from bot.render.queue import live_queue
from bot.render.root import render_root
from tests.support.incidents import make_incident

READ = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
NOW = READ + timedelta(minutes=4)
AT, NEXT = int(READ.timestamp()), int((READ + timedelta(seconds=285)).timestamp())
SAID = f"read at <!date^{AT}^{{time}}|12:00 UTC>, next at <!date^{NEXT}^{{time}}|12:04 UTC>"


def github(**update: Any) -> FleetSnapshot:
    gpu = RunnerTypeMetrics(queued=14, longest_wait_mins=30, registered=4, busy=4)
    fleet = FleetSnapshot(at=READ, source="github", runner_types={"linux.gpu": gpu})
    return fleet.model_copy(update={"paced_s": 285.0, **update})


def root_text(fleet: FleetSnapshot) -> str:
    incident = make_incident(runner_types={})
    view = incident_fleet(
        incident, Reading(fleet, READ), backend="GitHub", now=NOW, interval=timedelta(seconds=285)
    )
    return str(render_root(incident.model_copy(update={"live": view}), now=NOW).blocks)


def test_the_root_and_queue_say_when_a_paced_reading_was_read_and_the_next_comes() -> None:
    shown = root_text(github())
    assert f"Live from GitHub, {SAID}" in shown and "⚠️" not in shown
    # With the reading's own word on its numbers beside it.
    said = root_text(github(note="2 unreadable GitHub jobs left out"))
    assert f"{SAID} · ⚠️ 2 unreadable GitHub jobs left out" in said

    queue = live_queue("GitHub", github(), "", [], Routing(), "C1")
    assert f"live from GitHub {SAID.replace('read ', '', 1)}" in queue and "⚠️" not in queue


def test_a_reading_read_every_interval_says_no_pace() -> None:
    assert "next at" not in root_text(github(paced_s=None))
    assert "next at" not in live_queue("GitHub", github(paced_s=None), "", [], Routing(), "C1")
