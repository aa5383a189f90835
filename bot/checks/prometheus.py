"""Prometheus: each of the backend's own queries, asked as it asks them, and the runner types each
returns. An empty answer is judged by what it reads: ARC's listener gauges exist from a listener's
start, its job metrics from its first job, the baselines (a day before) after a day of scraping.
The runner pods' sources (kube-state-metrics, cAdvisor, node-exporter) are optional: one not
scraped is said, never a failure."""

from __future__ import annotations

from contextlib import aclosing
from datetime import UTC, datetime

from bot.backends.http import BackendError
from bot.backends.metrics.prometheus import PROBE, PrometheusMetrics, gathered
from bot.checks import Finding, Verdict, fail, ok, warn
from bot.config import ScalerBackend, Settings
from bot.domain.reading.runner_pods import CADVISOR, KSM, NEEDS, NODE_EXPORTER, SAID, source_of
from bot.factory import build_metrics

SUBJECT = "prometheus"
GAUGES = ("queued", "assigned", "registered", "busy", "idle", "minimum", "maximum", "desired")
DAY_BEFORE = ("arrival_baseline_per_min", "duration_baseline_mins")
SHOWN_TYPES = 8
SCRAPE_ARC = (
    "scrape ARC's listeners: each scale set's listener serves its metrics when the controller "
    "is installed with listener metrics on (metrics.listenerAddr), scraped by a PodMonitor in "
    "ARC's namespace; or replace the queries (PROMETHEUS_QUERIES)"
)
SEES = {
    KSM: "runner pods that cannot be scheduled or start, OOM kills, nodes under pressure",
    CADVISOR: "CPU throttling, memory near its limit",
    NODE_EXPORTER: "runner nodes whose disks are saturated, OOM kills of pods ARC deleted",
}
CUSTOM_EMPTY = (
    'try those queries in Prometheus\'s UI; for a field with no such number, set its query to ""'
)
NO_EVENT = "ARC's job metrics appear after a listener's first job event"
NO_EVENT_FIX = (
    "nothing to do if no job ran since the listeners started; else check that the listeners' "
    "metrics are scraped"
)
DAY_LATER = "they compare with the same hour a day before, and fill in after a day of scraping"
NO_POD = (
    "no ARC runner pod in the last 30 min (named <runner set>-runner-…, owned by an "
    "EphemeralRunner)"
)


async def probe(settings: Settings) -> list[Finding]:
    metrics = build_metrics(settings)
    assert isinstance(metrics, PrometheusMetrics)
    async with aclosing(metrics):
        now = datetime.now(UTC)
        queries = {field: metrics.series(field, now=now) for field in metrics.fields}
        answers, refused = await gathered(queries, all_may_fail=True)
        custom = set(settings.prometheus_queries)
        pods = await pods_findings(metrics, custom, now) if answers else []
    # Prometheus refusing every query alike (unreachable, a token refused) is said once.
    if not answers and len({str(a) for a in refused.values()}) == 1:
        first = next(iter(refused.values()))
        token = "set PROMETHEUS_TOKEN to a token this Prometheus accepts"
        url = "set PROMETHEUS_URL to Prometheus's base URL (…:9090), reachable from here"
        fixes = {401: token, 403: token, None: url}
        if first.status in fixes:
            return [fail(SUBJECT, str(first), fixes[first.status])]
    findings = [_refused(settings, field, error) for field, error in refused.items()]
    label = settings.prometheus_runner_type_label
    types = {f: sorted({metrics.runner_type(ls) for ls, _ in a} - {""}) for f, a in answers.items()}
    for field in [field for field, answer in answers.items() if answer and not types[field]]:
        fix = "set PROMETHEUS_RUNNER_TYPE_LABEL to the label naming the runner type, or "
        fix += f"keep {label!r} in the query (sum by ({label}) (…))"
        said = f"{field} returns series without the {label!r} label"
        findings.append(fail(SUBJECT, said, fix))
        del types[field]
    found = _answered(settings, types) + _targets(settings, types) + pods
    return findings + found + _asked(settings, metrics)


