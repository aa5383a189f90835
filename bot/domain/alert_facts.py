"""What an incident needs from a notification: title, priority, links, queue numbers, matchers.

Grafana and Alertmanager put the same facts in different places (Grafana: `values`, annotation
keys in any case; Alertmanager: labels and annotations, numbers as strings), and real rules spell
keys differently (`Priority`, `severity`, `TEAM`, `Teams`). Each rule below is a small function so
the place a fact comes from is written down once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit

from bot.domain.alerts import (
    Alert,
    AlertFacts,
    Matcher,
    Notification,
    QueueNumbers,
    RunnerQueue,
    max_known,
)

T = TypeVar("T")

QUEUE_TIME_NAMES = ("max_queue_time_mins", "queue_time_mins")
QUEUE_SIZE_NAMES = ("max_queue_size", "queued_jobs", "queue_size")
THRESHOLD_NAMES = ("queue_time_threshold", "queue_size_threshold")
BREACHED = "threshold_breached"  # the OR of the rule's conditions, where they are conditions
QUEUE_NAMES = frozenset((*QUEUE_TIME_NAMES, *QUEUE_SIZE_NAMES, *THRESHOLD_NAMES))
RUNNER_KEYS = ("runner_type", "runner_label", "runner")
NO_DATA_SUFFIX = {"DatasourceNoData": " (no data)", "DatasourceError": " (datasource error)"}

# Caps on what one notification can put into an incident. The incident is stored, rendered and
# read on every tick: a 0.8 MB silence link with 200,000 matchers must cost what a normal one
# does. Whatever a cap leaves out is named in `AlertFacts.truncated` and shown on the root.
MAX_URL = 2000
MAX_MATCHERS = 64
MAX_LABELS, MAX_LABEL_NAME, MAX_LABEL_VALUE = 64, 200, 1000
MAX_RUNNER_TYPES = 100
MAX_OTHER_VALUES = 20
MAX_TEXT = {"title": 300, "priority": 40, "team": 200, "summary": 3000, "description": 3000}


def facts_of(notification: Notification) -> AlertFacts:
    """Everything the incident shows and acts on, from one notification, within the caps."""
    firing = notification.firing
    notes: list[str] = []
    silence_url = _first_url(notification, "silence_url")
    matchers = group_matchers(notification)
    annotations = _annotation_sources(notification)
    text = {
        "title": title_of(notification),
        "priority": priority_of(notification) or "",
        "team": _first_value(_label_sources(notification), ("team", "teams")) or "",
        "summary": _first_value(annotations, ("summary",)) or "",
        "description": _first_value(annotations, ("description",)) or "",
    }
    text = {name: _capped_text(name, value, notes) for name, value in text.items()}
    urls = {
        "runbook": _first_value(annotations, ("runbook_url", "runbook")) or "",
        "alert": _first_url(notification, "generator_url"),
        "silence": silence_url,
        "dashboard": _first_url(notification, "dashboard_url"),
        "panel": _first_url(notification, "panel_url"),
    }
    urls = {name: _capped_url(name, url, notes) for name, url in urls.items()}
    if notification.truncated_alerts:
        notes.append(f"the sender left out {notification.truncated_alerts} alerts")
    return AlertFacts(
        title=text["title"],
        priority=text["priority"] or None,
        team=text["team"] or None,
        summary=text["summary"],
        description=text["description"],
        runbook_url=urls["runbook"],
        alert_url=urls["alert"],
        silence_url=urls["silence"],
        dashboard_url=urls["dashboard"],
        panel_url=urls["panel"],
        numbers=queue_numbers(firing),
        other_values=_capped_map(other_values(firing), MAX_OTHER_VALUES, "values", notes),
        runner_types=_capped_map(
            _worst_first(runner_types(firing)), MAX_RUNNER_TYPES, "runner types", notes
        ),
        firing_count=len(firing),
        resolved_count=len(notification.alerts) - len(firing),
        silence_matchers=_capped_matchers(matchers, notes),
        truncated=tuple(notes),
        labels=_route_labels(notification),
    )


def _route_labels(notification: Notification) -> dict[str, str]:
    """The labels a route matches: common and group labels, within caps (a label past them is
    left out, so a route naming it falls through to the next)."""
    labels = {**notification.common_labels, **notification.group_labels}
    return {
        name: value
        for name, value in list(labels.items())[:MAX_LABELS]
        if len(name) <= MAX_LABEL_NAME and len(value) <= MAX_LABEL_VALUE
    }


def _capped_text(name: str, value: str, notes: list[str]) -> str:
    limit = MAX_TEXT[name]
    if len(value) <= limit:
        return value
    notes.append(f"{name} cut to {limit} of {len(value):,} characters")
    return value[: limit - 1] + "…"


def _capped_url(name: str, url: str, notes: list[str]) -> str:
    if len(url) <= MAX_URL:
        return url
    notes.append(f"{name} link dropped: {len(url):,} characters (at most {MAX_URL:,})")
    return ""


def _capped_map(values: dict[str, T], limit: int, what: str, notes: list[str]) -> dict[str, T]:
    if len(values) <= limit:
        return values
    notes.append(f"{len(values):,} {what}, {limit} kept")
    return dict(list(values.items())[:limit])


def _worst_first(queues: dict[str, RunnerQueue]) -> dict[str, RunnerQueue]:
    """So a cap on runner types keeps the ones that hurt most."""

    def badness(item: tuple[str, RunnerQueue]) -> tuple[float, float]:
        queue = item[1]
        return (-(queue.longest_wait_mins or 0), -(queue.queued or 0))

    return dict(sorted(queues.items(), key=badness))


def _capped_matchers(matchers: tuple[Matcher, ...], notes: list[str]) -> tuple[Matcher, ...]:
    if len(matchers) <= MAX_MATCHERS:
        return matchers
    notes.append(f"silence link has {len(matchers):,} matchers, {MAX_MATCHERS} kept")
    return matchers[:MAX_MATCHERS]


# --- where text facts come from -------------------------------------------------------------------


def _primary(notification: Notification) -> Alert:
    """The alert that speaks for the group: the first firing one, else the first one."""
    return (notification.firing or notification.alerts)[0]


def _annotation_sources(notification: Notification) -> tuple[Mapping[str, str], ...]:
    """Common annotations hold what all alerts agree on; the primary alert fills the gaps."""
    return notification.common_annotations, _primary(notification).annotations


def _label_sources(notification: Notification) -> tuple[Mapping[str, str], ...]:
    """Priority and team are annotations in Grafana rules and labels in Alertmanager rules."""
    primary = _primary(notification)
    return (
        notification.common_annotations,
        notification.common_labels,
        primary.annotations,
        primary.labels,
    )


def _first_value(sources: Iterable[Mapping[str, str]], keys: tuple[str, ...]) -> str | None:
    """First non-blank value whose key matches case-insensitively (rules write `Priority`)."""
    for source in sources:
        for key, value in source.items():
            if key.lower() in keys and value.strip():
                return value.strip()
    return None


def priority_of(notification: Notification) -> str | None:
    """`priority` or `severity`; a bare number ("1") is how PyTorch's rules write P1."""
    value = _first_value(_label_sources(notification), ("priority", "severity"))
    if value is not None and value.isdigit():
        return f"P{value}"
    return value


