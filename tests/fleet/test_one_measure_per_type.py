"""A runner type's wait is of one measure at every reading. With a jobs listing beside ARC's
metrics it is the oldest queued job's age; a reading whose listing names none of the type's queued
jobs (paged, thresholded, late, failed) knows no wait and says why, and never shows ARC's slowest
recent start in its place. (A responder once read "Longest wait 3 min", then "Slowest recent
start 1.5 min", then "Longest wait 5 min" on one type's line, and a status's change, a peak and a
chart that followed the switch.)"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from uuid import uuid4

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from bot.backends.http import BackendError
from bot.config import Settings
from bot.domain.alerting.alerts import QueueNumbers
from bot.domain.incident.incident_fleet import as_snapshot, is_drained
from bot.domain.incident.incidents import (
    DrainRule,
    Event,
    Incident,
    Snapshot,
    record_status,
    resolve_drained,
)
from bot.domain.queue_cost.jobs import Arrivals, JobsListing, QueuedJob, Trigger, jobs_view
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics, with_job_waits
from bot.domain.reading.judging import judged
from bot.fleet.readings import FleetReadings, JobsWatch
from bot.render import mrkdwn as md
from bot.render.postmortem import render_postmortem
from bot.render.replies import render_status, render_summary
from bot.render.root import render_root
from bot.storage.fleet import JobArrivals
from bot.storage.incident_store import state_json
from bot.storage.keys import Keys
from tests.support.incidents import make_incident

T0 = datetime(2026, 11, 25, 12, tzinfo=UTC)
GPU = "linux.g5.4xlarge.nvidia.gpu"
STARTS = "slowest recent start"
CREATED = T0 - timedelta(minutes=2)  # the type's oldest queued job
Answer = Literal["named", "none", "failed"]  # what GitHub's listing says at a reading
ANSWERS: tuple[Answer, ...] = ("named", "none", "failed")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def arc_reading(now: datetime) -> FleetSnapshot:
    """ARC's metrics: 10 queued, and the startup histogram's slowest recent start, 1.5 min."""
    gpu = RunnerTypeMetrics(queued=10, longest_wait_mins=1.5, wait_of_starts=True)
    return FleetSnapshot(at=now, source="prometheus", runner_types={GPU: gpu})


def listing(named: bool) -> JobsListing:
    """GitHub's listing: the type's oldest queued job, or (a later page, a job just started)
    none of its jobs."""
    job = QueuedJob(
        runner_type=GPU,
        workflow="pull",
        job="linux-test-gpu",
        repository="pytorch/pytorch",
        url="https://github.com/pytorch/pytorch/actions/runs/1/job/2",
        created_at=CREATED,
        trigger=Trigger.PULL_REQUEST,
        run_attempt=1,
        source_id="github:2",
    )
    return JobsListing(jobs=(job,) if named else ())


class ScriptedArc:
    name = "Prometheus"
    live = True

    async def read(self, *, now: datetime) -> FleetSnapshot:
        return arc_reading(now)

    async def aclose(self) -> None:
        return None


class ScriptedGithub:
    """At each reading, names the type's job, names none of its jobs, or fails."""

    name = "GitHub"

    def __init__(self, answers: Sequence[Answer]) -> None:
        self.answers = list(answers)

    async def queued_jobs(self, *, now: datetime) -> JobsListing:
        answer = self.answers.pop(0)
        if answer == "failed":
            raise BackendError("GitHub answered 502", retryable=True)
        return listing(answer == "named")

    async def aclose(self) -> None:
        return None


def stored(incident: Incident) -> Incident:
    return Incident.model_validate_json(state_json(incident))


def fields_of(blocks: list[dict]) -> list[str]:
    return [f["text"] for b in blocks for f in b.get("fields", ())]


def text_of(blocks: list[dict]) -> str:
    """Every text a reader sees in `blocks`, fields and context included."""
    parts = []
    for block in blocks:
        for item in (block.get("text"), *block.get("fields", ()), *block.get("elements", ())):
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
    return "\n".join(parts)


