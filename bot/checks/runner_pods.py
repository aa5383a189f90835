"""Prometheus, the runner pods: which of their sources (kube-state-metrics, cAdvisor) it has, for
which runner types, and so which causes diagnostics can see. Each is optional: a source not
scraped is said, never a failure."""

from __future__ import annotations

from datetime import datetime

from bot.backends.metrics.prometheus import PrometheusMetrics
from bot.checks import Finding, ok, warn
from bot.domain.runner_pods import CADVISOR, KSM, NEEDS, source_of

SUBJECT = "prometheus"
SHOWN_TYPES = 8
SEES = {
    KSM: "runner pods that cannot be scheduled or start, OOM kills, nodes under pressure",
    CADVISOR: "CPU throttling, memory near its limit",
}
NO_POD = (
    "no ARC runner pod in the last 30 min (named <runner set>-runner-…, owned by an "
    "EphemeralRunner)"
)


async def pods_findings(
    metrics: PrometheusMetrics, custom: set[str], now: datetime
) -> list[Finding]:
    """`custom`: the readings PROMETHEUS_QUERIES replaced."""
    found, unseen, refused = await metrics.runner_pods(now=now)
    if unseen is None:
        return []
    types = sorted(found)
    shown = ", ".join(types[:SHOWN_TYPES]) + (" …" if len(types) > SHOWN_TYPES else "")
    plural = "s" * (len(types) != 1)
    findings = []
    for source, sees in SEES.items():
        readings = [r for r in NEEDS if source_of(r) == source and r != "nodes"]
        if all(getattr(unseen, r) is None for r in readings):
            said = f"{source} is not scraped, so diagnostics cannot see {sees} (optional)"
        elif types:
            said = f"{source} for {len(types)} runner type{plural} ({shown}): diagnostics can "
            said += f"see {sees}"
        else:
            said = f"{source} scraped, {NO_POD}; diagnostics can see {sees}"
        findings.append(ok(SUBJECT, f"runner pods: {said}"))
    for reading, error in refused.items():
        replace = f'PROMETHEUS_QUERIES["{reading}"]'
        fix = f'correct {replace} (or "" to drop it)'
        if reading not in custom:
            fix = f'a default (kube-state-metrics v2, cAdvisor): replace it with {replace}, or ""'
        findings.append(warn(SUBJECT, f"runner pods, {reading}: {error}", fix))
    return findings
