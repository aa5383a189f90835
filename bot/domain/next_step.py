"""The next step a diagnostics report advises, read against the queue's course.

"Raise the maximum by at least 19" is wrong advice for a queue that fell by 23 since the last
status, and "+10 more" is wrong seconds after someone added 10 that are still booting. So before
any amount is advised, the queue's outlook (`bot.domain.forecast.outlook`, as the root says it)
and the latest scale-up are read: a draining queue gets when it should be clear instead of more
runners; runners added less than a boot ago count against what is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.domain.causes import Cause, Found, ScaleUp
from bot.domain.fleet import RunnerTypeMetrics
from bot.domain.forecast import DRAIN_TARGET_MINS, Outlook, runners_to_drain
from bot.domain.units import minutes


@dataclass(frozen=True)
class Course:
    """What the advice reads beside the numbers: where the queue heads, what was just added."""

    outlook: Outlook | None = None
    scale_up: ScaleUp | None = None
    now: datetime | None = None
    boot_mins: float = 5.0
    within_mins: float = DRAIN_TARGET_MINS  # the drain target, the outlook's when it has one

    @property
    def draining(self) -> str:
        """When a draining queue should be clear ("12 min"); "" while it is not draining."""
        return self.outlook.clears_in if self.outlook is not None else ""

    @property
    def booting(self) -> tuple[int, float | None] | None:
        """Runners not up yet, and how many minutes ago they were added (None: not by us): the
        more of a scale-up less than a boot ago and what the autoscaler asked for and has not
        registered (the outlook's, which the root counts too)."""
        seen = self.outlook.booting if self.outlook is not None else 0
        added: tuple[int, float | None] | None = (seen, None) if seen else None
        if self.scale_up is None or self.now is None:
            return added
        ago = (self.now - self.scale_up.at) / timedelta(minutes=1)
        if ago < self.boot_mins and self.scale_up.added >= seen:
            return (self.scale_up.added, max(ago, 0.0))
        return added


def drained_advice(name: str, course: Course) -> str:
    """The advice for a queue that drains by itself; "" while it does not."""
    clears = course.draining
    if not clears:
        return ""
    return f"no more runners: the {name} queue is draining and should be clear in ~{clears}"


def more_runners(name: str, needed: int, why: str, course: Course, *, verb: str) -> str:
    """`verb` (e.g. "scale x by") `needed` runners, less those still booting; "" when draining."""
    drained = drained_advice(name, course)
    if drained:
        return drained
    booting = course.booting
    if booting is None:
        return f"{verb} +{needed} ({why})" if why else f"{verb} {needed}"
    added, ago = booting
    just = (
        f"the {added} runners asked for are still booting"
        if ago is None
        else f"the +{added} added {_ago(ago)} are still booting"
    )
    if added >= needed:
        return f"wait: {just} and cover the ~{needed} needed ({why})" if why else f"wait: {just}"
    return f"{verb} +{needed - added} beyond them: {just}" + (f" ({why})" if why else "")


def named_advice(found: Found, name: str, metrics: RunnerTypeMetrics, course: Course) -> str:
    """A named cause's own next step; for a surge that already drains, that it drains first (the
    workflow may still be worth deferring: it said so before)."""
    if found.cause is Cause.SURGE:
        drained = drained_advice(name, course)
        if drained:
            return f"{drained}; {found.advice}"
    return found.advice


def drain_amount(metrics: RunnerTypeMetrics, course: Course) -> tuple[int, str] | None:
    """The runners that would drain the queue within the target time (before those booting
    are counted), and why: the outlook's, as the root and the scale modal say it, else from the
    reading alone."""
    ahead = course.outlook
    if ahead is not None and ahead.needed:
        return ahead.needed, f"would drain it in {minutes(ahead.within_mins)}"
    advice = runners_to_drain(
        metrics.queued,
        job_duration_mins=metrics.job_duration_mins,
        arrival_per_min=metrics.arrival_per_min,
        completion_per_min=metrics.completed_per_min,
        within_mins=course.within_mins,
    )
    return (advice.runners, advice.why) if advice else None


def _ago(mins: float) -> str:
    return "under a minute ago" if mins < 1 else f"{mins:.0f} min ago"
