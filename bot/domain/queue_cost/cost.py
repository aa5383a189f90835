"""What the queue cost the people waiting: of one runner type's jobs that got a runner within a
window, the job-minutes waited, past the alert's threshold, the longest, and by which workflows,
pull requests and branches; each source says what it cannot tell."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.domain import units
from bot.domain.alerting.alerts import time_of
from bot.domain.queue_cost.jobs import runner_type_of, workflow_of
from bot.domain.shortened import one_line

GITHUB = "GitHub's job times"
ARC = "ARC's job start times"
HUD = "the HUD's queued jobs, followed"
NO_WORKFLOW = ""  # the workflow of jobs whose source names none
# The states of a job a runner took, in GitHub's REST shape.
PICKED_UP = frozenset({"in_progress", "completed"})
NO_PRS_GITHUB = "GitHub's jobs do not say which pull request ran them"
NO_WORKFLOW_ARC = (
    "ARC's startup histogram carries no job_workflow_ref or job_workflow_name: add one to the "
    "scale set's spec.listenerMetrics"
)
NO_REF_ARC = "ARC's startup histogram carries no job_workflow_ref"
# Gone from the HUD's list in a longer gap of its readings, a job's start is not guessed at.
FOLLOW_GAP = timedelta(minutes=15)
# GitHub ends a job no self-hosted runner took within a day: one gone from the list later got none
# (a run the HUD still lists as queued after GitHub abandoned it leaves it at a week).
QUEUE_LIMIT = timedelta(days=1)
CIFLOW = "ciflow/"  # PyTorch's tag for more CI on a PR: `ciflow/<name>/<PR number>`
# The HUD takes a job with such a label for ARC's: listed until its containers have started, at
# most 10 minutes after it was created.
ARC_LABEL = "l-"
_PULL = re.compile(r"@refs/pull/([0-9]+)/")
_BRANCH = "@refs/heads/"

Series = Iterable[tuple[Mapping[str, str], float]]  # Prometheus's instant vector
Key = tuple[str, str]  # a series' (job_workflow_ref, job_workflow_name)


@dataclass(frozen=True)
class Tally:
    """Jobs and the job-minutes they waited; of them, those past the threshold and the minutes
    beyond it (a job that waited 7 min past a 5-min threshold counts 2)."""

    jobs: int = 0
    minutes: float = 0.0
    jobs_past: int = 0
    minutes_past: float = 0.0

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.jobs + other.jobs,
            self.minutes + other.minutes,
            self.jobs_past + other.jobs_past,
            self.minutes_past + other.minutes_past,
        )


@dataclass(frozen=True, kw_only=True)
class Waited(Tally):
    """What the jobs of one runner type that started in a window waited, as `source` tells it."""

    source: str
    threshold_mins: float
    longest_mins: float | None = None
    longest_over: bool = False  # the longest is only a bound ("over 60 min": the last bucket)
    workflows: Mapping[str, Tally] = field(default_factory=dict)  # `NO_WORKFLOW`: none named
    # Distinct among the jobs past the threshold; None where `not_known` says why.
    prs: int | None = None
    branches: int | None = None
    not_known: Mapping[str, str] = field(default_factory=dict)  # what -> why
    unreadable: int = 0
    seen_over_mins: float = 0.0  # the source sees only jobs that waited longer (the HUD's list)

    def top_workflows(self) -> list[tuple[str, Tally]]:
        """The named workflows, most job-minutes past the threshold first, then waited."""
        named = [(name, tally) for name, tally in self.workflows.items() if name != NO_WORKFLOW]
        return sorted(named, key=lambda item: (-item[1].minutes_past, -item[1].minutes, item[0]))


def waited_of_jobs(
    jobs: Iterable[Any], runner_type: str, since: datetime, until: datetime, threshold_mins: float
) -> Waited:
    """From jobs in GitHub's REST shape: each one a runner picked up waited from its creation."""
    waits: list[tuple[str, float]] = []  # (workflow, minutes)
    branches: set[str] = set()
    unreadable = 0
    for job in jobs:
        if not isinstance(job, dict):
            unreadable += 1
            continue
        if runner_type_of(job) != runner_type or job.get("status") not in PICKED_UP:
            continue
        if not job.get("runner_id"):
            continue
        started, created = time_of(job.get("started_at")), time_of(job.get("created_at"))
        if started is None or created is None or started < created:
            unreadable += 1
            continue
        if not since <= started <= until:
            continue
        waited = (started - created).total_seconds() / 60
        waits.append((one_line(job.get("workflow_name"), 200), waited))
        if waited > threshold_mins and (branch := one_line(job.get("head_branch"), 200)):
            branches.add(branch)
    return Waited(
        source=GITHUB,
        threshold_mins=threshold_mins,
        **_of_waits(waits, threshold_mins),
        branches=len(branches),
        not_known={"pull requests": NO_PRS_GITHUB},
        unreadable=unreadable,
    )


