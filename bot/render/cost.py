"""What the queue cost, in the one sentence every record shares: the job-minutes past the
threshold first, then all the jobs waited, the longest wait, and the source that told it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from bot.domain.incident.incidents import Incident
from bot.domain.queue_cost.cost import Waited
from bot.domain.shortened import one_line
from bot.domain.units import minutes, number

STALE = timedelta(minutes=1)  # a cost read longer before the end says when it was read


def cost_said(waited: Waited) -> str:
    """ "412 job-minutes past 5 min: 63 jobs in 9 workflows, … · 1,240 job-minutes waited by 180
    jobs · longest 38 min (ARC's job start times)", then what the source cannot tell and why."""
    threshold = minutes(waited.threshold_mins)
    # A source that sees only the longer waits says so beside every count of them.
    seen = f" queued past {minutes(waited.seen_over_mins)}" if waited.seen_over_mins else ""
    if waited.jobs == 0:
        parts = [f"no job{seen} got a runner"]
    else:
        parts = [
            _past_said(waited, threshold),
            f"{_job_minutes(waited.minutes)} waited by {_counted(waited.jobs, 'job')}{seen}",
        ]
        if waited.longest_mins is not None:
            over = "over " if waited.longest_over else ""
            parts.append(f"longest {over}{minutes(waited.longest_mins)}")
    parts[-1] += f" ({waited.source})"
    parts += [f"{what} not known: {why}" for what, why in waited.not_known.items()]
    return " · ".join(parts)


def _past_said(waited: Waited, threshold: str) -> str:
    if waited.jobs_past == 0:
        return f"none waited past {threshold}"
    said = [_counted(waited.jobs_past, "job")]
    delayed = [(name, t) for name, t in waited.top_workflows() if t.jobs_past > 0]
    if delayed:
        said[0] += f" in {_counted(len(delayed), 'workflow')}"
        name, top = delayed[0]
        if waited.minutes_past > 0:
            said.append(f"{name} {top.minutes_past / waited.minutes_past:.0%}")
    if waited.prs is not None:
        said.append(_counted(waited.prs, "PR"))
    if waited.branches is not None:
        said.append(_counted(waited.branches, "branch", "branches"))
    return f"{_job_minutes(waited.minutes_past)} past {threshold}: {', '.join(said)}"


def _job_minutes(value: float) -> str:
    """As `minutes` rounds them, thousands grouped: "1,240 job-minutes", "2.5 job-minutes"."""
    shown = minutes(value).removesuffix(" min")
    if shown.isdigit():
        shown = f"{int(shown):,}"
    return f"{shown} job-minutes"


def _counted(count: int, one: str, many: str = "") -> str:
    noun = one if count == 1 else (many or f"{one}s")
    return f"{count:,} {noun}" if count >= 1000 else f"{number(count)} {noun}"


def cost_lines(
    incident: Incident, escaped: Callable[[str], str], at: Callable[[datetime], str]
) -> list[str]:
    """A line per runner type, escaped as its surface escapes outside text, and when it was read
    if before the incident ended."""
    if not incident.queue_cost.by_type and incident.queue_cost.unknown:
        return [escaped(f"Cost not known: {incident.queue_cost.unknown}")]
    end, read = incident.resolved.at, incident.queue_cost.at
    stale = end is not None and read is not None and end - read > STALE
    until = f" (to {at(read)})" if stale and read is not None else ""
    # One line each: a name from outside with a line break in it would forge a line.
    return [
        escaped(one_line(f"Cost on {runner_type}: {cost_said(waited)}")) + until
        for runner_type, waited in sorted(incident.queue_cost.by_type.items())
    ]
