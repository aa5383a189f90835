"""The sentences a responder stumbled on in the demo, as the thread and the early warning now say
them, rendered from the stored incident: no internal state in words a person reads ("held: this
reading alone advises none", "if the rise holds"), pods that "cannot" said to be unable to start,
growth named as arrivals outrunning completions, a warning that says "~N min" where it can
project it (not "any minute now" from a queue's first job), and a cut that drops whole clauses
("…at this rate the alert fires a…" was cut mid-clause)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from bot.domain.incident.incidents import EARLY_WARNING, Event, Incident
from bot.domain.reading.early_warning import Point, Thresholds, WarningState, forecast
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.judgement import Judgement
from bot.render.early_warning import render_warning
from bot.render.replies import render_summary
from bot.render.root import render_root
from tests.support.incidents import T0, make_incident

NOW = T0 + timedelta(minutes=20)
TYPE = "linux.2xlarge"


def stored(incident: Incident) -> Incident:
    """The incident as Redis keeps it and a surface loads it."""
    return Incident.model_validate(json.loads(json.dumps(incident.model_dump(mode="json"))))


def text(blocks: list[dict[str, Any]]) -> str:
    return json.dumps(blocks, ensure_ascii=False).replace("*", "")


def root_with(judged: Judgement) -> str:
    reading = RunnerTypeMetrics(queued=judged.queued, registered=3, busy=3, judged=judged)
    live = FleetSnapshot(at=NOW, source="prometheus", runner_types={TYPE: reading})
    return text(render_root(stored(make_incident(live=live)), now=NOW).blocks)


def test_pods_that_cannot_start_are_said_in_a_whole_sentence() -> None:
    stuck = Judgement(at=NOW, queued=12.0, needed=6, cannot_start=4)
    shown = root_with(stuck)
    assert (
        "none until pods start: 4 new runner pods cannot start, and more runners would wait the "
        "same way"
    ) in shown
    assert "cannot, and" not in shown


def test_advice_held_over_its_window_says_why_not_how_it_is_held() -> None:
    held = Judgement(at=NOW, queued=20.0, runners=6, needed=6, own=0, window_mins=5.0)
    shown = root_with(held)
    assert (
        "+6 runners would drain it in 30 min (asked for within the last 5 min: a dip changes "
        "nothing)"
    ) in shown
    assert "held:" not in shown and "this reading alone" not in shown


def test_a_rise_not_yet_shown_says_what_would_change_the_advice() -> None:
    alone = root_with(Judgement(at=NOW, queued=35.0, own=3, window_mins=5.0))
    assert "none yet: +3 runners if the queue keeps rising" in alone
    booting = root_with(Judgement(at=NOW, queued=35.0, booting=7, needed=7, own=8, window_mins=5))
    assert (
        "+7 runners on their way should drain it in 30 min (+8 more if the queue keeps" in booting
    )
    assert "rise holds" not in alone + booting


def warning_of(now: RunnerTypeMetrics, past: list[float], thresholds: Thresholds) -> str:
    """The early warning's message for a reading after `past` (jobs in the system, a minute
    apart), as Slack shows it."""
    points = [Point(NOW - timedelta(minutes=len(past) - k), v) for k, v in enumerate(past)]
    said = forecast(TYPE, now, NOW, points, thresholds, boot_mins=5, horizon_mins=15)
    assert said is not None, "the queue builds towards the alert"
    state = WarningState.raised(TYPE, "C1", said.text, NOW.timestamp())
    return text(render_warning(state).blocks)


# Ten runners, all busy and at their maximum, taking two more jobs a minute than they finish:
# nothing queued yet, and the alert fires at 10 queued or a wait of a minute.
SURGE = RunnerTypeMetrics(queued=0, busy=10, registered=10, maximum=10, job_duration_mins=30)
SURGE_PAST = [2.0, 4.0, 6.0, 8.0]
ALERT = Thresholds(queued=10, wait_mins=1)


def test_the_early_warning_names_its_growth_as_arrivals_outrunning_completions() -> None:
    shown = warning_of(SURGE, SURGE_PAST, ALERT)
    assert (
        "no jobs queued yet at its maximum of 10 runners, jobs arriving 2.0/min faster than they "
        "finish"
    ) in shown
    assert "yet and +" not in shown


def test_the_early_warning_projects_the_minutes_to_the_alert() -> None:
    """The wait's threshold is the oldest job's age: the queue's first job has waited no longer
    than the queue has stood, however long a job joining it would wait."""
    shown = warning_of(SURGE, SURGE_PAST, ALERT)
    assert "at this rate the alert fires in ~2 min" in shown
    assert "any minute now" not in shown
    over = SURGE.model_copy(update={"queued": 12, "busy": 10})
    assert "the alert fires any minute now" in warning_of(over, [16, 18, 20, 22], ALERT)


def test_what_was_done_drops_whole_clauses_to_fit() -> None:
    said = (
        "Took on the early warning raised 2 min before the alert fired, which said: linux.2xlarge: "
        "queue building, 6 jobs queued; at this rate the alert fires any minute now unless more "
        "runners come or its jobs start finishing faster than they arrive"
    )
    events = [Event(at=T0 + timedelta(minutes=1), kind=EARLY_WARNING, text=said)]
    resolved = make_incident(resolved_at=NOW, updated_at=NOW)
    shown = text(render_summary(stored(resolved), events, now=NOW).blocks)
    assert "which said: linux.2xlarge: queue building, 6 jobs queued…" in shown
    assert "at this rate" not in shown