@dataclass(frozen=True)
class LeftJob:
    """A job the HUD listed as queued and then no longer: a runner took it (or it was cancelled)
    between the last listing that had it and the first that did not."""

    runner_type: str
    workflow: str
    branch: str
    pull_request: bool
    created_at: datetime
    last_listed: datetime
    gone_by: datetime

    @property
    def started_at(self) -> datetime:
        """The middle of the gap it left in: within half the gap of the truth."""
        return self.last_listed + (self.gone_by - self.last_listed) / 2


def waited_of_left(
    left: Iterable[LeftJob],
    runner_type: str,
    since: datetime,
    until: datetime,
    threshold_mins: float,
    listed_over_mins: float,
) -> Waited:
    """From the jobs of `runner_type` that left the HUD's list within [since, until], each started
    at the middle of the readings' gap it left in. The HUD lists a job only once it has queued
    `listed_over_mins`: shorter waits are not seen. A `ciflow/…/<n>` tag counts as PR n."""
    waits: list[tuple[str, float]] = []
    prs: set[str] = set()
    branches: set[str] = set()
    unreadable = 0
    for job in left:
        if job.runner_type != runner_type or not since <= job.started_at <= until:
            continue
        if job.gone_by - job.created_at >= QUEUE_LIMIT:
            continue
        if not job.created_at <= job.last_listed <= job.gone_by <= job.last_listed + FOLLOW_GAP:
            unreadable += 1
            continue
        waited = (job.started_at - job.created_at).total_seconds() / 60
        waits.append((job.workflow, waited))
        if waited <= threshold_mins or not job.branch:
            continue
        if job.branch.startswith(CIFLOW):
            prs.add("#" + job.branch.rpartition("/")[2])
        else:
            (prs if job.pull_request else branches).add(job.branch)
    not_known: dict[str, str] = {}
    if threshold_mins < listed_over_mins:
        over = units.minutes(listed_over_mins)
        between = f"jobs that waited {units.number(threshold_mins)}–{over}"
        not_known[between] = f"the HUD lists a job only once it has queued {over}"
    if unreadable:
        gap = units.minutes(FOLLOW_GAP.total_seconds() / 60)
        not_known[f"the waits of {units.plural(unreadable, 'job')}"] = (
            f"they left the HUD's list while it went unread over {gap}"
        )
    if ARC_LABEL in runner_type:
        not_known["when a runner took each job"] = (
            "the HUD lists an ARC job until its containers start, up to 10 min after it queued: "
            "its wait counts them"
        )
    return Waited(
        source=HUD,
        threshold_mins=threshold_mins,
        **_of_waits(waits, threshold_mins),
        prs=len(prs),
        branches=len(branches),
        not_known=not_known,
        unreadable=unreadable,
        seen_over_mins=listed_over_mins,
    )


_PER_INCIDENT = frozenset({"pull requests", "branches", "pull requests and branches"})