@dataclass
class Followed:
    """The incident as the tick records it at each reading, and what its surfaces said."""

    incident: Incident
    snapshots: list[Snapshot] = field(default_factory=list)
    views: list[FleetSnapshot] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    statuses: list[tuple[list[str], str]] = field(default_factory=list)

    def resolved(self) -> tuple[Incident, str, str]:
        """The incident resolved a minute after its last reading: its summary and postmortem."""
        end = at(len(self.snapshots) + 1)
        done = stored(resolve_drained(self.incident, now=end))
        events = [
            Event(at=T0, kind="opened", text="Alert fired"),
            Event(at=end, kind="resolved", text="Resolved: the queue drained"),
        ]
        summary = text_of(render_summary(done, events, now=end).blocks)
        return done, summary, render_postmortem(done, events, now=end)


async def follow(redis_url: str, answers: Sequence[Answer], prefix: str = "qp") -> Followed:
    """The shared reading (ARC's metrics, GitHub's listing answering `answers` in turn) read a
    minute apart; at each, the incident's view recorded and its root and status rendered."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    watch = JobsWatch(ScriptedGithub(answers), JobArrivals(redis, Keys(prefix)), timeout_s=5)
    clock = [T0]
    readings = FleetReadings(
        redis,
        Keys(prefix),
        ScriptedArc(),
        config=Settings(backend_timeout_seconds=5),
        clock=lambda: clock[0],
        jobs=watch,
    )
    # An alert that said no numbers of its own: every number is a reading's.
    incident = make_incident(
        started_at=T0, opened_at=T0, numbers=QueueNumbers(), peak=QueueNumbers(), runner_types={}
    )
    done, previous = Followed(incident), None
    try:
        for minute in range(1, len(answers) + 1):
            clock[0] = now = at(minute)
            reading, history = await readings.current()
            view = readings.incident_view(done.incident, reading, history, now)
            current = as_snapshot(done.incident, view, view.at)
            status = render_status(
                done.incident, previous=previous, current=current, now=now, view=view
            )
            done.incident = stored(record_status(done.incident, current, live=view, posted=True))
            done.roots.append(text_of(render_root(done.incident, now=now).blocks))
            done.statuses.append((fields_of(status.blocks), status.text))
            done.snapshots.append(current)
            done.views.append(view)
            previous = current
    finally:
        await readings.aclose()
        await redis.aclose()
    return done


async def test_a_reading_whose_listing_names_none_of_the_types_jobs_switches_no_surface(
    redis_url: str,
) -> None:
    """The listing names the GPU type's oldest job at readings 1 and 3 and none of its jobs at
    reading 2. Root, status, summary and postmortem say one measure, the longest wait: 3 min,
    not known at 12:02 (and why), 5 min; no slowest recent start, no change across the gap, and
    the peak is the oldest job's age at its own moment."""
    followed = await follow(redis_url, ["named", "none", "named"])
    done, summary, postmortem = followed.resolved()

    roots, statuses = followed.roots, followed.statuses
    for text in (*roots, *(t for _, t in statuses), summary, postmortem):
        assert STARTS not in text.lower(), text
    assert "longest wait *3 min*" in roots[0], roots[0]
    assert "longest wait not known: GitHub lists none of them this reading" in roots[1], roots[1]
    assert "longest wait *5 min*" in roots[2], roots[2]
    [first, gap, third] = (fields for fields, _ in statuses)
    assert "Longest wait: *3 min*" in first, first
    assert not any(f.startswith("Longest wait") for f in gap), gap
    # Nothing of the same measure at the status before: no change is made up across the gap.
    assert "Longest wait: *5 min*" in third, third
    assert f"Peak longest wait: *5 min* at {md.time_of(at(3))}" in summary, summary
    assert "- Peak longest wait: **5 min** at 2026-11-25 12:03 UTC" in postmortem, postmortem
    assert done.peaks.numbers.slowest_start_mins is None and done.peaks.start_at is None


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(ANSWERS), min_size=1, max_size=6))
def test_whatever_each_reading_lists_every_surface_says_one_measure_for_the_type(
    redis_url: str, answers: list[Answer]
) -> None:
    """Over any run of readings whose listing names the type's job, names none or fails: each
    reading's wait is the oldest job's age or not known with a reason; no root, status, summary
    or postmortem says a slowest recent start, and the record's trend and peaks hold none."""
    followed = asyncio.run(follow(redis_url, answers, prefix=f"qp{uuid4().hex}"))
    done, summary, postmortem = followed.resolved()

    for view in followed.views:
        j = view.runner_types[GPU].judged
        assert j is not None and not j.wait_of_starts
        assert (j.wait_mins is None) == bool(j.wait_unknown), j
    for text in (*followed.roots, *(t for _, t in followed.statuses), summary, postmortem):
        assert STARTS not in text.lower(), text
    snapshots = followed.snapshots
    assert all(s.numbers.slowest_start_mins is None for s in snapshots)
    assert all(not q.wait_of_starts for s in snapshots for q in s.runner_types.values())
    assert done.peaks.numbers.slowest_start_mins is None and done.peaks.start_at is None
    named = [minute for minute, a in enumerate(answers, start=1) if a == "named"]
    oldest = (at(named[-1]) - CREATED).total_seconds() / 60 if named else None
    assert done.peaks.numbers.max_queue_time_mins == oldest


