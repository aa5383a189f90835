"""A reading judged once: each runner type's `Judgement`, its runner pods' causes included, from
its numbers, the readings before it and the advice held over a window."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from bot.domain.alerting.value_string import finite
from bot.domain.reading.causes import pod_causes
from bot.domain.reading.fleet import (
    FleetSnapshot,
    HistoryPoint,
    RunnerTypeMetrics,
    of_type,
    source_name,
)
from bot.domain.reading.judgement import (
    DRAIN_TARGET_MINS,
    RECENT_READINGS,
    RISE_READINGS,
    Advised,
    Judgement,
    advise,
    direction_of,
    running_of,
)

# Why a source may give no wait for a type that queues.
WAIT_UNKNOWN = {
    "alert": "the alert does not say",
    "prometheus": "ARC times jobs only as they start, and none started in the last hour",
}


def judged(
    fleet: FleetSnapshot,
    recent: Sequence[HistoryPoint],
    *,
    interval: timedelta,
    within_mins: float = DRAIN_TARGET_MINS,
    window: timedelta = timedelta(0),
    rise: timedelta = timedelta(0),
    caps: Mapping[str, int] | None = None,
) -> FleetSnapshot:
    """`fleet` judged against the `recent` readings (any order), the advice stabilized over
    `window` (falling) and `rise` (rising), and within the `caps` of one scale request by type;
    a type a past reading kept no gauges of had nothing queued and was advised nothing then."""
    # The direction's readings, and at a fast cadence all of the rise window's.
    since = fleet.at - max(interval * (RECENT_READINGS + 0.5), rise, window)
    ordered = sorted((p for p in recent if p.at < fleet.at), key=lambda p: p.at)
    before = [p for p in ordered if since <= p.at]
    held = [p for p in ordered if fleet.at - max(window, rise) < p.at]
    if (window or rise) and len(held) < RISE_READINGS - 1:
        held = before[-(RISE_READINGS - 1) :]  # a rise holds over three recent readings at least
    rise_mins = rise / timedelta(minutes=1)
    types = {}
    for name, m in fleet.runner_types.items():
        observed = [(p.at.timestamp(), p.gauges_of(name).get("queued", 0.0)) for p in before]
        earlier = [
            Advised(p.at.timestamp(), int(g.get("own", 0)), g.get("sup", 0.0), int(g.get("adv", 0)))
            for p in held
            for g in [p.gauges_of(name)]
        ]
        verdict = judge(
            m,
            observed,
            at=fleet.at,
            within_mins=within_mins,
            source=fleet.source,
            earlier=earlier,
            rise_mins=rise_mins,
            cap=of_type(caps or {}, name),
        )
        types[name] = m.model_copy(update={"judged": verdict})
    return fleet.model_copy(update={"runner_types": types})


def judge(
    metrics: RunnerTypeMetrics,
    observed: Sequence[tuple[float, float]],
    *,
    at: datetime,
    within_mins: float = DRAIN_TARGET_MINS,
    source: str = "",
    earlier: Sequence[Advised] = (),
    rise_mins: float = 0.0,
    cap: int | None = None,
) -> Judgement:
    """What `metrics` mean as `source` read them. `observed`: (epoch seconds, queued) at the
    readings before, and `earlier`: the advice within the last `rise_mins`, both oldest first."""
    queued = finite(metrics.queued)
    points = [(t, value) for t, value in observed if math.isfinite(value)]
    if queued is not None:
        points.append((at.timestamp(), queued))
    direction, rate = direction_of(points, rise_mins * 60)
    desired, wait, pods = finite(metrics.desired), finite(metrics.longest_wait_mins), metrics.pods
    stuck = pods.cannot_start if pods else 0
    unknown = WAIT_UNKNOWN.get(source, f"{source_name(source)} gives none") if source else ""
    running = running_of(metrics.registered, metrics.busy) or 0.0
    judgement = Judgement(
        at=at,
        queued=queued,
        wait_mins=wait,
        wait_over=bool(metrics.wait_over) and wait is not None,
        wait_of_starts=bool(metrics.wait_of_starts) and wait is not None,
        wait_unknown="" if wait is not None or not queued else metrics.wait_unknown or unknown,
        direction=direction,
        change_per_min=rate,
        busy=finite(metrics.busy),
        registered=finite(metrics.registered),
        # Pods that cannot start are wanted but not booting: they drain nothing.
        booting=0 if desired is None else max(math.floor(desired - running) - stuck, 0),
        maximum=finite(metrics.maximum),
        within_mins=within_mins,
        causes=pod_causes(metrics),
        cannot_start=pods.withholding if pods else 0,
        held=stuck,
        unplaced=round(max(pods.no_node or 0, pods.unschedulable or 0)) if pods else 0,
        pods_read=pods is not None and pods.no_node is not None,
        window_mins=rise_mins,
        cap=cap,
    )
    arrivals, completions = finite(metrics.arrival_per_min), finite(metrics.completed_per_min)
    net = 0.0 if arrivals is None or completions is None else max(arrivals - completions, 0.0)
    return advise(
        judgement,
        duration=finite(metrics.job_duration_mins),
        net_arrivals=net,
        points=points,
        earlier=earlier,
        rise_mins=rise_mins,
    )