def summed(costs: Sequence[Waited]) -> Waited | None:
    """Several incidents' costs of one runner type as one: one incident's as it is; of more, the
    totals and workflows added, the longest the longest, pull requests and branches not summed
    (two incidents may share one)."""
    if len(costs) <= 1:
        return costs[0] if costs else None
    names = {name for cost in costs for name in cost.workflows}
    workflows = {
        n: sum((c.workflows[n] for c in costs if n in c.workflows), Tally()) for n in names
    }
    tops = [(c.longest_mins, c.longest_over) for c in costs if c.longest_mins is not None]
    longest, over = max(tops, default=(None, False))
    shared = "counted per incident, and incidents may share one"
    return Waited(
        source=" and ".join(dict.fromkeys(c.source for c in costs)),
        threshold_mins=costs[-1].threshold_mins,
        **vars(sum(costs, Tally())),
        longest_mins=longest,
        longest_over=over,
        workflows=workflows,
        not_known={
            **{k: v for c in costs for k, v in c.not_known.items() if k not in _PER_INCIDENT},
            "pull requests and branches": shared,
        },
        unreadable=sum(c.unreadable for c in costs),
        seen_over_mins=max(c.seen_over_mins for c in costs),
    )


def _of_waits(waits: Sequence[tuple[str, float]], threshold_mins: float) -> dict[str, Any]:
    tallies: dict[str, Tally] = {}
    for workflow, minutes in waits:
        past = max(minutes - threshold_mins, 0.0)
        waited = Tally(1, minutes, int(minutes > threshold_mins), past)
        tallies[workflow] = tallies.get(workflow, Tally()) + waited
    return {
        **vars(sum(tallies.values(), Tally())),
        "longest_mins": max((m for _, m in waits), default=None),
        "workflows": tallies,
    }


def waited_of_buckets(
    buckets: Series, sums: Series, counts: Series, threshold_mins: float
) -> Waited:
    """From the window's increase of ARC's `gha_job_startup_duration_seconds` for one runner type:
    jobs and job-minutes exact (`_count`, `_sum`), the rest estimated from the buckets (`le` in
    seconds)."""
    threshold_s = max(threshold_mins, 0.0) * 60
    cumulative, totals, unreadable = _series_of(buckets, sums, counts)
    tallies: dict[str, list[float]] = {}  # workflow -> [jobs, seconds, jobs past, seconds past]
    tops: list[tuple[float, bool]] = []  # each series' highest bucket: (bound, the top one)
    affected: dict[str, float] = {}  # ref -> its jobs estimated past the threshold
    for key, (jobs, seconds) in totals.items():
        within = _within(cumulative.get(key, {}))
        past, beyond = _past(within, threshold_s)
        affected[key[0]] = affected.get(key[0], 0.0) + min(past, jobs)
        # The buckets' estimate never exceeds what `_count` and `_sum` say exactly.
        kept = tallies.setdefault(_workflow(key), [0.0, 0.0, 0.0, 0.0])
        for i, value in enumerate((jobs, seconds, min(past, jobs), min(beyond, seconds))):
            kept[i] += value
        if jobs > 0 and (top := _highest(within)) is not None:
            tops.append(top)
    workflows = {
        name: Tally(round(jobs), seconds / 60, round(past), beyond / 60)
        for name, (jobs, seconds, past, beyond) in tallies.items()
        if jobs > 0 or seconds > 0
    }
    keys = [key for key, (jobs, _) in totals.items() if jobs > 0]
    refs = [ref for ref, _ in keys if affected.get(ref, 0.0) >= 0.5]
    prs = {pull[1] for ref in refs if (pull := _PULL.search(ref))}
    branches = {branch for ref in refs if (branch := ref.partition(_BRANCH)[2])}
    not_known: dict[str, str] = {}
    if keys and not any(_workflow(key) for key in keys):
        not_known["workflows"] = NO_WORKFLOW_ARC
    if not all(ref for ref, _ in keys):
        not_known |= {"pull requests": NO_REF_ARC, "branches": NO_REF_ARC}
    jobs, seconds, past, beyond = map(sum, zip([0.0] * 4, *tallies.values(), strict=True))
    longest, over = max(tops, default=(None, False))
    return Waited(
        source=ARC,
        threshold_mins=threshold_mins,
        jobs=round(jobs),
        minutes=seconds / 60,
        jobs_past=min(round(past), round(jobs)),
        minutes_past=beyond / 60,
        longest_mins=longest / 60 if longest is not None else None,
        longest_over=over,
        workflows=workflows,
        prs=None if "pull requests" in not_known else len(prs),
        branches=None if "branches" in not_known else len(branches),
        not_known=not_known,
        unreadable=unreadable,
    )


