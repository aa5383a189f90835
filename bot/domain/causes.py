"""Causes a CI engineer recognises, refining the runbook's five, each with its evidence and the
next step that fits it ("raise the maximum" is wrong for a stalled listener); what cannot be
decided for lack of data says which source would tell."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from bot.domain.fleet import HistoryPoint, RunnerTypeMetrics
from bot.domain.jobs import Slower, Surge
from bot.domain.judgement import BOOT_MINS
from bot.domain.runner_pods import Trouble
from bot.domain.units import minutes, number

STALL_MINS = 15.0  # ARCListenerStall: gha_assigned_jobs > 0 unchanged for 15 minutes
ARC = "ARC's listener metrics (METRICS_BACKEND=prometheus)"
JOBS_SOURCES = "needs the jobs behind the queue (JOBS_BACKEND=github or hud)"


class Cause(StrEnum):
    # The runbook's five.
    WORKLOAD = "Increased workload"
    CONSTRAINTS = "Resource constraints"
    LONG_JOBS = "Long-running jobs"
    AUTOSCALING = "Autoscaling configuration"
    INFRASTRUCTURE = "Infrastructure problems"
    # What they are, when the evidence says which.
    SURGE = "One workflow's surge"
    LISTENER_STALLED = "Listener stalled"
    NOT_REGISTERING = "Runners not registering"
    SCALE_UP_FAILING = "Scale-up failing"
    ORG_LIMIT = "At the organisation's limit"
    # What the runner pods show (`bot.domain.runner_pods`), judged with the reading.
    PODS_UNSCHEDULABLE = Trouble.UNSCHEDULABLE.value
    IMAGE_PULL = Trouble.IMAGE_PULL.value
    CONFIG_ERROR = Trouble.CONFIG_ERROR.value
    CREATING = Trouble.CREATING.value
    NODE_PRESSURE = Trouble.NODE_PRESSURE.value
    DISK_BUSY = Trouble.DISK_BUSY.value
    OOM_KILLED = Trouble.OOM_KILLED.value
    CPU_THROTTLED = Trouble.CPU_THROTTLED.value
    MEMORY_NEAR_LIMIT = Trouble.MEMORY_NEAR_LIMIT.value


# Which of the runbook's five each refinement is a case of.
FAMILY = {
    Cause.SURGE: Cause.WORKLOAD,
    Cause.LISTENER_STALLED: Cause.INFRASTRUCTURE,
    Cause.NOT_REGISTERING: Cause.INFRASTRUCTURE,
    Cause.SCALE_UP_FAILING: Cause.CONSTRAINTS,
    Cause.ORG_LIMIT: Cause.CONSTRAINTS,
    Cause.PODS_UNSCHEDULABLE: Cause.CONSTRAINTS,
    Cause.IMAGE_PULL: Cause.INFRASTRUCTURE,
    Cause.CONFIG_ERROR: Cause.INFRASTRUCTURE,
    Cause.CREATING: Cause.INFRASTRUCTURE,
    Cause.NODE_PRESSURE: Cause.INFRASTRUCTURE,
    Cause.DISK_BUSY: Cause.INFRASTRUCTURE,
    Cause.OOM_KILLED: Cause.CONSTRAINTS,
    Cause.CPU_THROTTLED: Cause.CONSTRAINTS,
    Cause.MEMORY_NEAR_LIMIT: Cause.CONSTRAINTS,
}


@dataclass(frozen=True)
class Evidence:
    history: Sequence[HistoryPoint] = ()  # past readings, newest first
    boot_mins: float = BOOT_MINS
    stall_mins: float = STALL_MINS
    # None: not readable; no entry: no scale target.
    scaler_failures: Mapping[str, Sequence[str] | None] = field(default_factory=dict)
    surges: Mapping[str, Surge] = field(default_factory=dict)
    slower: Mapping[str, Sequence[Slower]] = field(default_factory=dict)
    # Why no surges can be told ("" when the jobs were read).
    jobs_note: str = JOBS_SOURCES


@dataclass(frozen=True)
class Found:
    cause: Cause
    evidence: str
    advice: str


def refined(
    name: str,
    m: RunnerTypeMetrics,
    evidence: Evidence,
    fleet: Mapping[str, RunnerTypeMetrics],
    *,
    now: datetime,
) -> tuple[list[Found], list[str]]:
    """The causes found for `name`, and what would tell the others."""
    outcomes = (
        listener_stalled(name, m, evidence, now),
        not_registering(name, m, evidence, now),
        scale_up_failing(name, m, evidence),
        org_limit(name, fleet, evidence, now),
    )
    found = [o for o in outcomes if isinstance(o, Found)]
    missing = [o for o in outcomes if isinstance(o, str) and o]
    # The runner pods' causes were judged with the reading: said as judged, never recomputed.
    if m.judged is not None:
        found += [Found(Cause(c.trouble.value), c.evidence, c.advice) for c in m.judged.causes]
    surge = evidence.surges.get(name)
    if surge is not None:
        defer = f"cancel or defer {surge.workflow} if it can wait; scaling only buys time"
        found.append(Found(Cause.SURGE, surge.text, defer))
    elif evidence.jobs_note:
        missing.append(f"a workflow's surge {evidence.jobs_note}")
    slower = list(evidence.slower.get(name, ()))[:3]
    if slower:
        names = ", ".join(s.workflow for s in slower)
        why = f"find why {names} jobs got slower (a new test, a dependency, the runner image)"
        said = "; ".join(s.text for s in slower)
        found.append(Found(Cause.LONG_JOBS, said, f"{why}; scaling only buys time"))
    return found, missing


def listener_stalled(
    name: str, m: RunnerTypeMetrics, evidence: Evidence, now: datetime
) -> Found | str | None:
    """Assigned jobs above zero and frozen for `stall_mins` while the set could take them."""
    if m.assigned is None:
        return f"a stalled listener needs assigned jobs over time ({ARC})"
    if m.assigned <= 0:
        return None
    stall_mins = evidence.stall_mins
    held = _assigned_for(name, m.assigned, evidence.history, now, stall_mins)
    if held is None:
        return f"a stalled listener needs {stall_mins:.0f} minutes of readings"
    if held < stall_mins:
        return None
    idle = m.idle or 0
    below_max = m.maximum is not None and m.registered is not None and m.registered < m.maximum
    if idle <= 0 and not below_max:
        return None  # frozen at the maximum with every runner busy: a full fleet, not a stall
    room = f"{number(idle)} runners idle" if idle > 0 else "below its maximum"
    return Found(
        Cause.LISTENER_STALLED,
        f"{number(m.assigned)} jobs assigned and unchanged for {held:.0f} min while {room}",
        f"restart the ARC listener of {name} (delete its listener pod; the controller recreates "
        "it): scaling does not help while it takes no jobs",
    )


def not_registering(
    name: str, m: RunnerTypeMetrics, evidence: Evidence, now: datetime
) -> Found | str | None:
    """More runners asked for than registered for longer than a boot, or runners offline."""
    offline = m.offline or 0
    if offline > 0 and (m.queued or 0) > 0:
        total = number((m.registered or 0) + offline)
        said = f"{number(offline)} of {total} runners offline while jobs wait"
        look = f"look at the offline {name} runners (the node, the runner's service, its token)"
        return Found(Cause.NOT_REGISTERING, said, look)
    if m.desired is None or m.registered is None or m.desired <= m.registered:
        return None
    if m.pods is not None and m.pods.cannot_start >= m.desired - m.registered:
        return None  # the pods' own cause says why, with the pods' numbers
    since, boot_mins = _short_since(name, evidence.history, now), evidence.boot_mins
    if since is None:
        return "runners not registering needs readings over time"
    if since < boot_mins:
        return None
    return Found(
        Cause.NOT_REGISTERING,
        f"the autoscaler wants {number(m.desired)} runners, {number(m.registered)} registered, "
        f"for {minutes(since)} (a boot takes about {minutes(boot_mins)})",
        f"find why new {name} runners do not register (pods pending, image pulls, node "
        "capacity, the registration token) before asking for more",
    )


def scale_up_failing(name: str, m: RunnerTypeMetrics, evidence: Evidence) -> Found | None:
    """The autoscaler's own errors: its metric, or what the scale backend read."""
    listed = list(evidence.scaler_failures.get(name) or ())
    if not listed and not m.scale_errors:
        return None
    lines = listed[:2] or [f"{number(m.scale_errors or 0)} scale-up errors"]
    quota = any(word in " ".join(listed).lower() for word in ("quota", "limit", "vcpu"))
    advice = (
        "raise the quota the autoscaler hit, or move the type to an instance type with room"
        if quota
        else f"fix what the autoscaler reports for {name} before scaling further"
    )
    return Found(Cause.SCALE_UP_FAILING, "; ".join(lines), advice)