def _asked(settings: Settings, metrics: PrometheusMetrics) -> list[Finding]:
    """Each query as asked, so PROMETHEUS_SELECTOR's effect is seen; the runner pods' (hundreds of
    characters each, in docs/backends.md) in one line."""
    custom, where = settings.prometheus_queries, settings.prometheus_selector
    found = []
    if where:
        written = [name for name, query in custom.items() if query.strip()]
        own = f"; PROMETHEUS_QUERIES' own ({', '.join(written)}) as written" if written else ""
        said = f"PROMETHEUS_SELECTOR {where}: in every series of the default queries{own}"
        found.append(ok(SUBJECT, said))
    for name, query in metrics.queries.items():
        if name in custom:
            found.append(ok(SUBJECT, f"query {name} (PROMETHEUS_QUERIES): {query}"))
        elif name not in NEEDS:
            found.append(ok(SUBJECT, f"query {name}: {query}"))
    pods = [name for name in metrics.readings if name not in custom]
    if pods:
        selected = f", every series with {where}" if where else ""
        said = f"query runner pods: {len(pods)} default readings{selected} (docs/backends.md)"
        found.append(ok(SUBJECT, said))
    return found


def _refused(settings: Settings, field: str, error: BackendError) -> Finding:
    fix = f'correct PROMETHEUS_QUERIES["{field}"] (or "" to drop the field)'
    if field not in settings.prometheus_queries:
        fix = "an ARC default: PROMETHEUS_RATE_WINDOW must be a range Prometheus takes (10m); or "
        fix += f'replace it with PROMETHEUS_QUERIES["{field}"]'
    return fail(SUBJECT, f"{field}: {error}", fix)


def _answered(settings: Settings, types: dict[str, list[str]]) -> list[Finding]:
    """The queries grouped by the runner types they return; the empty ones said apart."""
    empty = [field for field, seen in types.items() if not seen]
    if types and len(empty) == len(types):
        return [fail(SUBJECT, f"none of the {len(types)} queries returns a series", SCRAPE_ARC)]
    by_types: dict[tuple[str, ...], list[str]] = {}
    for field, seen in types.items():
        if seen:
            by_types.setdefault(tuple(seen), []).append(field)
    plural = {seen: "s" * (len(seen) != 1) for seen in by_types}
    findings = [
        ok(SUBJECT, f"{', '.join(fields)}: {len(seen)} runner type{plural[seen]} ({_shown(seen)})")
        for seen, fields in by_types.items()
    ]
    custom = [f for f in empty if f in settings.prometheus_queries]
    gauges = [f for f in empty if f in GAUGES and f not in custom]
    later = [f for f in empty if f in DAY_BEFORE and f not in custom]
    events = [f for f in empty if f not in (*custom, *gauges, *later)]
    said = [
        (custom, Verdict.WARN, "no series for {} (PROMETHEUS_QUERIES)", CUSTOM_EMPTY),
        (gauges, Verdict.WARN, "no series for ARC's listener gauges {}", SCRAPE_ARC),
        (events, Verdict.WARN, "no series yet for {}: " + NO_EVENT, NO_EVENT_FIX),
        (later, Verdict.OK, "no data yet for {}: " + DAY_LATER, ""),
    ]
    return findings + [
        Finding(verdict, SUBJECT, detail.format(", ".join(fields)), fix)
        for fields, verdict, detail, fix in said
        if fields
    ]


def _targets(settings: Settings, types: dict[str, list[str]]) -> list[Finding]:
    """A scale target no query returns: its incidents would show no numbers."""
    seen = {runner_type for found in types.values() for runner_type in found}
    if not seen or settings.scaler_backend is ScalerBackend.NONE:
        return []
    fix = f"its scale set's series are named by the {settings.prometheus_runner_type_label!r} "
    fix += f"label (less PROMETHEUS_NAME_SUFFIX, {settings.prometheus_name_suffix}): give its "
    fix += "scale set in RUNNER_SCALE_SETS if its name is not the derived one; the series seen "
    fix += f"are {_shown(sorted(seen))}"
    return [
        warn(SUBJECT, f"scale target {runner_type!r} has no series in Prometheus", fix)
        for runner_type in settings.scaler_targets
        if runner_type not in seen
    ]


def _shown(types: list[str] | tuple[str, ...]) -> str:
    more = len(types) - SHOWN_TYPES
    return ", ".join(types[:SHOWN_TYPES]) + (f" and {more} more" if more > 0 else "")


async def pods_findings(
    metrics: PrometheusMetrics, custom: set[str], now: datetime
) -> list[Finding]:
    """Probed fresh, never from a reading's cache: `check` runs after a change to what is scraped.
    `custom`: the readings PROMETHEUS_QUERIES replaced."""
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
