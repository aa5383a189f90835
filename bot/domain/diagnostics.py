"""The runbook's questions, answered from a fleet snapshot: pure functions, table-tested.

For the runner types that queue worst, five checks, each ✅ / ⚠️ / ❌ with its numbers, or ❔
with what it would need: runner utilization, job arrival rate against its baseline, job duration
against its baseline, resource constraints (at maximum capacity, runners offline, scale-up
errors), and the autoscaling configuration against demand. Then the likely cause among the
runbook's five (increased workload, resource constraints, long-running jobs, autoscaling
configuration, infrastructure problems), how sure, why, and what to do next.

A sixth check looks for what the cause is in a CI engineer's words (`bot.domain.causes`: a
stalled listener, runners that do not register, a failing scale-up, the organisation's limit, one
workflow's surge). When it finds one, that is the likely cause, with its evidence and its own next
step: "raise the maximum" is the wrong advice for a listener that takes no jobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from bot.domain.causes import FAMILY, Cause, Evidence, Found, refined
from bot.domain.fleet import FleetSnapshot, RunnerTypeMetrics
from bot.domain.forecast import runners_to_drain
from bot.domain.units import number

__all__ = ["Cause", "Check", "Diagnosis", "Evidence", "Finding", "Verdict", "diagnose"]

FOCUS = 3  # runner types diagnosed: the worst queues
BUSY = 0.9  # a fleet this busy cannot absorb a queue
SURGE, STRONG_SURGE = 1.5, 3.0  # arrivals against their baseline
SLOW, VERY_SLOW = 1.3, 2.0  # job duration against its baseline
LIVE_BACKENDS = "METRICS_BACKEND=prometheus, github or hud"


class Verdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    BAD = "bad"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Check:
    name: str
    verdict: Verdict
    text: str  # plain text with the numbers, or what the check would need


@dataclass(frozen=True)
class Finding:
    """One runner type's checks and the signals they give each cause (0: none, 1: strong)."""

    runner_type: str
    checks: tuple[Check, ...]
    signals: dict[Cause, float]
    found: tuple[Found, ...] = ()  # causes named with their evidence (`bot.domain.causes`)


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...]
    cause: Cause | None
    confidence: str  # high, medium, low
    why: str
    recommendation: str

    @property
    def headline(self) -> str:
        """The conclusion in one line of plain text, as the incident's root shows it."""
        cause = f"{self.cause.value} ({self.confidence} confidence)" if self.cause else None
        why = " ".join(self.why.split())
        if cause is None:
            return f"not determined ({why})" if why else "not determined"
        return f"{cause}: {why}" if why else cause


def diagnose(snapshot: FleetSnapshot, evidence: Evidence | None = None) -> Diagnosis:
    """Check the worst-queueing runner types and name the likely cause and the next action."""
    evidence = evidence or Evidence()
    types = snapshot.runner_types
    focus = _worst(types)[:FOCUS]
    findings = tuple(_finding(name, types[name], evidence, types, snapshot) for name in focus)
    if not findings:
        return Diagnosis((), None, "low", "no runner type is queueing in the numbers at hand", "")
    named = [(f, found) for f in findings for found in f.found]
    if named:
        finding, found = min(named, key=lambda pair: PRIORITY.index(pair[1].cause))
        why = f"{finding.runner_type}: {found.evidence}"
        if found.cause in FAMILY:
            why += f" (a case of {FAMILY[found.cause].value.lower()})"
        return Diagnosis(findings, found.cause, "high", why, found.advice)
    cause, confidence, why = _likely_cause(findings)
    worst = types[focus[0]]
    return Diagnosis(findings, cause, confidence, why, _recommend(findings[0], worst, cause))


# When several causes are named, the one whose fix comes first: a stalled listener or a failing
# scale-up makes any other advice useless until it is fixed.
PRIORITY = (
    Cause.LISTENER_STALLED,
    Cause.SCALE_UP_FAILING,
    Cause.ORG_LIMIT,
    Cause.NOT_REGISTERING,
    Cause.SURGE,
    Cause.LONG_JOBS,
)


def _worst(types: dict[str, RunnerTypeMetrics]) -> list[str]:
    def key(name: str) -> tuple[float, float, str]:
        m = types[name]
        return (-(m.longest_wait_mins or 0), -(m.queued or 0), name)

    return sorted(types, key=key)


