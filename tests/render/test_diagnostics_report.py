"""The diagnostics report as a responder reads it: the cause and the next step first, each
finding once, the jobs behind the queue in a line, and a source's blind spot said once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.domain.queue_cost.jobs import (
    Arrivals,
    JobsListing,
    JobsView,
    QueuedJob,
    Trigger,
    jobs_view,
    surging,
)
from bot.domain.reading.causes import Evidence
from bot.domain.reading.diagnostics import diagnose
from bot.domain.reading.fleet import FleetSnapshot
from bot.domain.reading.fleet import RunnerTypeMetrics as M
from bot.render.diagnostics import render_diagnostics
from tests.support.incidents import make_incident

NOW = datetime(2026, 11, 22, 14, 5, tzinfo=UTC)
T = "linux.2xlarge"
SURGING = M(
    queued=40, longest_wait_mins=9, registered=20, busy=20, idle=0, maximum=20, desired=20,
    arrival_per_min=5.0, arrival_baseline_per_min=2.0, job_duration_mins=6,
    duration_baseline_mins=6, completed_per_min=3.3,
)  # fmt: skip
MIX = [("periodic", Trigger.SCHEDULE)] * 28 + [("pull", Trigger.PULL_REQUEST)] * 9


def view_of(source: str, jobs: int = len(MIX), *, age_mins: float = 9) -> JobsView:
    listed = tuple(
        QueuedJob(T, workflow, "build", "pytorch/pytorch", f"https://github.com/p/p/actions/runs/{i}",
                  NOW - timedelta(minutes=age_mins - i * 0.1), trigger, 1, f"{source}:{i}")
        for i, (workflow, trigger) in enumerate(MIX[:jobs])
    )  # fmt: skip
    # As the backends give them: the HUD's listing says its floor, GitHub's lists every job.
    floor = 5.0 if source == "the HUD" else None
    listing = JobsListing(listed, listed_over_mins=floor)
    return jobs_view(listing, Arrivals(), source=source, at=NOW)


def report_lines(metrics: M, view: JobsView) -> list[str]:
    snapshot = FleetSnapshot(at=NOW, source="prometheus", runner_types={T: metrics})
    surge = surging(view, T)
    evidence = Evidence(surges={T: surge} if surge else {}, jobs_note="")
    report = render_diagnostics(
        make_incident(), diagnose(snapshot, evidence), snapshot, by="al", jobs=view
    )
    assert len(report.blocks) <= 50
    texts = [b["text"]["text"] for b in report.blocks if "text" in b]
    texts += [e["text"] for b in report.blocks for e in b.get("elements", [])]
    assert all(len(t) <= 3000 for t in texts)
    return "\n".join(texts).splitlines()


def test_the_demo_incident_reads_cause_then_next_step_in_ten_lines() -> None:
    lines = report_lines(SURGING, view_of("GitHub"))
    assert len(lines) <= 10, "\n".join(lines)
    assert lines[1] == "*Likely cause:* One workflow's surge on linux.2xlarge (high confidence)"
    assert lines[2].startswith("*Next:* cancel or defer periodic")
    text = "\n".join(lines)
    # The surge is one line with both numbers; nothing says there is none, or blames the maximum.
    assert sum("periodic (schedule)" in line for line in lines) == 1
    assert sum("2.5×" in line for line in lines) == 1
    assert "no stalled listener" not in text and "Likely cause:* Autoscaling" not in text
    assert "📈" not in text  # the jobs line does not say the surge a second time
    assert "`periodic` 28 (schedule)" in text and "actions/runs/0" in text


def test_the_huds_five_minute_floor_is_said_once_where_it_hides_the_queue() -> None:
    young = report_lines(SURGING, view_of("the HUD", jobs=0))
    floor = [line for line in young if "lists only jobs waiting over 5 min" in line]
    assert floor == [
        "_The HUD lists only jobs waiting over 5 min, so 40 queued in Prometheus can show as "
        "none there._"
    ]
    some = report_lines(SURGING, view_of("the HUD", jobs=12))
    assert sum("can show as 12 there" in line for line in some) == 1
    # Everything listed, or a source that lists every job: nothing to explain.
    assert not any("lists only" in line for line in report_lines(SURGING, view_of("GitHub", 0)))
