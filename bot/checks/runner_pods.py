"""Prometheus, the runner pods: which of their sources (kube-state-metrics, cAdvisor,
node-exporter) it has, for which runner types, and so which causes diagnostics can see. Each is
optional: a source not scraped is said, never a failure. Probed fresh, never from a reading's
cache: `check` runs after a change to what is scraped."""

from __future__ import annotations

from datetime import datetime

from bot.backends.errors import BackendError
from bot.backends.metrics.prometheus import PROBE, PrometheusMetrics
from bot.checks import Finding, ok, warn
from bot.domain.runner_pods import CADVISOR, KSM, NEEDS, NODE_EXPORTER, SAID, source_of

SUBJECT = "prometheus"
SHOWN_TYPES = 8
SEES = {
    KSM: "runner pods that cannot be scheduled or start, OOM kills, nodes under pressure",
    CADVISOR: "CPU throttling, memory near its limit",
    NODE_EXPORTER: "runner nodes whose disks are saturated, OOM kills of pods ARC deleted",
}
NO_POD = (
    "no ARC runner pod in the last 30 min (named <runner set>-runner-…, owned by an "
    "EphemeralRunner)"
)


async def pods_findings(
    metrics: PrometheusMetrics, custom: set[str], now: datetime
) -> list[Finding]:
    """`custom`: the readings PROMETHEUS_QUERIES replaced."""
    found, unseen, refused = await metrics.runner_pods(now=now, fresh=True)
    if unseen is None:
        return []
    if (error := refused.pop(PROBE, None)) is not None:
        # Without it nothing tells a source not scraped from one that shows no trouble.
        said = f"runner pods: Prometheus could not say which of their series it has: {error}"
        fix = "the probe is one `count by (__name__)` over those series: raise Prometheus's "
        fix += "--query.timeout or --query.max-samples, or BACKEND_TIMEOUT_SECONDS"
        return [warn(SUBJECT, said, fix), *_refusals(refused, custom)]
    unscraped = metrics.unscraped()
    types = sorted(found)
    findings = []
    for source, sees in SEES.items():
        readings = [r for r in NEEDS if source_of(r) == source and r in metrics.readings]
        lacking = {unscraped.get(r, "") for r in readings}
        if not readings:
            said = f"PROMETHEUS_QUERIES drops {source}'s readings, so diagnostics cannot see {sees}"
        elif "" in lacking:
            said = _seen(source, sees, types)
            if partly := [r for r in readings if unscraped.get(r) == source]:
                # One collector off (node-exporter's vmstat): its readings are not known.
                series = sorted({NEEDS[r][0][0] for r in partly})
                said += f", but not {', '.join(SAID[r] for r in partly)} ({', '.join(series)} "
                said += "is not scraped)"
        elif source in lacking:
            said = f"{source} is not scraped, so diagnostics cannot see {sees} (optional)"
        else:  # scraped, but what ties its series to runner pods is not
            others = " and ".join(sorted(lacking))
            said = (
                f"{source} is scraped but {others} is missing, whose kube_pod_owner ties its "
                f"series to runner pods: diagnostics cannot see {sees} (optional)"
            )
        findings.append(ok(SUBJECT, f"runner pods: {said}"))
    return findings + _refusals(refused, custom)


def _refusals(refused: dict[str, BackendError], custom: set[str]) -> list[Finding]:
    findings = []
    for reading, error in refused.items():
        replace = f'PROMETHEUS_QUERIES["{reading}"]'
        fix = f'correct {replace} (or "" to drop it)'
        if reading not in custom:
            fix = "a default (kube-state-metrics v2, cAdvisor, node-exporter): replace it with "
            fix += f'{replace}, or ""'
        findings.append(warn(SUBJECT, f"runner pods, {reading}: {error}", fix))
    return findings


def _seen(source: str, sees: str, types: list[str]) -> str:
    if not types:
        return f"{source} scraped, {NO_POD}; diagnostics can see {sees}"
    shown = ", ".join(types[:SHOWN_TYPES]) + (" …" if len(types) > SHOWN_TYPES else "")
    plural = "s" * (len(types) != 1)
    return f"{source} for {len(types)} runner type{plural} ({shown}): diagnostics can see {sees}"