def _finding(
    name: str,
    m: RunnerTypeMetrics,
    evidence: Evidence,
    types: dict[str, RunnerTypeMetrics],
    snapshot: FleetSnapshot,
) -> Finding:
    found, missing = refined(name, m, evidence, types, now=snapshot.at)
    checks = (
        utilization(m),
        arrivals(m),
        duration(m),
        constraints(m),
        autoscaling(m),
        known_causes(found, missing),
    )
    return Finding(name, checks, _signals(m), tuple(found))


def known_causes(found: list[Found], missing: list[str]) -> Check:
    """The sixth check: what the causes module named, or what would tell."""
    name = "Known causes"
    if found:
        return Check(name, Verdict.BAD, "; ".join(f"{f.cause.value}: {f.evidence}" for f in found))
    if missing:
        return Check(name, Verdict.UNKNOWN, "none found; " + "; ".join(missing))
    return Check(
        name, Verdict.OK, "no stalled listener, unregistered runners, failing scale-up or surge"
    )


# --- the five checks ------------------------------------------------------------------------


def utilization(m: RunnerTypeMetrics) -> Check:
    name = "Runner utilization"
    if m.registered is None or m.busy is None:
        return Check(name, Verdict.UNKNOWN, f"needs runners registered and busy ({LIVE_BACKENDS})")
    if m.registered == 0:
        return Check(name, Verdict.BAD, "no runner registered at all")
    share = m.busy / m.registered
    numbers = f"{number(m.busy)}/{number(m.registered)} busy ({share:.0%})"
    idle = m.idle if m.idle is not None else m.registered - m.busy
    if idle > 0 and (m.queued or 0) > 0 and share < BUSY:
        return Check(name, Verdict.WARN, f"{numbers}: {number(idle)} idle while jobs wait")
    if share >= BUSY:
        return Check(name, Verdict.BAD, f"{numbers}: no spare runner to take the queue")
    return Check(name, Verdict.OK, numbers)


def arrivals(m: RunnerTypeMetrics) -> Check:
    name = "Job arrival rate"
    if m.arrival_per_min is None or not m.arrival_baseline_per_min:
        return Check(
            name, Verdict.UNKNOWN, f"needs job arrivals and their baseline ({LIVE_BACKENDS})"
        )
    ratio = m.arrival_per_min / m.arrival_baseline_per_min
    text = (
        f"{m.arrival_per_min:.1f} jobs/min against {m.arrival_baseline_per_min:.1f} usually "
        f"({ratio:.1f}×)"
    )
    return Check(name, _level(ratio, SURGE, STRONG_SURGE), text)


def duration(m: RunnerTypeMetrics) -> Check:
    name = "Job duration"
    if m.job_duration_mins is None or not m.duration_baseline_mins:
        return Check(
            name, Verdict.UNKNOWN, f"needs job durations and their baseline ({LIVE_BACKENDS})"
        )
    ratio = m.job_duration_mins / m.duration_baseline_mins
    text = (
        f"{m.job_duration_mins:.0f} min per job against {m.duration_baseline_mins:.0f} usually "
        f"({ratio:.1f}×)"
    )
    return Check(name, _level(ratio, SLOW, VERY_SLOW), text)


def constraints(m: RunnerTypeMetrics) -> Check:
    name = "Resource constraints"
    problems, bad = [], False
    running = m.registered if m.registered is not None else m.desired
    if m.maximum is not None and running is not None and running >= m.maximum:
        problems.append(f"at its maximum ({number(running)}/{number(m.maximum)})")
        bad = True
    if m.scale_errors:
        problems.append(f"{number(m.scale_errors)} scale-up errors")
        bad = True
    if m.offline:
        problems.append(f"{number(m.offline)} runners offline")
    known = m.maximum is not None or m.scale_errors is not None or m.offline is not None
    if not known:
        return Check(
            name,
            Verdict.UNKNOWN,
            f"needs capacity limits, offline runners, scale-up errors ({LIVE_BACKENDS})",
        )
    if not problems:
        return Check(name, Verdict.OK, "below the maximum, no runner offline, no scale-up error")
    return Check(name, Verdict.BAD if bad else Verdict.WARN, "; ".join(problems))


