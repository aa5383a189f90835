"""The runbook's questions answered from a fleet snapshot: for the worst queues, its five checks
beside the causes `causes` names, then the likely cause, how sure, the line it rests on and the
next step. A named cause wins, else the runbook's cause its checks point at hardest."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from bot.domain.reading.causes import (
    CASE_OF,
    FIRST,
    SURGE,
    Cause,
    Evidence,
    Facts,
    Found,
    arrival_ratio,
    refined,
)
from bot.domain.reading.fleet import FleetSnapshot, RunnerTypeMetrics, source_name, worst_first
from bot.domain.reading.judgement import Direction, Judgement
from bot.domain.units import minutes, number, plural

FOCUS = 3  # runner types diagnosed: the worst queues
BUSY = 0.9  # a fleet this busy cannot absorb a queue
STRONG_SURGE = 3.0  # arrivals against their baseline; SURGE, a surge at all
SLOW, VERY_SLOW = 1.3, 2.0  # job duration against its baseline
LIVE_BACKENDS = "METRICS_BACKEND=prometheus, github or hud"
EVIDENCE_LINES = 8  # a responder reads the cause, the next step and this many lines at most

UTILIZATION, ARRIVALS, DURATION = "Runner utilization", "Job arrival rate", "Job duration"
CONSTRAINTS, AUTOSCALING = "Resource constraints", "Autoscaling configuration"
KNOWN = "Known causes"
RUNNER_PODS = "Runner pods"  # what of the pods' sources is not scraped, said apart
CANNOT_TELL = "Not in these numbers"
AT_MAXIMUM = "at its maximum"
# ✅ lines worth a responder's reading: they rule out a cause someone would suspect.
RULES_OUT = frozenset({ARRIVALS, DURATION, CONSTRAINTS, KNOWN})
MERGED = (Cause.SURGE, Cause.LONG_JOBS)  # said in the arrival and duration checks' place


class Verdict(StrEnum):  # in the order the report lists them
    BAD = "bad"
    WARN = "warn"
    OK = "ok"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Check:
    name: str
    verdict: Verdict
    text: str  # the numbers, or what the check would need
    # How hard it points at its runbook cause (0: not at all, 1: hard); not part of what is said.
    signal: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class Finding:
    """One runner type's checks and how hard they point at each of the runbook's causes."""

    runner_type: str
    checks: tuple[Check, ...]
    signals: dict[Cause, float]
    found: tuple[Found, ...] = ()
    judged: Judgement | None = None

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...]
    cause: Cause | None
    confidence: str  # high, medium, low
    why: str
    recommendation: str
    lead_type: str = ""  # the type and check the cause rests on
    lead: Check | None = None
    source: str = "alert"

    @property
    def headline(self) -> str:
        why = " ".join(self.why.split())
        if self.cause is None:
            return f"not determined ({why})" if why else "not determined"
        cause = f"{self.cause.value} ({self.confidence} confidence)"
        return f"{cause}: {why}" if why else cause

    @property
    def evidence(self) -> list[tuple[str, Check]]:
        """The lead check, ❌, ⚠️, the ✅ that rule a cause out, then what cannot be told; the
        same words of several types in one line."""
        said: list[tuple[str, Check]] = []
        for f in self.findings:
            said += [
                (f.runner_type, c)
                for c in f.checks
                if c.verdict in (Verdict.BAD, Verdict.WARN)
                or (c.verdict is Verdict.OK and c.name in RULES_OUT)
            ]
            said += [(f.runner_type, c) for c in _unknown(f.checks, self.source)]
        lead = (self.lead_type, self.lead)
        said.sort(key=lambda pair: (pair != lead, list(Verdict).index(pair[1].verdict)))
        kept: dict[Check, str] = {}
        for name, check in said:
            kept[check] = f"{kept[check]}, {name}" if check in kept else name
        return [(name, check) for check, name in kept.items()][:EVIDENCE_LINES]


def _unknown(checks: tuple[Check, ...], source: str) -> list[Check]:
    """A type's checks that cannot tell, as one line: what each needs, and from where."""
    apart = (KNOWN, RUNNER_PODS)
    unknown = [c for c in checks if c.verdict is Verdict.UNKNOWN and c.name not in apart]
    known = [c for c in checks if c.verdict is Verdict.UNKNOWN and c.name in apart]
    if not unknown:
        return known
    needs = "; ".join(f"{c.name.lower()} {c.text}" for c in unknown)
    where = LIVE_BACKENDS if source == "alert" else f"not read by {source_name(source)}"
    return [Check(CANNOT_TELL, Verdict.UNKNOWN, f"{needs} ({where})"), *known]