def title_of(notification: Notification) -> str:
    """The group's alertname; Grafana's no-data/error alerts are named by their rule instead."""
    name = notification.group_labels.get("alertname") or notification.common_labels.get("alertname")
    suffix = ""
    if not name:
        names = list(dict.fromkeys(a.labels.get("alertname", "") for a in notification.alerts))
        name = names[0]
        others = len([n for n in names[1:] if n])
        suffix = f" (+{others} more)" if others else ""
    if not name:
        return "Alert"
    if name in NO_DATA_SUFFIX:
        rule = _rule_name(notification)
        if rule:
            name = rule + NO_DATA_SUFFIX[name]
    return name + suffix


def _rule_name(notification: Notification) -> str | None:
    """Grafana keeps the rule's own name in `rulename` when it names the alert DatasourceNoData."""
    sources = (
        notification.group_labels,
        notification.common_labels,
        _primary(notification).labels,
    )
    return _first_value(sources, ("rulename",))


def _first_url(notification: Notification, attribute: str) -> str:
    """First non-empty URL of a firing alert, else of any alert: one alert may lack a link."""
    for alert in (*notification.firing, *notification.alerts):
        url = getattr(alert, attribute)
        if url:
            return str(url)
    return ""


# --- numbers --------------------------------------------------------------------------------------


def _parse_number(text: str) -> float | None:
    """Alertmanager carries numbers as strings; text that is not a finite number is ignored."""
    try:
        number = float(text.strip())
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


NumberSources = tuple[dict[str, float | str], ...]


def number_sources(alert: Alert) -> NumberSources:
    """Where an alert keeps its numbers, keyed case-insensitively: Grafana's values first, then
    annotations, then labels. Worked out once per alert for all the numbers read from it."""
    sources: tuple[Mapping[str, float | str], ...] = (alert.values, alert.annotations, alert.labels)
    return tuple({k.lower(): v for k, v in source.items()} for source in sources)


def alert_number(
    alert: Alert, names: tuple[str, ...], sources: NumberSources | None = None
) -> float | None:
    """One named number of an alert: Grafana's values first, then annotations, then labels."""
    for by_key in sources if sources is not None else number_sources(alert):
        for name in names:
            value = by_key.get(name)
            number = _parse_number(value) if isinstance(value, str) else value
            if number is not None:
                return number
    return None