def autoscaling(m: RunnerTypeMetrics) -> Check:
    name = "Autoscaling configuration"
    running = m.busy if m.busy is not None else m.registered
    if m.maximum is None or running is None or m.queued is None:
        return Check(
            name,
            Verdict.UNKNOWN,
            f"needs the maximum, runners in use and the queue ({LIVE_BACKENDS})",
        )
    demand = running + m.queued
    if demand > m.maximum:
        short = math.ceil(demand - m.maximum)
        text = f"demand {number(demand)} runners > maximum {number(m.maximum)}: {short} short"
        return Check(name, Verdict.BAD, text)
    if m.desired is not None and m.desired < demand:
        text = (
            f"the autoscaler targets {number(m.desired)} while demand is {number(demand)}: lagging"
        )
        return Check(name, Verdict.WARN, text)
    return Check(name, Verdict.OK, f"demand {number(demand)} fits the maximum {number(m.maximum)}")


# --- the likely cause and what to do ---------------------------------------------------------


def _signals(m: RunnerTypeMetrics) -> dict[Cause, float]:
    signals: dict[Cause, float] = {}
    if m.arrival_per_min is not None and m.arrival_baseline_per_min:
        ratio = m.arrival_per_min / m.arrival_baseline_per_min
        signals[Cause.WORKLOAD] = min(max((ratio - 1) / (STRONG_SURGE - 1), 0), 1)
    if m.job_duration_mins is not None and m.duration_baseline_mins:
        ratio = m.job_duration_mins / m.duration_baseline_mins
        signals[Cause.LONG_JOBS] = min(max((ratio - 1) / (VERY_SLOW - 1), 0), 1)
    if m.scale_errors or (
        m.offline and m.registered and m.offline / (m.registered + m.offline) > 0.1
    ):
        signals[Cause.CONSTRAINTS] = 1.0 if m.scale_errors else 0.6
    check = autoscaling(m)
    if check.verdict is Verdict.BAD:
        signals[Cause.AUTOSCALING] = 0.9
    elif check.verdict is Verdict.WARN:
        signals[Cause.AUTOSCALING] = 0.5
    if utilization(m).verdict is Verdict.WARN:
        signals[Cause.INFRASTRUCTURE] = 0.8  # idle runners that do not take queued jobs
    return signals


def _likely_cause(findings: tuple[Finding, ...]) -> tuple[Cause | None, str, str]:
    totals: dict[Cause, float] = {}
    for finding in findings:
        for cause, strength in finding.signals.items():
            totals[cause] = max(totals.get(cause, 0), strength)
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    if not ranked or ranked[0][1] < 0.2:
        known = sum(c.verdict is not Verdict.UNKNOWN for f in findings for c in f.checks)
        if known == 0:
            return (
                None,
                "low",
                (
                    "the alert carries only the queue; runner counts and job rates would tell "
                    f"workload from limits ({LIVE_BACKENDS})"
                ),
            )
        return None, "low", "no check points at a cause: the queue may be draining already"
    cause, strength = ranked[0]
    runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
    confidence = "high" if strength >= 0.8 and runner_up < 0.5 else "medium"
    if strength < 0.5:
        confidence = "low"
    checks = [c for f in findings for c in f.checks if c.verdict in (Verdict.BAD, Verdict.WARN)]
    why = "; ".join(f"{c.name.lower()}: {c.text}" for c in checks[:3])
    return cause, confidence, why


def _recommend(worst: Finding, metrics: RunnerTypeMetrics, cause: Cause | None) -> str:
    name = worst.runner_type or "the queueing runner type"
    auto = autoscaling(metrics)
    if cause is Cause.AUTOSCALING and auto.verdict is Verdict.BAD:
        short = auto.text.rsplit(": ", 1)[-1].split()[0]
        return f"raise the maximum of {name} by at least {short} (for ARC, maxRunners)"
    if cause is Cause.INFRASTRUCTURE:
        return f"look at why idle {name} runners take no jobs (labels, registration, the node)"
    if cause is Cause.CONSTRAINTS:
        return f"fix what stops {name} from scaling (scale-up errors, offline runners) first"
    amount = recommended_runners(metrics)
    if not amount:
        return ""
    if cause is Cause.LONG_JOBS:
        return f"find the slow jobs of {name}; meanwhile scaling by {amount} buys time"
    return f"scale {name} by {amount}"


def recommended_runners(metrics: RunnerTypeMetrics) -> str:
    """The scale amount a report suggests for one runner type, with why."""
    advice = runners_to_drain(
        metrics.queued,
        job_duration_mins=metrics.job_duration_mins,
        arrival_per_min=metrics.arrival_per_min,
        completion_per_min=metrics.completed_per_min,
    )
    return f"+{advice.runners} ({advice.why})" if advice else ""


def _level(ratio: float, warn: float, bad: float) -> Verdict:
    return Verdict.BAD if ratio >= bad else Verdict.WARN if ratio >= warn else Verdict.OK
