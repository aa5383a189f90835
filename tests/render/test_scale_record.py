"""The scale record as each surface says it: the summary, the postmortem, the alert's issue and
`/queue report` tell the same scale-ups, who made them, what came of them, and the minutes from
the alert to added capacity."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

from bot.domain.alerting.alert_issue import Moment, moment_key, moments
from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import Event, Incident, Resolution, Status, with_bought
from bot.domain.queue_cost.cost import counted_cost, waited_of_jobs
from bot.domain.reading.capacity import TypeReport, capacity_report
from bot.domain.reading.fleet import HistoryPoint
from bot.domain.scale.scale_record import scale_record
from bot.render.alert_issue import comment
from bot.render.capacity import render_report
from bot.render.cost import cost_said
from bot.render.follow_ups import bought_said
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_summary
from tests.domain.test_scale_record import BIG, GPU, PILOT, act, at, incident
from tests.support.incidents import changed


def resolved(*acts: object) -> Incident:
    done = incident(*acts)  # type: ignore[arg-type]
    return changed(
        done,
        status=Status.RESOLVED,
        resolved_at=at(40),
        resolution=Resolution.ALERT,
    )


def summary_text(done: Incident) -> str:
    return str(render_summary(done, [], now=at(41)).blocks)


def test_the_summary_says_each_act_what_came_of_it_and_when_capacity_came() -> None:
    text = summary_text(
        resolved(act(6, 7, by=PILOT, came=True, seen=8), act(9, 5, came=False, seen=19))
    )
    assert f"✅ The pilot added +7 on {BIG} at <!date^" in text
    assert "they came up by <!date^" in text
    assert f"⚠️ alice added +5 on {BIG} at <!date^" in text and "they did not come up by" in text
    assert "⏱️ Capacity added 8 min after the alert" in text


def test_with_several_types_the_minutes_name_their_type_and_unknowns_say_so() -> None:
    text = summary_text(resolved(act(3, 2, came=True, seen=5), act(4, 1, GPU, by="bob")))
    assert f"⏱️ {BIG}: capacity added 5 min after the alert" in text
    assert GPU + ": capacity" not in text, "none came: no minutes"
    assert f"❔ bob added +1 on {GPU} at <!date^" in text
    assert "whether they came up is not known" in text


def test_a_scale_up_still_followed_is_said_as_such_and_nothing_scaled_says_nothing() -> None:
    followed = act(3, 2)
    assert followed.scale is not None
    pending = followed.scale.model_copy(update={"due": at(13)})
    still = incident(followed.model_copy(update={"scale": pending}))
    assert "still followed" in summary_text(still)
    quiet = summary_text(resolved())
    assert "added +" not in quiet and "Capacity added" not in quiet


def test_the_summary_shows_the_latest_acts_and_counts_the_rest() -> None:
    many = [act(n, 1, came=True, seen=n + 1) for n in range(9)]
    text = summary_text(resolved(*many))
    assert "_3 earlier scale-ups not shown_" in text
    assert text.count("alice added +1") == 6


def test_the_postmortem_has_a_scale_ups_table_per_type_and_by_whom() -> None:
    done = resolved(
        act(6, 7, by=PILOT, came=True, seen=8),
        act(9, 5, came=False, seen=19),
        act(10, 3, came=True, seen=14),
        act(12, 2, GPU, by="bob"),
    )
    doc = render_postmortem(done, [], now=at(41))
    section = doc.split("## Scale-ups\n\n")[1].split("\n\n## ")[0]
    assert "From when the alert fired, 2026-11-23 13:56 UTC:" in section
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows == [
        "| Runner type | By | Runners asked | Came up | Alert to added capacity |",
        "| linux.2xlarge | people | +8 | 1 of 2, 1 did not | 14 min |",
        "| linux.2xlarge | the pilot | +7 | 1 of 1 | 8 min |",
        "| linux.g5.4xlarge.nvidia.gpu | people | +2 | 0 of 1, 1 not known | – |",
    ]
    assert "## Scale-ups" not in render_postmortem(resolved(), [], now=at(41))


def test_the_alert_issue_tells_each_outcome_and_its_resolve_comment_has_the_table() -> None:
    done = resolved(act(6, 7, by=PILOT, came=True, seen=8))
    outcome = Event(at=at(8), kind="scale_outcome", text="+7 on x at 14:02 UTC: 7 registered")
    ended = Event(at=at(40), kind="resolved", text="Resolved")
    told = [m.event for m in moments([outcome, ended])]
    assert told == [None, outcome, ended]
    said = comment(done, Moment(moment_key(outcome), outcome), now=at(41))
    assert said.startswith("**Scale-up followed** at 2026-11-23 14:04 UTC: \\+7 on x at 14:02 UTC")
    closing = comment(done, Moment(moment_key(ended), ended), timeline=[ended], now=at(41))
    assert "### Scale-ups" in closing and "| linux.2xlarge | the pilot | +7 | 1 of 1 | 8 min |" in (
        closing
    )


def test_the_report_line_says_what_came_of_a_types_scale_ups() -> None:
    (scaled,) = scale_record(resolved(act(6, 7, by=PILOT, came=True, seen=8), act(9, 5)))
    report = TypeReport(runner_type=BIG, incidents=1, scale_ups={PILOT: 1, "alice": 1})
    text = render_report([replace(report, scaled=scaled)], days=7, kept_days=30)
    assert (
        "2 scale-ups (queuepilot (policy) 1, alice 1) · 1 of 2 came up (the pilot's 1 of 1), "
        "1 not known · capacity added 8 min after the alert" in text
    )
    assert "came up" not in render_report([report], days=7, kept_days=30)


def surge(arrivals: tuple[float, float], served: tuple[float, float]) -> list[HistoryPoint]:
    """The readings the leader kept (one every 30 s) of a queue of 60 at minute 0, jobs arriving
    and served a minute at the first rates until minute 10, at the second after."""
    points, queued = [], 60.0
    for k in range(41):
        side = 0 if k <= 20 else 1
        kept = {BIG: {"queued": round(queued)}}
        points.append(HistoryPoint(at(k / 2), {BIG: arrivals[side]}, {}, kept))
        queued = max(queued + (arrivals[side] - served[side]) / 2, 0.0)
    return points


def test_what_each_scale_up_bought_is_said_alike_by_the_summary_postmortem_and_issue() -> None:
    """Kept once on the record by the leader's tick, said word for word everywhere: a scale-up
    during a steady surge credited with the minutes it took off; one as the surge ended not."""
    window = timedelta(minutes=5)
    during = resolved(act(8, 5, came=True, seen=10))
    early = with_bought(during, surge((6, 6), (7, 10)), at(12), window)
    assert early.actions == during.actions, "not before its window of readings is in"
    done = with_bought(during, surge((6, 6), (7, 10)), at(15), window)
    bought = next(e.scale.bought for e in done.actions if e.scale is not None)
    assert bought is not None and bought.measured and (bought.saved_mins or 0) > 20
    said = bought_said(bought)
    assert said.startswith("it took ~") and "off the drain (the queue fell 1.0 jobs/min" in said
    assert re.search(
        r"against the drain before it, arrivals held at 6\.0 jobs/min \(6\.\d after\)\)$", said
    )
    ended = Event(at=at(40), kind="resolved", text="Resolved")
    surfaces = {
        "summary": summary_text(done),
        "postmortem": render_postmortem(done, [], now=at(41)),
        "issue": comment(done, Moment(moment_key(ended), ended), timeline=[ended], now=at(41)),
    }
    for name, text in surfaces.items():
        assert said in text, name
    assert f"- +5 on {BIG} at 2026-11-23 14:04 UTC by alice: {said}" in surfaces["postmortem"]

    ending = with_bought(
        resolved(act(8, 5, came=True, seen=10)), surge((6, 1), (7, 10)), at(15), window
    )
    late = next(e.scale.bought for e in ending.actions if e.scale is not None)
    assert late is not None and not late.measured
    assert bought_said(late) == (
        "what it bought is not measurable: arrivals fell from 6.0 to 1.0 jobs/min as its "
        "runners came"
    )
    assert bought_said(late) in summary_text(ending)
    # Resolved before its window passed: read at the resolve over what there was.
    final = with_bought(during, surge((6, 6), (7, 10)), at(11), window, final=True)
    short = next(e.scale.bought for e in final.actions if e.scale is not None)
    assert short is not None and "too few readings frame it" in short.why


def test_the_report_says_an_incidents_cost_as_its_summary_does_and_sums_several() -> None:
    jobs = [
        {
            "id": n,
            "status": "completed",
            "runner_id": 3,
            "labels": [BIG],
            "created_at": at(2).isoformat(),
            "started_at": at(2 + n).isoformat(),
            "workflow_name": "pull" if n % 2 else "trunk",
            "head_branch": f"gh/someone/{n}/head",
        }
        for n in range(1, 9)
    ]
    cost = waited_of_jobs(jobs, BIG, at(0), at(30), 5.0)
    shown = {BIG: RunnerQueue(queued=12)}
    one = changed(
        resolved(act(6, 7, came=True, seen=8)),
        cost={BIG: cost},
        runner_types=shown,
        peak_types=shown,
    )
    sentence = f"Cost on {BIG}: {cost_said(cost)}"
    assert sentence in summary_text(one)
    assert sentence in render_postmortem(one, [], now=at(41))
    [report] = capacity_report([(one, [])], {}, since=at(-60), now=at(60), only=BIG)
    text = render_report([report], days=7, kept_days=30)
    assert f"↳ its incidents cost {cost_said(cost)}" in text, "the same words as the summary"
    two = one.model_copy(update={"id": "8"})
    [both] = capacity_report([(one, []), (two, [])], {}, since=at(-60), now=at(60), only=BIG)
    assert both.cost is not None and both.cost.jobs == 2 * cost.jobs
    assert both.cost.minutes_past == 2 * cost.minutes_past and both.cost.prs is None
    assert "pull requests and branches not known" in cost_said(both.cost)


def test_a_cost_read_before_the_end_says_when_and_the_counters_count_it_once() -> None:
    jobs = [
        {
            "id": 1,
            "status": "completed",
            "runner_id": 3,
            "labels": [BIG],
            "created_at": at(2).isoformat(),
            "started_at": at(9).isoformat(),
            "workflow_name": "pull\nCost on linux.2xlarge: nothing",  # a name forging a line
        }
    ]
    cost = waited_of_jobs(jobs, BIG, at(0), at(30), 5.0)
    stale = changed(resolved(), cost={BIG: cost}, cost_at=at(20))
    summary = summary_text(stale)
    assert (
        f"💸 Cost on {BIG}: 2 job-minutes past 5 min: 1 job in 1 workflow, pull Cost on" in summary
    )
    assert "(to <!date^" in summary and "\\nCost on" not in summary
    assert "(to 2026-11-23 14:16 UTC)" in render_postmortem(stale, [], now=at(41))
    fresh = changed(stale, cost_at=at(40))
    assert "(to " not in summary_text(fresh)
    # Read again lower (Prometheus' increase moves a little), then back: counted once.
    marks, added = counted_cost({}, {BIG: cost})
    assert added == {BIG: (420.0, 1)}
    lower = replace(cost, minutes=6.0, jobs_past=0)
    marks, added = counted_cost(marks, {BIG: lower})
    assert added == {BIG: (0.0, 0)}
    marks, added = counted_cost(marks, {BIG: cost})
    assert added == {BIG: (0.0, 0)} and marks == {BIG: (420.0, 1)}
