"""A scale-up followed to its effect, decided once from a reading's stored judgement: its runners
came, did not by the deadline (with the pods' cause), or nobody can tell. What the thread says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.incident.incidents import (
    Event,
    Incident,
    made_scale_ups,
    resolve_manually,
    with_action,
    with_scale_ups,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics, judged_of
from bot.domain.reading.judgement import Direction, Judgement
from bot.domain.reading.runner_pods import PodCause, Trouble
from bot.domain.scale.scale_ups import ScaleUp, follow, outcome_of
from bot.render.follow_ups import outcome_said
from bot.render.replies import render_outcome, render_summary
from bot.status.follow_ups import not_come, settled

ASKED = datetime(2026, 11, 23, 14, 2, tzinfo=UTC)
TYPE = "linux.2xlarge"
VERIFY_S = 600.0
PENDING = PodCause(
    trouble=Trouble.UNSCHEDULABLE,
    evidence="5 runner pods Pending for 8 min: no node fits (unschedulable)",
    advice="look at the cluster autoscaler",
)


def reading(at: datetime, source: str = "prometheus", **judged: object) -> FleetSnapshot:
    judgement = Judgement(at=at, **judged)  # type: ignore[arg-type]
    metrics = RunnerTypeMetrics(judged=judgement)
    return FleetSnapshot(at=at, source=source, runner_types={TYPE: metrics})


def scaled_incident(reading_before: FleetSnapshot | None, **made: object) -> tuple[Incident, Event]:
    """Scaled +7 at 14:02 from a reading showing 20 registered (`before`), and followed."""
    incident = Incident(
        id="7",
        group_key="g",
        group_hash="h",
        source="grafana",
        title="Jobs queueing",
        started_at=ASKED,
        opened_at=ASKED,
        updated_at=ASKED,
        live=reading_before,
        replies=1,
    )
    done = ScaleUp(runner_type=TYPE, added=7, by="alice", at=ASKED, **made)  # type: ignore[arg-type]
    up = follow(done, judged_of(reading_before, TYPE), verify_s=VERIFY_S, reply=2)
    event = Event(at=ASKED, kind="scaled", text=f"Scaled {TYPE} by +7", actor="U1", scale=up)
    return with_action(incident, event).model_copy(update={"replies": 2}), event


BEFORE = reading(ASKED - timedelta(seconds=30), registered=20, busy=20, maximum=20)


def test_runners_registered_say_they_came_with_the_queue_as_judged_and_edit_the_reply() -> None:
    incident, _ = scaled_incident(BEFORE)
    assert made_scale_ups(incident)[0].baseline == 20
    early = reading(ASKED + timedelta(minutes=1), registered=24, busy=24, maximum=27)
    assert settled(incident, early, ASKED + timedelta(minutes=1))[1] == (), "not yet"
    at = ASKED + timedelta(minutes=2)
    came = reading(
        at, registered=27, busy=27, maximum=27, direction=Direction.FALLING, change_per_min=-5
    )
    followed, events, replies = settled(incident, came, at)
    assert not any(up.followed for up in made_scale_ups(followed))
    assert [e.kind for e in events] == ["scale_outcome"] and events[0].actor is None
    assert events[0].text == (
        f"+7 on {TYPE} at 14:02 UTC: 7 registered by 14:04 UTC, all busy; "
        "the queue falls 5 jobs/min"
    )
    (reply,) = replies
    assert reply.edits == "reply_ts:2", "its own reply, nothing posted below it"
    blocks = str(reply.rendered.blocks)
    assert f"Scaled {TYPE} by +7" in blocks and "<!date^" in blocks
    assert settled(followed, came, at)[1] == (), "said once"


def test_a_reading_still_showing_the_old_maximum_is_not_taken_for_runners_come() -> None:
    """ARC's listener says the new maximum only after it restarts, and Prometheus scrapes it
    later still: a reading after the raise can show the set as it was (20 of 20). None came."""
    incident, _ = scaled_incident(BEFORE, field="maxRunners", before=20, after=27)
    at = ASKED + timedelta(seconds=20)
    stale = reading(at, registered=20, busy=20, maximum=20)
    assert settled(incident, stale, at)[1] == (), "not yet: nothing registered"
    due = ASKED + timedelta(seconds=VERIFY_S)
    (event,) = settled(incident, reading(due, registered=20, busy=20, maximum=20), due)[1]
    assert event.text.startswith("+7 asked at 14:02 UTC: 0 registered after 10 min"), event.text


def test_runners_past_the_room_under_an_unraised_maximum_are_not_waited_for() -> None:
    """minRunners +7 on a set at 18 of its maximum of 20: ARC starts at most 2; they came."""
    before = reading(ASKED - timedelta(seconds=30), registered=18, busy=18, maximum=20)
    incident, _ = scaled_incident(before, field="minRunners", before=0, after=7)
    at = ASKED + timedelta(minutes=2)
    (event,) = settled(incident, reading(at, registered=20, busy=20, maximum=20), at)[1]
    assert event.text.startswith(f"+7 on {TYPE} at 14:02 UTC: 2 registered by 14:04 UTC")


def test_a_reply_posted_below_makes_the_outcome_a_reply_of_its_own() -> None:
    incident, _ = scaled_incident(BEFORE)
    below = incident.model_copy(update={"replies": incident.replies + 1})
    at = ASKED + timedelta(minutes=3)
    came = reading(at, registered=27, busy=25, maximum=27, direction=Direction.HOLDING)
    (reply,) = settled(below, came, at)[2]
    assert reply.edits == ""
    assert "Scaled" not in str(reply.rendered.blocks)
    assert "7 registered by" in str(reply.rendered.blocks) and "25 busy; the queue holds" in (
        str(reply.rendered.blocks)
    )


def test_not_by_the_deadline_says_how_many_came_and_the_pods_cause() -> None:
    incident, _ = scaled_incident(BEFORE)
    stuck = {"registered": 22, "busy": 22, "maximum": 27, "cannot_start": 5, "causes": (PENDING,)}
    before_due = ASKED + timedelta(minutes=9)
    assert settled(incident, reading(before_due, **stuck), before_due)[1] == ()
    due = ASKED + timedelta(seconds=VERIFY_S)
    (event,) = settled(incident, reading(due, **stuck), due)[1]
    assert event.text == (
        "+7 asked at 14:02 UTC: 2 registered after 10 min; "
        "5 runner pods Pending for 8 min: no node fits (unschedulable)"
    )


def test_without_a_known_cause_it_says_what_is_known() -> None:
    incident, _ = scaled_incident(BEFORE)
    due = ASKED + timedelta(seconds=VERIFY_S)
    (event,) = settled(incident, reading(due, registered=20, busy=20, maximum=27), due)[1]
    assert event.text.endswith(
        "0 registered after 10 min; no cause known (no runner pods read as Pending or failing)"
    )


def test_without_a_pod_cause_the_scalers_own_view_is_the_cause() -> None:
    """The SQS and ASG backends have no runner pods: what their scaler shows is read once the
    deadline passed (`not_come`), and said; a pod cause, where the reading has one, first."""
    incident, _ = scaled_incident(BEFORE)
    before_due, due = ASKED + timedelta(minutes=9), ASKED + timedelta(seconds=VERIFY_S)
    idle = {"registered": 20, "busy": 20, "maximum": 27}
    assert not_come(incident, reading(before_due, **idle), before_due) == {}
    assert not_come(incident, reading(due, **idle), due) == {TYPE: ASKED}
    came = reading(due, registered=27, busy=27, maximum=27)
    assert not_come(incident, came, due) == {}, "nothing to read when they came"
    failed = "the group's last activity failed: We currently do not have sufficient capacity"
    (event,) = settled(incident, reading(due, **idle), due, {TYPE: failed})[1]
    assert event.text == f"+7 asked at 14:02 UTC: 0 registered after 10 min; {failed}"
    stuck = idle | {"cannot_start": 5, "causes": (PENDING,)}
    (event,) = settled(incident, reading(due, **stuck), due, {TYPE: failed})[1]
    assert event.text.endswith(PENDING.evidence)


def test_a_reading_that_counts_no_runners_says_not_known_never_done() -> None:
    hud = reading(ASKED - timedelta(seconds=30), source="hud", queued=30)
    incident, _ = scaled_incident(hud)
    assert made_scale_ups(incident)[0].baseline is None
    later = ASKED + timedelta(minutes=5)
    assert settled(incident, reading(later, source="hud", queued=10), later)[1] == ()
    due = ASKED + timedelta(seconds=VERIFY_S)
    (event,) = settled(incident, reading(due, source="hud", queued=0), due)[1]
    assert (
        event.text
        == f"+7 on {TYPE} at 14:02 UTC: not known: the HUD does not count registered runners"
    )


def test_without_readings_it_is_not_known_at_once_in_the_scale_ups_own_reply() -> None:
    incident, event = scaled_incident(None)
    assert event.scale is not None
    outcome = outcome_of(event.scale, None, ASKED)
    assert outcome is not None and outcome.came is None
    said = outcome_said(event.scale, outcome)
    assert (
        said == f"+7 on {TYPE} at 14:02 UTC: not known: the alert does not count registered runners"
    )
    rendered = render_outcome(incident, event, "· goes back later", outcome, edit=True)
    shown = str(rendered.blocks)
    assert "Scaled" in shown and "goes back later" in shown and "not known" in shown


def test_a_scale_up_still_followed_when_the_incident_resolves_is_summarized_as_not_known() -> None:
    """Resolved by hand a minute after the scale-up, before any reading showed its runners: the
    summary says so, never that it was done; one decided before says nothing more there."""
    incident, _ = scaled_incident(BEFORE)
    now = ASKED + timedelta(minutes=1)
    resolved = resolve_manually(incident, by="U1", name="alice", now=now)
    text = str(render_summary(resolved, [], now=now).blocks)
    assert (
        f"+7 on {TYPE} at <!date^" in text
        and "not known: its runners were not seen registered before the incident resolved" in text
    ), text
    decided = made_scale_ups(resolved)[0].model_copy(update={"due": None})
    settled_first = with_scale_ups(resolved, {ASKED: decided})
    assert "not seen registered" not in str(render_summary(settled_first, [], now=now).blocks)


def test_runners_asked_as_the_queue_drained_were_not_needed_which_is_no_failure() -> None:
    """An autoscaler starts runners for jobs: asked as the queue drained, none come because none
    were needed. That is not known to have failed (the pilot pauses on a failure), and says why;
    a scaler's own failure, or pods that cannot start, still say it did not come."""
    incident, _ = scaled_incident(BEFORE)
    due = ASKED + timedelta(seconds=VERIFY_S)
    drained = reading(due, queued=0, registered=20, busy=12, maximum=27)
    (event,) = settled(incident, drained, due)[1]
    assert event.text == (
        "+7 on linux.2xlarge at 14:02 UTC: not known: the queue drained before they registered, "
        "so no job was left for them"
    )
    updated, _, _ = settled(incident, drained, due)
    assert updated.actions[-1].scale is not None and updated.actions[-1].scale.came is None
    failed = "the group's last activity failed: We currently do not have sufficient capacity"
    (event,) = settled(incident, drained, due, {TYPE: failed})[1]
    assert event.text.endswith(failed) and "0 registered after 10 min" in event.text
