"""How many more runners would drain a queue: the number the scale modal and diagnostics offer.

With a job duration D (minutes), each added runner finishes about T / D queued jobs within the
target time T; meanwhile the queue grows by (arrivals − completions) per minute. So the runners
that drain Q queued jobs within T are

    ceil((Q + max(arrival − completion, 0) × T) × D / T)

Without a job duration (the alert carries only the queue), the answer falls back to one runner per
queued job, which is what PyTorch's own scale-up-chron asks its autoscaler for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bot.domain.fleet import RunnerTypeMetrics
from bot.domain.units import minutes, number

DRAIN_TARGET_MINS = 30.0


@dataclass(frozen=True)
class Recommendation:
    runners: int
    why: str


def runners_to_drain(
    queued: float | None,
    *,
    job_duration_mins: float | None = None,
    arrival_per_min: float | None = None,
    completion_per_min: float | None = None,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Recommendation | None:
    """Extra runners that would drain `queued` jobs within `within_mins`; None when nothing
    queues (or nothing is known: a NaN or infinite gauge is not known)."""
    queued, job_duration_mins = finite(queued), finite(job_duration_mins)
    arrival_per_min, completion_per_min = finite(arrival_per_min), finite(completion_per_min)
    if queued is None or queued <= 0:
        return None
    if job_duration_mins is None or job_duration_mins <= 0:
        return Recommendation(
            math.ceil(queued), "one runner per queued job: the job duration is not known"
        )
    growth = 0.0
    if arrival_per_min is not None and completion_per_min is not None:
        growth = max(arrival_per_min - completion_per_min, 0.0)
    backlog = queued + growth * within_mins
    runners = max(math.ceil(backlog * job_duration_mins / within_mins), 1)
    why = (
        f"drains {number(queued)} queued jobs of ~{minutes(job_duration_mins)} "
        f"in {minutes(within_mins)}"
    )
    if growth:
        why += f" while the queue grows {growth:.1f} jobs/min"
    return Recommendation(runners, why)


@dataclass(frozen=True)
class Outlook:
    """Where one runner type's queue is heading, and the one recommendation every surface shows
    (the root, a status, diagnostics, the scale modal, the early warning).

    `growth_per_min` is the queue's net change per minute: arrivals minus completions when the
    backend knows both, else the slope the caller read (the incident's trend, the warning's
    fitted line). When the queue shrinks, it drains in Q / −growth minutes and no runner is
    advised; when it grows or holds, `runners_to_drain` says how many more runners would drain
    it within the target time (`needed`). Runners already asked for and not up yet (`booting`)
    count against that (`runners`: what to add now), and the maximum says how many fit.
    """

    queued: float
    growth_per_min: float | None
    drain_mins: float | None = None
    runners: int | None = None
    within_mins: float = DRAIN_TARGET_MINS
    needed: int | None = None  # before the booting runners are counted
    booting: int = 0
    maximum: float | None = None
    room: float | None = None  # runners that fit under the maximum, beyond those booting

    @property
    def text(self) -> str:
        """ "growing +1.2 jobs/min: +6 runners would drain it in 30 min", "draining ~2.0
        jobs/min → clear in ~7 min", "holding steady: the 10 runners booting should drain it"."""
        growth = self.growth_per_min
        if growth is not None and growth < -STEADY_PER_MIN and self.drain_mins is not None:
            return f"draining ~{-growth:.1f} jobs/min → clear in ~{_eta(self.drain_mins)}"
        if growth is None:
            head = ""
        elif growth > STEADY_PER_MIN:
            head = f"growing +{growth:.1f} jobs/min"
        else:
            head = "holding steady"
        advice = self.advice
        return f"{head}: {advice}" if head and advice else head or advice

    @property
    def advice(self) -> str:
        """The recommendation alone, in the words every surface uses; "" when none."""
        within = minutes(self.within_mins)
        if self.needed and not self.runners and self.booting:
            return f"the {_runners(self.booting)} booting should drain it in {within}"
        if not self.runners:
            return ""
        # An empty queue filling is held, not drained: growth x duration more runners.
        done = f"drain it in {within}" if self.queued > 0 else "keep it from queueing"
        text = f"+{_runners(self.runners)} would {done}"
        if self.booting:
            text += f" (beyond the {self.booting} booting)"
        if self.room is not None and self.maximum is not None and self.runners > self.room:
            most = number(self.maximum)
            if self.room <= 0:
                text += f"; none fit under the maximum of {most}: raise it"
            else:
                text += f"; only {number(self.room)} fit under the maximum of {most}"
        return text

    @property
    def clears_in(self) -> str:
        """When a draining queue should be empty ("12 min"); "" unless it drains."""
        growth = self.growth_per_min
        if growth is None or growth >= -STEADY_PER_MIN or self.drain_mins is None:
            return ""
        return _eta(self.drain_mins)