def org_limit(
    name: str, fleet: Mapping[str, RunnerTypeMetrics], evidence: Evidence, now: datetime
) -> Found | None:
    """Several types queue below their maximum, each short of what was asked for longer than a
    boot: nothing starts anywhere, which one type's nodes do not explain."""
    short = []
    for other, m in fleet.items():
        queueing = (m.queued or 0) > 0
        below = m.maximum is not None and m.registered is not None and m.registered < m.maximum
        wanting = m.desired is not None and m.registered is not None and m.desired > m.registered
        if not (queueing and below and wanting):
            if queueing:
                return None  # a type at its maximum, or getting its runners: not a shared limit
            continue
        since = _short_since(other, evidence.history, now)
        if since is None or since < evidence.boot_mins:
            return None
        short.append(other)
    if name not in short or len(short) < 2:
        return None
    return Found(
        Cause.ORG_LIMIT,
        f"{len(short)} runner types queue below their maximum and none gets the runners asked "
        f"for ({', '.join(sorted(short)[:4])})",
        "check the organisation's limits: the cloud account's instance quota, GitHub's runner "
        "limit for the organisation or runner group",
    )


def _assigned_for(
    name: str, value: float, history: Sequence[HistoryPoint], now: datetime, enough_mins: float
) -> float | None:
    """Minutes `name`'s assigned jobs have read `value`; None while the history is too short."""
    oldest = now
    for point in history:  # newest first
        past = point.gauges_of(name).get("assigned")
        if past is None or past != value:
            return (now - oldest) / timedelta(minutes=1)
        oldest = point.at
    held = (now - oldest) / timedelta(minutes=1)
    return held if held >= enough_mins else None


def _short_since(name: str, history: Sequence[HistoryPoint], now: datetime) -> float | None:
    """Minutes `name` has had fewer runners registered than desired; None without a reading."""
    oldest: datetime | None = None
    for point in history:
        gauges = point.gauges_of(name)
        desired, registered = gauges.get("desired"), gauges.get("registered")
        if desired is None or registered is None:
            break
        if desired <= registered:
            return (now - oldest) / timedelta(minutes=1) if oldest else 0.0
        oldest = point.at
    return (now - oldest) / timedelta(minutes=1) if oldest else None