def test_the_reason_names_what_the_listing_could_not_do() -> None:
    """Said where the wait would be: the listing failed, was cut short, lists only older jobs."""
    now = at(1)
    empty = jobs_view(listing(False), Arrivals(), source="GitHub", at=now)
    cut = jobs_view(JobsListing(complete=False), Arrivals(), source="GitHub", at=now)
    hud = jobs_view(JobsListing(listed_over_mins=5), Arrivals(), source="the HUD", at=now)
    said = {}
    for case, jobs, name in (
        ("failed", None, "GitHub"),
        ("cut", cut, "GitHub"),
        ("hud", hud, "the HUD"),
        ("empty", empty, "GitHub"),
    ):
        fleet = judged(with_job_waits(arc_reading(now), jobs, name), [], interval=timedelta(0))
        j = fleet.runner_types[GPU].judged
        assert j is not None and j.wait_mins is None
        said[case] = j.wait_unknown
    assert said == {
        "failed": "GitHub could not list the queued jobs this reading",
        "cut": "GitHub's listing was cut short this reading and names none of them",
        "hud": "the HUD lists none of them yet (it lists a job once it has queued 5 min)",
        "empty": "GitHub lists none of them this reading",
    }


def test_a_wait_of_the_same_measure_stands_where_the_listing_names_none() -> None:
    """The HUD's wait is an oldest job's age too: kept where GitHub's listing lags."""
    now = at(1)
    hud = RunnerTypeMetrics(queued=10, longest_wait_mins=7)
    fleet = FleetSnapshot(at=now, source="hud", runner_types={GPU: hud})
    jobs = jobs_view(listing(False), Arrivals(), source="GitHub", at=now)

    kept = with_job_waits(fleet, jobs, "GitHub").runner_types[GPU]

    assert (kept.longest_wait_mins, kept.wait_of_starts, kept.wait_unknown) == (7, None, None)


def test_a_failed_listing_leaves_a_small_queue_not_known_to_be_drained() -> None:
    """2 jobs queued, under the drain rule's count: drained only once a listing says how long
    they waited. A failed listing says nothing of it, so the queue is not known to be drained;
    a listing that names the oldest job, 2 min old, drains it."""
    small = RunnerTypeMetrics(queued=2, longest_wait_mins=40, wait_of_starts=True)
    fleet = FleetSnapshot(at=T0, source="prometheus", runner_types={GPU: small})
    rule = DrainRule(max_queued=2, max_wait_mins=5)
    failed = with_job_waits(fleet, None, "GitHub")
    assert failed.runner_types[GPU].longest_wait_mins is None
    assert not is_drained(failed, rule)
    listed = jobs_view(listing(named=True), Arrivals(), source="GitHub", at=T0)
    named = with_job_waits(fleet, listed, "GitHub")
    assert is_drained(named, rule)