def diagnose(snapshot: FleetSnapshot, evidence: Evidence | None = None) -> Diagnosis:
    source, focus = snapshot.source, worst_first(snapshot.runner_types)[:FOCUS]
    findings = tuple(_finding(name, evidence or Evidence(), snapshot) for name, _ in focus)
    if not findings:
        return Diagnosis((), None, "low", "no runner type is queueing in the numbers at hand", "")
    named = [(f, found) for f in findings for found in f.found]
    if not named:
        return _likeliest(findings, source)
    finding, found = min(named, key=lambda pair: FIRST.index(pair[1].cause))
    cause, name, judged, advice = found.cause, finding.runner_type, finding.judged, found.advice
    case = f" (a case of {CASE_OF[cause].value.lower()})" if cause in CASE_OF else ""
    if cause in MERGED and judged is not None and judged.advice:
        # The fix that scaling only buys time for, beside the runners advised; a surge whose
        # queue already falls clears by itself first.
        said = _advice(name, judged)
        if cause is Cause.SURGE and not judged.runners and judged.clears_in_mins is not None:
            advice = f"{said}; {advice}"
        else:
            advice = f"{advice}; meanwhile {said}" if judged.runners else f"{advice}; {said}"
    why, lead = f"{name}: {found.evidence}{case}", finding.check(cause.value)
    return Diagnosis(findings, cause, "high", why, advice, name, lead, source)


def _likeliest(findings: tuple[Finding, ...], source: str) -> Diagnosis:
    """No cause named: the runbook's cause the checks point at hardest, how sure, and its fix."""
    totals = {cause: max(f.signals[cause] for f in findings) for cause in RUNBOOK}
    (cause, strength), (_, runner_up) = sorted(totals.items(), key=lambda item: -item[1])[:2]
    if strength < 0.2:
        why = "no check points at a cause: the queue may be draining already"
        if all(c.verdict is Verdict.UNKNOWN for f in findings for c in f.checks):
            why = (
                "the alert carries only the queue; runner counts and job rates would tell "
                f"workload from limits ({LIVE_BACKENDS})"
            )
        return Diagnosis(findings, None, "low", why, _next(findings[0], None), source=source)
    sure = "low" if strength < 0.5 else "high" if strength >= 0.8 and runner_up < 0.5 else "medium"
    resting = max(findings, key=lambda f: f.signals[cause])
    lead = resting.check(RUNBOOK[cause][0])
    why = f"{resting.runner_type}: {lead.text}" if lead else ""
    lead_type = resting.runner_type if lead else ""
    return Diagnosis(findings, cause, sure, why, _next(resting, cause), lead_type, lead, source)