# Changes smaller than this per minute read as "steady": noise of a few jobs over an hour.
STEADY_PER_MIN = 0.05


def outlook(
    queued: float | None,
    *,
    arrival_per_min: float | None = None,
    completion_per_min: float | None = None,
    slope_per_min: float | None = None,
    job_duration_mins: float | None = None,
    within_mins: float = DRAIN_TARGET_MINS,
    booting: float = 0.0,
    maximum: float | None = None,
    running: float | None = None,
) -> Outlook | None:
    """The outlook of a queue of `queued` jobs: the one place that decides how many runners to
    recommend. None when nothing queues and nothing grows (a queue still empty but growing, as
    an early warning sees it, gets the runners that would keep it from queueing)."""
    if arrival_per_min is not None and completion_per_min is not None:
        growth: float | None = arrival_per_min - completion_per_min
    else:
        growth = slope_per_min
    if queued is None or (queued <= 0 and (growth is None or growth <= STEADY_PER_MIN)):
        return None
    if growth is not None and growth < -STEADY_PER_MIN:
        return Outlook(queued, growth, drain_mins=queued / -growth, within_mins=within_mins)
    growing = max(growth or 0.0, 0.0)
    if queued <= 0:  # an empty queue filling: what holds it is growth × duration
        needed = math.ceil(growing * job_duration_mins) if job_duration_mins else None
        if not needed:
            return None
    else:
        advice = runners_to_drain(
            queued,
            job_duration_mins=job_duration_mins,
            arrival_per_min=growing,
            completion_per_min=0.0,
            within_mins=within_mins,
        )
        needed = advice.runners if advice else None
    up = max(math.floor(booting), 0)
    room = None
    if maximum is not None and running is not None:
        room = max(maximum - running - up, 0.0)
    return Outlook(
        queued,
        growth,
        runners=max(needed - up, 0) if needed else None,
        within_mins=within_mins,
        needed=needed,
        booting=up,
        maximum=maximum,
        room=room,
    )


def metrics_outlook(
    metrics: RunnerTypeMetrics,
    *,
    slope_per_min: float | None = None,
    within_mins: float = DRAIN_TARGET_MINS,
) -> Outlook | None:
    """`outlook` of one runner type's reading: its rates and job duration, the runners the
    autoscaler asked for that are not up yet (desired beyond registered), and its maximum."""
    running = _most(metrics.registered, metrics.busy)
    desired = finite(metrics.desired)
    booting = 0.0
    if desired is not None and running is not None:
        booting = max(desired - running, 0.0)
    return outlook(
        finite(metrics.queued),
        arrival_per_min=finite(metrics.arrival_per_min),
        completion_per_min=finite(metrics.completed_per_min),
        slope_per_min=finite(slope_per_min),
        job_duration_mins=finite(metrics.job_duration_mins),
        within_mins=within_mins,
        booting=booting,
        maximum=finite(metrics.maximum),
        running=running,
    )


def finite(value: float | None) -> float | None:
    """A gauge as a number to reckon with: None for one not read, NaN or infinite (a backend's
    division by a zero rate)."""
    return value if value is not None and math.isfinite(value) else None


def _runners(count: int) -> str:
    return f"{count} runner" if count == 1 else f"{count} runners"


def _most(*values: float | None) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return max(known) if known else None


def _eta(mins: float) -> str:
    if mins < 1:
        return "under a minute"
    if mins < 90:
        return f"{math.ceil(mins)} min"
    return f"{mins / 60:.1f} h"