def _series_max(alert: Alert, names: tuple[str, ...]) -> float | None:
    """Largest labelled result of a valueString series, for alerts that only carry those."""
    found = [s.value for s in alert.series if s.name.lower() in names and s.value is not None]
    return max(found) if found else None


def _alert_queue(alert: Alert, sources: NumberSources | None = None) -> RunnerQueue:
    """The queue size and wait one alert reports, whichever place it keeps them in."""
    sources = sources if sources is not None else number_sources(alert)
    queued = alert_number(alert, QUEUE_SIZE_NAMES, sources)
    wait = alert_number(alert, QUEUE_TIME_NAMES, sources)
    return RunnerQueue(
        queued=queued if queued is not None else _series_max(alert, QUEUE_SIZE_NAMES),
        longest_wait_mins=wait if wait is not None else _series_max(alert, QUEUE_TIME_NAMES),
    )


def queue_numbers(firing: Iterable[Alert]) -> QueueNumbers:
    """Worst queue across firing alerts; thresholds from the first alert that states them.

    Only firing alerts count: a resolved alert repeats its last (or zeroed) numbers, which would
    make a recovering queue look stuck.

    PyTorch's Grafana rule names its two conditions `queue_time_threshold` and
    `queue_size_threshold` (math expressions such as `$B > 60`, which Grafana evaluates to 1 or
    0, every expression's result going into `values` under its name) and their OR
    `threshold_breached`. In such a payload (`threshold_breached` beside values of 0 or 1) they
    say whether each number is over its threshold, not where the threshold is: "threshold 1 min"
    for a 114-minute wait would be wrong, and an early warning would take 0 queued as the bar.
    """
    wait: float | None = None
    size: float | None = None
    thresholds: dict[str, float | None] = dict.fromkeys(THRESHOLD_NAMES)
    over: dict[str, bool | None] = dict.fromkeys(THRESHOLD_NAMES)
    for alert in firing:
        sources = number_sources(alert)
        queue = _alert_queue(alert, sources)
        wait = max_known(wait, queue.longest_wait_mins)
        size = max_known(size, queue.queued)
        stated = {name: alert_number(alert, (name,), sources) for name in THRESHOLD_NAMES}
        if _conditions(alert, sources, stated):
            for name, value in stated.items():
                if value is not None:  # over in any firing alert is over
                    over[name] = bool(over[name]) or value == 1
            continue
        for name, known in thresholds.items():
            if known is None:
                thresholds[name] = stated[name]
    return QueueNumbers(
        max_queue_time_mins=wait,
        max_queue_size=size,
        queue_time_threshold=thresholds["queue_time_threshold"],
        queue_size_threshold=thresholds["queue_size_threshold"],
        queue_time_over=over["queue_time_threshold"],
        queue_size_over=over["queue_size_threshold"],
    )


def _conditions(alert: Alert, sources: NumberSources, stated: Mapping[str, float | None]) -> bool:
    """Whether the alert's `*_threshold` values are its rule's conditions (1: crossed), as in
    PyTorch's rule, rather than thresholds."""
    known = [value for value in stated.values() if value is not None]
    flagged = alert_number(alert, (BREACHED,), sources) is not None
    return flagged and bool(known) and all(value in (0, 1) for value in known)


def other_values(firing: Iterable[Alert]) -> dict[str, float]:
    """Named results that are not queue numbers (Grafana's B, C, threshold_breached), shown as-is;
    the first alert's value wins so the display does not flicker between alerts."""
    found: dict[str, float] = {}
    for alert in firing:
        for name, value in alert.values.items():
            if name.lower() not in QUEUE_NAMES:
                found.setdefault(name, value)
    return found


def _runner_of(labels: Mapping[str, str]) -> str | None:
    """The runner type an alert or series is about, under the label names CI setups use."""
    return _first_value((labels,), RUNNER_KEYS)


def _merge(queues: dict[str, RunnerQueue], runner: str, queue: RunnerQueue) -> None:
    """Two alerts naming one runner type: keep the worse of each number."""
    seen = queues.get(runner, RunnerQueue())
    queues[runner] = RunnerQueue(
        queued=max_known(seen.queued, queue.queued),
        longest_wait_mins=max_known(seen.longest_wait_mins, queue.longest_wait_mins),
    )


def runner_types(firing: Iterable[Alert]) -> dict[str, RunnerQueue]:
    """Per runner type queues: from alerts labelled with a runner type (one Alertmanager alert per
    type) and from valueString series labelled with one (one Grafana alert, many series)."""
    queues: dict[str, RunnerQueue] = {}
    for alert in firing:
        runner = _runner_of(alert.labels)
        if runner:
            _merge(queues, runner, _alert_queue(alert))
        for series in alert.series:
            runner = _runner_of(series.labels)
            name = series.name.lower()
            if not runner or series.value is None:
                continue
            if name in QUEUE_SIZE_NAMES:
                _merge(queues, runner, RunnerQueue(queued=series.value))
            elif name in QUEUE_TIME_NAMES:
                _merge(queues, runner, RunnerQueue(longest_wait_mins=series.value))
    return queues