def _finding(name: str, evidence: Evidence, snapshot: FleetSnapshot) -> Finding:
    m = snapshot.runner_types[name]
    found, missing = refined(Facts(name, m, evidence, snapshot.runner_types, snapshot.at))
    by_cause = {f.cause: f for f in found}
    said = {cause: check(m) for cause, (_, check, _) in RUNBOOK.items()}
    signals = {cause: check.signal for cause, check in said.items()}
    if signals[Cause.WORKLOAD] >= (SURGE - 1) / (STRONG_SURGE - 1):
        # A maximum a surge outgrew is the surge's doing: raising it only buys time.
        signals[Cause.AUTOSCALING] = min(signals[Cause.AUTOSCALING], signals[Cause.WORKLOAD] / 2)
    limits, auto = said[Cause.CONSTRAINTS], said[Cause.AUTOSCALING]
    # "At its maximum" alone is the autoscaling check's shortfall said again.
    alone = limits.text.startswith(AT_MAXIMUM) and ";" not in limits.text
    # A ✅ "below the maximum" beside a ❌ pods' constraint reads as a contradiction.
    constrained = any(CASE_OF.get(f.cause) is Cause.CONSTRAINTS for f in found)
    dropped = (alone and auto.verdict is Verdict.BAD) or (
        constrained and limits.verdict is Verdict.OK
    )
    checks = [
        said[Cause.INFRASTRUCTURE],
        _named(said[Cause.WORKLOAD], by_cause.get(Cause.SURGE)),
        _named(said[Cause.LONG_JOBS], by_cause.get(Cause.LONG_JOBS)),
        *([] if dropped else [limits]),
        auto,
        *(Check(f.cause.value, Verdict.BAD, f.evidence) for f in found if f.cause not in MERGED),
    ]
    if m.pods is not None and m.pods.unknown:
        checks.append(Check(RUNNER_PODS, Verdict.UNKNOWN, m.pods.unknown))
    if missing and not found:
        checks.append(Check(KNOWN, Verdict.UNKNOWN, "; ".join(missing)))
    elif not found:
        surge = " or workflow's surge" if said[Cause.WORKLOAD].verdict is Verdict.OK else ""
        ruled_out = f"no stalled listener, unregistered runners, failing scale-up{surge}"
        checks.append(Check(KNOWN, Verdict.OK, ruled_out))
    return Finding(name, tuple(checks), signals, tuple(found), m.judged)


def _named(check: Check, found: Found | None) -> Check:
    """The check a named cause explains, said once."""
    if found is None:
        return check
    text = found.evidence
    if check.verdict is not Verdict.UNKNOWN:
        text += f"; {check.name.lower()} {check.text}"
    return Check(found.cause.value, Verdict.BAD, text)


def utilization(m: RunnerTypeMetrics) -> Check:
    """Idle runners while jobs wait point at the infrastructure: they do not take the jobs."""
    if m.registered is None or m.busy is None:
        return Check(UTILIZATION, Verdict.UNKNOWN, "needs runners registered and busy")
    if m.registered == 0:
        return Check(UTILIZATION, Verdict.BAD, "no runner registered at all")
    share = m.busy / m.registered
    numbers = f"{number(m.busy)}/{number(m.registered)} busy ({share:.0%})"
    idle = m.idle if m.idle is not None else m.registered - m.busy
    if idle > 0 and (m.queued or 0) > 0 and share < BUSY:
        said = f"{numbers}: {number(idle)} idle while jobs wait"
        return Check(UTILIZATION, Verdict.WARN, said, 0.8)
    if share >= BUSY:
        return Check(UTILIZATION, Verdict.BAD, f"{numbers}: no spare runner to take the queue")
    return Check(UTILIZATION, Verdict.OK, numbers)


def arrivals(m: RunnerTypeMetrics) -> Check:
    ratio = arrival_ratio(m)
    if ratio is None:
        return Check(ARRIVALS, Verdict.UNKNOWN, "needs job arrivals and their baseline")
    said = f"{m.arrival_per_min:.1f} jobs/min against {m.arrival_baseline_per_min:.1f} usually"
    return _against(ARRIVALS, ratio, SURGE, STRONG_SURGE, said)


def duration(m: RunnerTypeMetrics) -> Check:
    now, usual = m.job_duration_mins, m.duration_baseline_mins
    if now is None or not usual:
        return Check(DURATION, Verdict.UNKNOWN, "needs job durations and their baseline")
    said = f"{minutes(now)} per job against {minutes(usual)} usually"
    return _against(DURATION, now / usual, SLOW, VERY_SLOW, said)


def _against(name: str, ratio: float, warn: float, bad: float, said: str) -> Check:
    """A number against its baseline; it points hardest from `bad` times the baseline on."""
    verdict = Verdict.BAD if ratio >= bad else Verdict.WARN if ratio >= warn else Verdict.OK
    return Check(name, verdict, f"{said} ({ratio:.1f}×)", min(max((ratio - 1) / (bad - 1), 0), 1))


