"""One record: the root at resolve, the summary, the postmortem in Slack and on the alert's GitHub
issue, and the issue's resolve comment take their numbers, counts and workflows from the same
stored record (the incident and its timeline), so they cannot differ. (A responder once saw
"Actions taken | 3" in Slack beside "4" on GitHub, "not known (no jobs source)" on GitHub beside
the HUD's workflows in the postmortem, and a root saying "6 queued · longest wait 2 min" over a
summary's "12 queued · 2.7 min", and `/queue report` saying "runners 16–20" of a type the
thread showed "busy 25/25".)"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from bot.domain.alerting.alert_issue import Moment, moment_key
from bot.domain.alerting.alerts import QueueNumbers, RunnerQueue
from bot.domain.incident.incidents import (
    Event,
    Incident,
    Snapshot,
    actions_taken,
    drafted_from,
    resolve_drained,
    resolve_manually,
    with_live,
)
from bot.domain.queue_cost.jobs import (
    JobsView,
    RunnerTypeJobs,
    Trigger,
    WorkflowQueue,
    workflows_seen,
)
from bot.domain.reading.capacity import capacity_report
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.reading.judging import judged
from bot.render.alert_issue import comment, unlinked
from bot.render.capacity import render_report
from bot.render.numbers import peak_rows, type_lines
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_summary
from bot.render.root import render_root
from tests.support.incidents import make_incident

T0 = datetime(2026, 11, 25, 12, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"
ALICE = {"actor": "U0ALICE", "actor_name": "alice"}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def timeline() -> list[Event]:
    """Three things done, one refused, then two write-ups asked for."""
    return [
        Event(at=at(0), kind="opened", text="Alert fired: Jobs queueing"),
        Event(at=at(2), kind="acknowledged", text="Acknowledged", **ALICE),
        Event(at=at(3), kind="scaled", text="Scaled linux.2xlarge by +5", **ALICE),
        Event(at=at(4), kind="refused", text="Scale up refused: the cooldown", **ALICE),
        Event(at=at(20), kind="resolved", text="Resolved manually", **ALICE),
        Event(at=at(25), kind="postmortem", text="Postmortem drafted", **ALICE),
        Event(at=at(40), kind="postmortem", text="Postmortem drafted", **ALICE),
    ]


def resolved() -> Incident:
    incident = make_incident(started_at=T0, opened_at=T0)
    return resolve_manually(incident, by="U0ALICE", name="alice", now=at(20))


def fields_of(blocks: list[dict]) -> str:
    return " ".join(f["text"] for b in blocks for f in b.get("fields", ()))


def test_the_summary_and_each_postmortem_count_the_same_actions_taken() -> None:
    incident, events = resolved(), timeline()
    at_resolve = events[:5]  # the summary is drafted with the resolve
    second = events[-1]

    summary = fields_of(render_summary(incident, at_resolve, now=at(20)).blocks)
    in_slack = render_postmortem(incident, drafted_from(events, second), now=second.at)
    on_github = comment(incident, Moment(moment_key(second), second), timeline=events, now=at(90))

    assert len(actions_taken(events)) == 3, "neither the refusal nor a write-up is an action"
    assert "Actions taken: *3*, by *alice*" in summary
    assert "| Actions taken | 3, by alice |" in in_slack
    assert "| Actions taken | 3, by alice |" in on_github
    # Drafted from the same record at the same moment: GitHub's copy is the thread's, word for
    # word, however much later the issue hears of it.
    assert unlinked(in_slack).strip() in on_github


def jobs(at_: datetime) -> JobsView:
    flows = (WorkflowQueue("periodic", 22, 58.0, "", "", ((Trigger.SCHEDULE, 22),), last_hour=40),)
    return JobsView(source="HUD", at=at_, runner_types={GPU: RunnerTypeJobs(GPU, 22, flows)})


def test_the_resolve_comment_names_the_workflows_the_postmortem_names() -> None:
    incident, events = resolved(), timeline()
    seen = workflows_seen(jobs(at(25)), "", types=[GPU], ended=incident.resolved.at)
    recorded = incident.model_copy(update={"workflows": seen})
    resolve = events[4]

    postmortem = render_postmortem(recorded, events[:5], now=at(25))
    told = comment(recorded, Moment(moment_key(resolve), resolve), timeline=events, now=at(90))

    said = "Jobs and workflows affected, as HUD read them on 2026-11-25 12:25 UTC"
    row = f"| {GPU} | periodic | 22 | 40 |"
    assert said in postmortem and said in told
    assert row in postmortem and row in told


def test_before_any_postmortem_the_resolve_comment_claims_no_missing_jobs_source() -> None:
    incident, events = resolved(), timeline()
    resolve = events[4]

    told = comment(incident, Moment(moment_key(resolve), resolve), timeline=events, now=at(21))

    assert "### Impact" in told
    assert "not known" not in told and "no jobs source" not in told


def test_the_root_at_resolve_shows_the_summarys_peaks_and_when() -> None:
    # The alert last said 6 queued (2 min) of a queue whose peak was 12 (2.7 min) at 12:05.
    peak = Snapshot(
        at=at(5), numbers=QueueNumbers(2.7, 12), runner_types={GPU: RunnerQueue(12, 2.7)}
    )
    incident = make_incident(
        started_at=T0,
        opened_at=T0,
        numbers=QueueNumbers(2.0, 6),
        runner_types={GPU: RunnerQueue(6, 2.0)},
        peak=QueueNumbers(2.7, 12),
        peak_types={GPU: RunnerQueue(12, 2.7)},
        peak_snapshot=peak,
    )
    done = resolve_drained(incident, now=at(20))

    root = str(render_root(done, now=at(30)).blocks)
    summary = render_summary(done, [], now=at(20)).blocks

    [rows] = peak_rows(done)
    assert rows == f"• {GPU}: 12 queued · longest wait 2.7 min"
    assert rows in root and rows in str(summary)
    assert "6 queued" not in root, "not the alert's last numbers beside the peak"
    when = re.escape(str(int(at(5).timestamp())))
    said = rf"Peak queued jobs: \*12\* at <!date\^{when}"
    assert re.search(said, fields_of(summary)) and re.search(said, root)


def test_the_capacity_report_says_the_runners_the_thread_showed() -> None:
    """The thread showed busy 25/25 on a maximum raised to 25; the maximum went back to 20 since.
    The report's runners for the type are what its incident recorded, not today's bounds."""
    big = "linux.2xlarge"
    read = FleetSnapshot(
        at=at(10),
        source="prometheus",
        runner_types={
            big: RunnerTypeMetrics(
                queued=30, longest_wait_mins=12, busy=25, registered=25, minimum=16, maximum=25
            )
        },
    )
    during = judged(read, [], interval=timedelta(minutes=1))
    incident = with_live(make_incident(started_at=T0, opened_at=T0), during, Snapshot(at=at(10)))
    done = resolve_drained(incident, now=at(40))
    now_read = {big: RunnerTypeMetrics(minimum=16, maximum=20)}

    [report] = capacity_report([(done, [])], now_read, since=T0, now=at(60), only=big)
    thread = " ".join(type_lines(during))

    assert "busy 25/25" in thread
    assert "runners 16–25 (busy 25/25 at most in its incidents)" in render_report(
        [report], days=7, kept_days=30
    )