# --- silence matchers -----------------------------------------------------------------------------

# A label name holds no `=`, `!` or `~`, so the first of them starts the operator. The class
# excludes every character an operator starts with, so the scan is one pass with nothing to
# backtrack into: the regex this replaces let three whitespace-eating groups compete for the same
# spaces, and a silence link with 2,000 of them held the event loop for 14 s.
_OPERATOR = re.compile(r"[^=!~]*+(=~|!~|!=|=)")
_OPERATORS = {"=": (True, False), "!=": (False, False), "=~": (True, True), "!~": (False, True)}


def _unquote(value: str) -> str:
    """Newer matcher syntax quotes values (`alertname="High CPU"`); older Grafana does not."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def parse_matcher(text: str) -> Matcher | None:
    """`name=value`, `name!=value`, `name=~regex`, `name!~regex`, spaces around either side
    ignored; anything else (no operator, a blank name) is skipped, not guessed at."""
    operator = _OPERATOR.match(text)
    if operator is None:
        return None
    name = text[: operator.start(1)].strip()
    if not name:
        return None
    is_equal, is_regex = _OPERATORS[operator[1]]
    return Matcher(name, _unquote(text[operator.end() :].strip()), is_equal, is_regex)


def split_matchers(text: str) -> list[str]:
    """Split `a=b,c="x,y"` on commas outside double quotes; braces (`{...}`) are optional and
    blank pieces dropped."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    parts: list[str] = []
    current, quoted, escaped = "", False, False
    for char in text:
        if char == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += char
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
    parts.append(current)
    return [p for p in parts if p.strip()]


def matchers_from_silence_url(url: str) -> tuple[Matcher, ...]:
    """Matchers from a Grafana silence link: repeated `matcher=` (current Grafana), a comma list
    in `matchers=` (older Grafana), or Alertmanager UI's `filter={...}` in the fragment.

    They identify exactly what Grafana would silence, including the `__alert_rule_uid__` matcher
    that pins the silence to one rule.
    """
    if not url:
        return ()
    try:
        parts = urlsplit(url.replace("\\u0026", "&"))
    except ValueError:  # "https://[host…": urlsplit refuses an unclosed IPv6 bracket
        return ()
    fragment_query = parts.fragment.partition("?")[2]
    expressions: list[str] = []
    for query in (parts.query, fragment_query):
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == "matcher":
                expressions.append(value)
            elif key in ("matchers", "filter"):
                expressions.extend(split_matchers(value))
    matchers = (parse_matcher(e) for e in expressions)
    return tuple(m for m in matchers if m is not None)


RULE_UID = "__alert_rule_uid__"
# Grafana's alert links: `/alerting/grafana/<rule uid>/view` (and `/edit`).
_RULE_LINK = re.compile(r"/alerting/grafana/([^/?#]+)/")


def group_matchers(notification: Notification) -> tuple[Matcher, ...]:
    """Matchers that select this alert group, for a silence made from Slack.

    Grafana: the rule (`__alert_rule_uid__`, from the silence links, else the alert links) when
    every alert shares one, the matchers every alert's own silence link carries, and the group
    labels. Alertmanager: the group labels (what `group_by` grouped on), else the common labels.
    """
    alerts = notification.firing or notification.alerts
    labels = notification.group_labels or notification.common_labels
    grouped = [Matcher(name, value) for name, value in sorted(labels.items())]
    if notification.source != "grafana":
        return tuple(grouped)
    links = [matchers_from_silence_url(a.silence_url) for a in alerts if a.silence_url]
    shared = [m for m in links[0] if all(m in other for other in links[1:])] if links else []
    shared = [m for m in shared if m.name != RULE_UID]
    matchers = [*shared, *(m for m in grouped if m.name not in {s.name for s in shared})]
    rule = _rule_uid(alerts, links)
    return tuple([Matcher(RULE_UID, rule)] if rule else []) + tuple(matchers)


def _rule_uid(alerts: Iterable[Alert], links: list[tuple[Matcher, ...]]) -> str | None:
    """The one rule every alert of the group comes from, or None when they differ or none say."""
    from_links = {m.value for link in links for m in link if m.name == RULE_UID and m.is_equal}
    from_alerts = {match[1] for a in alerts if (match := _RULE_LINK.search(a.generator_url))}
    uids = from_links or from_alerts
    return next(iter(uids)) if len(uids) == 1 else None