def _series_of(
    buckets: Series, sums: Series, counts: Series
) -> tuple[dict[Key, dict[float, float]], dict[Key, list[float]], int]:
    """Per workflow label: its cumulative buckets by bound, its [jobs, seconds]; and how many
    series were no count (NaN, negative, a bound that is no number)."""
    unreadable = 0
    cumulative: dict[Key, dict[float, float]] = {}
    for labels, value in buckets:
        bound = bucket_bound(labels.get("le", ""))
        if bound is None or not _is_count(value):
            unreadable += 1
            continue
        # Two scale sets of one runner type: their buckets add up.
        kept = cumulative.setdefault(_key(labels), {})
        kept[bound] = kept.get(bound, 0.0) + value
    totals: dict[Key, list[float]] = {}
    for index, series in ((0, counts), (1, sums)):
        for labels, value in series:
            if not _is_count(value):
                unreadable += 1
                continue
            totals.setdefault(_key(labels), [0.0, 0.0])[index] += value
    return cumulative, totals, unreadable


def _key(labels: Mapping[str, str]) -> Key:
    return labels.get("job_workflow_ref", ""), labels.get("job_workflow_name", "")


def _workflow(key: Key) -> str:
    return workflow_of({"job_workflow_ref": key[0], "job_workflow_name": key[1]})


def _is_count(value: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value >= 0


def bucket_bound(le: str) -> float | None:
    """A bucket's upper bound in seconds; "+Inf" the top one."""
    if le == "+Inf":
        return math.inf
    try:
        bound = float(le)
    except ValueError:
        return None
    return bound if math.isfinite(bound) and bound >= 0 else None


def _within(cumulative: Mapping[float, float]) -> list[tuple[float, float, float]]:
    """Cumulative buckets as (lower, upper, jobs within). A bucket that reads less than the one
    below it (a scrape mid-update) reads as that one, as `histogram_quantile` takes it."""
    found, lower, below = [], 0.0, 0.0
    for upper in sorted(cumulative):
        count = max(cumulative[upper], below)
        found.append((lower, upper, count - below))
        lower, below = upper, count
    return found


def _past(within: list[tuple[float, float, float]], threshold_s: float) -> tuple[float, float]:
    """Estimated jobs past the threshold and their seconds beyond it, the jobs of a bucket spread
    evenly across it, as `histogram_quantile` interpolates. The top bucket has no upper bound:
    its jobs are taken at its lower bound, so past a threshold above it they count as none."""
    jobs = seconds = 0.0
    for lower, upper, count in within:
        if count <= 0:
            continue
        if math.isinf(upper):
            if lower >= threshold_s:
                jobs, seconds = jobs + count, seconds + count * (lower - threshold_s)
            continue
        start = max(lower, threshold_s)
        if upper <= start:
            continue
        share = count * (upper - start) / (upper - lower) if upper > lower else count
        jobs += share
        seconds += share * ((start + upper) / 2 - threshold_s)
    return jobs, seconds


def _highest(within: list[tuple[float, float, float]]) -> tuple[float, bool] | None:
    """The upper bound of the highest bucket any job fell in; the top one: (its lower, True)."""
    for lower, upper, count in reversed(within):
        if count > 0:
            return (lower, True) if math.isinf(upper) else (upper, False)
    return None


def counted_cost(
    counted: Mapping[str, tuple[float, int]], cost: Mapping[str, Waited]
) -> tuple[dict[str, tuple[float, int]], dict[str, tuple[float, int]]]:
    """The high-water marks of what an incident's cost counted (job-seconds waited, jobs past the
    threshold), and what `cost` adds past them: a re-read that counts fewer (Prometheus' increase
    moves a little between reads) adds nothing, and the rise back is not counted twice."""
    marks, added = dict(counted), {}
    for runner_type, waited in cost.items():
        seconds, delayed = marks.get(runner_type, (0.0, 0))
        now = (max(seconds, waited.minutes * 60), max(delayed, waited.jobs_past))
        added[runner_type] = (now[0] - seconds, now[1] - delayed)
        marks[runner_type] = now
    return marks, added
