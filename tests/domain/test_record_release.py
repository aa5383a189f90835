"""A record says which release wrote it: 0.27's (which kept the slowest recent start as the
longest wait where it was the longer) are read with the two measures apart; this release's are
read, and stored back, as written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incidents import (
    _KEPT_FLAT,
    RECORD_RELEASE,
    Incident,
    Snapshot,
    resolve_drained,
    with_scale_ups,
    without_put_backs,
)
from bot.domain.scale.scale_ups import ScaleUp
from bot.render import mrkdwn as md
from bot.render.replies import put_back_said, render_summary
from bot.storage.incident_store import state_json
from tests.support.incidents import changed, make_incident, with_scaled

T0 = datetime(2026, 11, 25, 12, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def loaded(text: str) -> Incident:
    return Incident.model_validate_json(text)


def with_peak_wait_of(minutes: float) -> Incident:
    """Resolved, its peak wait `minutes` at 12:07 (the alert's queue time), and its GPU type's
    slowest recent start the same number: the two measures alike by chance."""
    incident = make_incident(started_at=T0, opened_at=T0)
    start = RunnerQueue(queued=12, longest_wait_mins=minutes, wait_of_starts=True)
    status = Snapshot(
        at=at(7),
        numbers=QueueNumbers(max_queue_time_mins=minutes, max_queue_size=12),
        runner_types={GPU: start},
    )
    # As the product changes a record (model_copy): what it wrote, not what it read.
    incident = changed(
        incident,
        peak=QueueNumbers(max_queue_time_mins=minutes, max_queue_size=12),
        peak_wait_at=at(7),
        peak_types={GPU: start},
        posted_status=status,
    )
    return resolve_drained(incident, now=at(12))


# The flat names 0.27 reads each group's fields under, as 0.27 wrote them: the record keeps them
# so a rollback reads every field where it looks (its own names, not the groups' order).
FLAT_AS_0_27_READS = {
    "peaks": {
        "numbers": "peak",
        "moment": "peak_snapshot",
        "wait_at": "peak_wait_at",
        "start_at": "peak_start_at",
        "types": "peak_types",
        "runners": "peak_runners",
    },
    "queue_cost": {
        "by_type": "cost",
        "at": "cost_at",
        "unknown": "cost_unknown",
        "counted": "cost_counted",
    },
    "drain": {"checks": "drain_checks", "read_at": "drain_read_at", "follow": "follow"},
    "shown": {
        "status": "posted_status",
        "statuses": "status_posts",
        "replied_since": "replied_since_status",
        "charted_at": "charted_at",
        "pictured_at": "pictured_at",
    },
    "cause": {
        "said": "likely_cause",
        "runner_type": "cause_type",
        "maximum": "cause_maximum",
        "pods": "cause_pods",
    },
    "acknowledged": {"by": "acknowledged_by", "name": "acknowledged_name"},
    "resolved": {
        "at": "resolved_at",
        "how": "resolution",
        "by": "resolved_by",
        "by_name": "resolved_by_name",
    },
    "notified": {"count": "notifications", "at": "alerted_at"},
}


def test_each_groups_field_is_stored_under_the_flat_name_0_27_reads() -> None:
    """The table pairs the names with a group's fields in their order: two fields swapped in a
    group would store each under the other's name, and a rollback would read them crossed."""
    assert _KEPT_FLAT == FLAT_AS_0_27_READS
    stored = json.loads(state_json(changed(make_incident(), acknowledged_by="U1")))
    assert stored["acknowledged_by"] == "U1" and "acknowledged" not in stored


def test_a_record_this_release_wrote_is_read_and_stored_back_as_written() -> None:
    written = state_json(with_peak_wait_of(3.5))
    assert json.loads(written)["written_by"] == RECORD_RELEASE

    read = loaded(written)
    summary = " ".join(str(b) for b in render_summary(read, [], now=at(12)).blocks)

    assert state_json(read) == written, "not rewritten on load"
    assert f"Peak longest wait: *3.5 min* at {md.time_of(at(7))}" in summary, summary
    assert "Peak slowest recent start" not in summary, summary


def test_a_record_0_27_wrote_has_its_statuses_and_its_peak_read_with_the_measures_apart() -> None:
    old = json.loads(state_json(with_peak_wait_of(3.5)))
    del old["written_by"]  # 0.27 knew no such field

    read = loaded(json.dumps(old))
    summary = " ".join(str(b) for b in render_summary(read, [], now=at(12)).blocks)

    assert f"Peak slowest recent start: *3.5 min* at {md.time_of(at(7))}" in summary, summary
    assert "Peak longest wait" not in summary, summary
    assert read.shown.status is not None
    assert read.shown.status.numbers.max_queue_time_mins is None
    assert read.shown.status.numbers.slowest_start_mins == 3.5
    assert json.loads(state_json(read))["written_by"] == RECORD_RELEASE, "stored in this form"


def scaled_twice() -> Incident:
    """Two scale-ups of one record (maxRunners 20 → 25 → 30), the second still to go back to
    20 once the queue settles, at the latest four hours after it."""
    incident = make_incident(started_at=T0, opened_at=T0)
    for minute, (before, after) in ((3, (20, 25)), (5, (25, 30))):
        up = ScaleUp(
            runner_type=GPU,
            added=5,
            by="alice",
            at=at(minute),
            field="maxRunners",
            before=before,
            after=after,
            back=f"{GPU}|maxRunners",
            back_to=20,
            back_when="once its queue has stayed drained 30 min",
            back_by=at(minute + 240),
        )
        # As `Scaling` records it: the latest scale-up of a record alone says what goes back.
        incident = with_scaled(without_put_backs(incident, {up.back}), up)
    return incident


def test_a_put_back_is_kept_as_0_27_keeps_it_and_read_back_onto_its_scale_up() -> None:
    """0.27 reads what goes back from its own list: it is written there for a rolled-back
    replica; what 0.27 then wrote (its list, and scale-ups without the put-back, as it knows
    none of it) is read back onto the latest scale-up of the list's type and field."""
    incident = scaled_twice()
    written = json.loads(state_json(incident))
    assert written["put_backs"] == [
        {
            "id": f"{GPU}|maxRunners",
            "runner_type": GPU,
            "field": "maxRunners",
            "before": 20,
            "after": 30,
            "when": "once its queue has stayed drained 30 min",
            "latest": at(245).isoformat(),
        }
    ], "one put-back, from the first scale-up's value to the second's"
    assert loaded(json.dumps(written)) == incident, "read back as written"

    old = written | {"actions": [], "put_backs": written["put_backs"]}
    for action in written["actions"]:
        scale = {k: v for k, v in action["scale"].items() if not k.startswith("back")}
        old["actions"].append(action | {"scale": scale})
    del old["written_by"]
    read = loaded(json.dumps(old))
    [going] = read.put_backs
    assert (going.at, going.back_to, going.after, going.back_by) == (at(5), 20, 30, at(245))
    assert [e.scale.back for e in read.actions if e.scale] == ["", f"{GPU}|maxRunners"]

    old["put_backs"] = []  # a rolled-back 0.27 put it back
    assert loaded(json.dumps(old)).put_backs == ()


def test_an_undone_act_that_continued_a_scale_up_says_the_rest_goes_back_from_where_it_began() -> (
    None
):
    """The pilot's +5 (25 -> 30) continued a person's +5 (20 -> 25); undone, the field goes back
    from 25 to 20 by the act's deadline, and a rolled-back 0.27's list is read back onto it."""
    incident = scaled_twice()
    act = incident.actions[-1].scale
    assert act is not None
    undone = act.model_copy(update={"undone": True, "due": None})  # its marks kept (`pilot`)
    incident = with_scale_ups(incident, {incident.actions[-1].at: undone})
    [going] = incident.put_backs
    said = put_back_said(going, md.escape, md.time_of)
    assert said.startswith(f"{GPU} maxRunners 25 goes back to 20"), said
    written = json.loads(state_json(incident))
    assert [(p["before"], p["after"]) for p in written["put_backs"]] == [(20, 25)]
    old = written | {
        "actions": [
            a | {"scale": {k: v for k, v in a["scale"].items() if not k.startswith("back")}}
            for a in written["actions"]
        ]
    }
    assert loaded(json.dumps(old)).put_backs == incident.put_backs


@pytest.mark.parametrize(
    "put_backs",
    [
        None,
        "x",
        [7, "x", None],
        [{"runner_type": GPU, "field": "maxRunners", "after": 30}],
        [{"id": f"{GPU}|maxRunners", "runner_type": GPU, "field": "maxRunners", "when": None}],
        [{"id": "r", "runner_type": GPU, "field": "maxRunners", "after": 30, "before": "ten"}],
    ],
)
def test_a_stored_list_of_put_backs_in_no_known_shape_is_passed_over(put_backs: object) -> None:
    """The record is read whatever the list holds; a list that is not one keeps the marks."""
    written = json.loads(state_json(scaled_twice())) | {"put_backs": put_backs}
    read = loaded(json.dumps(written))
    if not isinstance(put_backs, list):
        assert [p.after for p in read.put_backs] == [30]
    else:
        assert read.put_backs == ()