def constraints(m: RunnerTypeMetrics) -> Check:
    """Scale-up errors point hard at a constraint, a tenth of the runners offline less so."""
    problems = []
    running = m.registered if m.registered is not None else m.desired
    if m.maximum is not None and running is not None and running >= m.maximum:
        problems.append(f"{AT_MAXIMUM} ({number(running)}/{number(m.maximum)})")
    if m.scale_errors:
        problems.append(f"{number(m.scale_errors)} scale-up errors")
    bad = bool(problems)  # offline runners alone are a warning
    if m.offline:
        problems.append(f"{number(m.offline)} runners offline")
    if m.maximum is None and m.scale_errors is None and m.offline is None:
        needs = "needs capacity limits, offline runners, scale-up errors"
        return Check(CONSTRAINTS, Verdict.UNKNOWN, needs)
    if not problems:
        text = "below the maximum, no runner offline, no scale-up error"
        return Check(CONSTRAINTS, Verdict.OK, text)
    offline = m.offline and m.registered and m.offline / (m.registered + m.offline) > 0.1
    signal = 1.0 if m.scale_errors else 0.6 if offline else 0.0
    return Check(CONSTRAINTS, Verdict.BAD if bad else Verdict.WARN, "; ".join(problems), signal)


def autoscaling(m: RunnerTypeMetrics) -> Check:
    """Short only when the advice does not fit: never "short" beside "no more runners"."""
    j = m.judged
    counted = m.busy is not None or m.registered is not None
    if j is None or j.maximum is None or j.queued is None or not counted:
        needs = "needs the maximum, runners in use and the queue"
        return Check(AUTOSCALING, Verdict.UNKNOWN, needs)
    most = number(j.maximum)
    if j.cannot_start:
        stuck = f"{plural(j.cannot_start, 'new runner pod')} cannot start"
        return Check(AUTOSCALING, Verdict.OK, f"{stuck}: the maximum of {most} is not the limit")
    if j.nodes_short:
        pods = "pod finds" if j.unplaced == 1 else "pods find"
        short = f"{j.nodes_short} more runners needed, but {j.unplaced} new {pods} no node"
        return Check(AUTOSCALING, Verdict.OK, f"{short}: the maximum of {most} is not the limit")
    if j.raise_maximum_by:
        fit = f"{j.runners - j.raise_maximum_by} fit under the maximum of {most}"
        text = f"+{j.runners} runners needed, {fit}: {j.raise_maximum_by} short"
        return Check(AUTOSCALING, Verdict.BAD, text, 0.9)
    return Check(AUTOSCALING, Verdict.OK, f"what the queue needs fits the maximum of {most}")


# The runbook's five questions: the check that answers each, the cause it points at and the next
# step when that cause is the likeliest and none is named ("{advice}": the judgement's). Of two
# causes pointed at as hard, the first here is said.
RUNBOOK = {
    Cause.WORKLOAD: (ARRIVALS, arrivals, "{advice}"),
    Cause.LONG_JOBS: (DURATION, duration, "find the slow jobs of {name}; meanwhile {advice}"),
    Cause.CONSTRAINTS: (CONSTRAINTS, constraints,
        "fix what stops {name} from scaling (scale-up errors, offline runners) first"),
    Cause.AUTOSCALING: (AUTOSCALING, autoscaling, "{advice}"),
    Cause.INFRASTRUCTURE: (UTILIZATION, utilization,
        "look at why idle {name} runners take no jobs (labels, registration, the node)"),
}  # fmt: skip


def _next(worst: Finding, cause: Cause | None) -> str:
    """The judgement's advice, as the root says it, unless the cause calls for another fix first
    (slow jobs whose queue already falls need no hunt first)."""
    judged, fix = worst.judged, RUNBOOK[cause][2] if cause else "{advice}"
    advice = _advice(worst.runner_type, judged) if judged is not None and judged.advice else ""
    if advice and judged and judged.raise_maximum_by:
        advice += " (for ARC, maxRunners)"
    falling = cause is Cause.LONG_JOBS and judged and judged.direction is Direction.FALLING
    if "{advice}" in fix and (not advice or falling):
        return advice
    return fix.format(name=worst.runner_type or "the queueing runner type", advice=advice)


def _advice(name: str, judged: Judgement) -> str:
    """ "linux.2xlarge: +7 runners would drain it in 30 min", as the root says it."""
    return f"{name}: {judged.advice}" if name else judged.advice
