"""A notification reduced to what an incident needs: its facts, each read from every place senders
and real rules put it (`Priority`, `severity`, `TEAM`, `Teams`), and each alert's identity, which
tells a stale firing from a re-fire."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Literal, TypeVar
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel

from bot.domain.alerting.alerts import (
    OPERATORS,
    Alert,
    AlertFacts,
    Matcher,
    Notification,
    QueueNumbers,
    RunnerQueue,
    Source,
    first_known,
    max_known,
)
from bot.domain.alerting.routes import matcher_pieces
from bot.domain.alerting.value_string import finite
from bot.domain.reading.runner_names import RunnerNames
from bot.domain.shortened import shortened


class Delivery(BaseModel, frozen=True):
    source: Source
    group_key: str
    status: Literal["firing", "resolved"]
    is_test: bool = False
    facts: AlertFacts
    started_at: datetime | None = None  # the firing alerts' earliest startsAt
    # Alert instances ("<fingerprint>@<startsAt>") by status.
    firing: tuple[str, ...] = ()
    resolved: tuple[str, ...] = ()

    @property
    def group_hash(self) -> str:
        return group_hash(self.source, self.group_key)


def group_hash(source: str, group_key: str) -> str:
    return hashlib.sha256(f"{source}\0{group_key}".encode()).hexdigest()[:24]


def instance_of(alert: Alert) -> str:
    """One firing of one alert: a re-fire gets a new startsAt, a lagging HA peer or a retry
    repeats the old one."""
    labels = "\0".join(f"{k}\0{v}" for k, v in sorted(alert.labels.items()))
    fingerprint = alert.fingerprint or hashlib.sha256(labels.encode()).hexdigest()[:16]
    started = alert.starts_at.isoformat() if alert.starts_at else ""
    return f"{fingerprint[:64]}@{started}"


def named(delivery: Delivery, names: RunnerNames) -> Delivery:
    """Runner types as the readings name them (an alert on ARC's metrics names a scale set)."""
    types = delivery.facts.runner_types
    renamed = names.renamed(types)
    if list(renamed) == list(types):
        return delivery
    return delivery.model_copy(update={"facts": replace(delivery.facts, runner_types=renamed)})


def delivery_of(notification: Notification) -> Delivery:
    starts = [a.starts_at for a in notification.firing if a.starts_at is not None]
    return Delivery(
        source=notification.source,
        group_key=notification.group_key,
        status=notification.status,
        is_test=notification.is_test,
        facts=facts_of(notification),
        started_at=min(starts) if starts else None,
        firing=tuple(instance_of(a) for a in notification.firing),
        resolved=tuple(instance_of(a) for a in notification.alerts if a.status == "resolved"),
    )


T = TypeVar("T")

QUEUE_TIME_NAMES = ("max_queue_time_mins", "queue_time_mins")
QUEUE_SIZE_NAMES = ("max_queue_size", "queued_jobs", "queue_size")
THRESHOLD_NAMES = ("queue_time_threshold", "queue_size_threshold")
BREACHED = "threshold_breached"  # the OR of the rule's conditions, where they are conditions
QUEUE_NAMES = frozenset((*QUEUE_TIME_NAMES, *QUEUE_SIZE_NAMES, *THRESHOLD_NAMES))
RUNNER_KEYS = ("runner_type", "runner_label", "runner")
NO_DATA_SUFFIX = {"DatasourceNoData": " (no data)", "DatasourceError": " (datasource error)"}

# Caps on what one notification puts into an incident, read on every tick: a 0.8 MB silence link
# must cost what a normal one does. What a cap leaves out is shown on the root.
MAX_URL = 2000
MAX_MATCHERS = 64
MAX_LABELS, MAX_LABEL_NAME, MAX_LABEL_VALUE = 64, 200, 1000
MAX_RUNNER_TYPES = 100
MAX_OTHER_VALUES = 20
MAX_TEXT = {"title": 300, "priority": 40, "team": 200, "summary": 3000, "description": 3000}


PIPELINE_SOURCE = "grafana"  # every webhook its collector takes is read by its Grafana transformer


def _pipeline(notification: Notification) -> tuple[str, str]:
    """How pytorch/alerting-infra names the alert, so that queuepilot finds the issue it opened:
    titled by the first alert's `rulename`, else `alertname`, else the group's (`extractTitle`);
    keyed by the SHA-256 of its fingerprint's inputs, keys sorted, empty ones left out
    (src/fingerprint.ts). No key without a title: it refuses such an alert."""
    first = notification.alerts[0]
    named = first.labels.get("rulename") or first.labels.get("alertname")
    rule = (named or notification.group_labels.get("alertname") or "").strip()[: MAX_TEXT["title"]]
    if not rule:
        return "", ""
    inputs = {"source": PIPELINE_SOURCE, "title": rule.lower(), "account_id": notification.org_id}
    inputs["alarm_id"] = first.fingerprint
    canonical = "|".join(f"{key}={inputs[key]}" for key in sorted(inputs) if inputs[key])
    return rule, hashlib.sha256(canonical.encode()).hexdigest()


def facts_of(notification: Notification) -> AlertFacts:
    firing = notification.firing
    primary = (firing or notification.alerts)[0]  # the alert that speaks for the group
    notes: list[str] = []
    text = _texts(notification, primary, notes)
    urls = _links(notification, primary, notes)
    if notification.truncated_alerts:
        notes.append(f"the sender left out {notification.truncated_alerts} alerts")
    worst_first = sorted(
        runner_types(firing).items(),
        key=lambda item: (-(item[1].longest_wait_mins or 0), -(item[1].queued or 0)),
    )
    others = _capped(other_values(firing), MAX_OTHER_VALUES, "values", notes)
    types = _capped(dict(worst_first), MAX_RUNNER_TYPES, "runner types", notes)
    matchers = group_matchers(notification)
    if len(matchers) > MAX_MATCHERS:
        notes.append(f"silence link has {len(matchers):,} matchers, {MAX_MATCHERS} kept")
    labels = {**notification.common_labels, **notification.group_labels}
    rule, key = _pipeline(notification)
    return AlertFacts(
        **text,
        **{f"{name}_url": url for name, url in urls.items()},
        numbers=queue_numbers(firing),
        other_values=others,
        runner_types=types,
        firing_count=len(firing),
        silence_matchers=matchers[:MAX_MATCHERS],
        truncated=tuple(notes),
        rule=rule,
        pipeline_key=key,
        # A label past the caps is left out, so a route naming it falls through to the next.
        labels={
            name: value
            for name, value in list(labels.items())[:MAX_LABELS]
            if len(name) <= MAX_LABEL_NAME and len(value) <= MAX_LABEL_VALUE
        },
    )


def _texts(notification: Notification, primary: Alert, notes: list[str]) -> dict[str, str | None]:
    """Each cut to its cap. The common annotations hold what all alerts agree on; the primary
    alert's fill the gaps. Priority and team are labels in Alertmanager rules."""
    annotations = (notification.common_annotations, primary.annotations)
    labelled = (annotations[0], notification.common_labels, annotations[1], primary.labels)
    priority = _first_value(labelled, ("priority", "severity")) or ""
    text = {
        "title": _title(notification, primary),
        "priority": f"P{priority}" if priority.isdigit() else priority,  # PyTorch's rules: 1
        "team": _first_value(labelled, ("team", "teams")) or "",
        "summary": _first_value(annotations, ("summary",)) or "",
        "description": _first_value(annotations, ("description",)) or "",
    }
    for name, value in text.items():
        if len(value) > MAX_TEXT[name]:
            notes.append(f"{name} cut to {MAX_TEXT[name]} of {len(value):,} characters")
            text[name] = shortened(value, MAX_TEXT[name])
    return {**text, "priority": text["priority"] or None, "team": text["team"] or None}


def _links(notification: Notification, primary: Alert, notes: list[str]) -> dict[str, str]:
    """Each link from the first firing alert that has it, else from any; past `MAX_URL` none."""
    alerts = (*notification.firing, *notification.alerts)
    annotations = (notification.common_annotations, primary.annotations)
    urls = {
        "runbook": _first_value(annotations, ("runbook_url", "runbook")) or "",
        **{
            name: next((url for a in alerts if (url := getattr(a, f"{attr}_url"))), "")
            for name, attr in _URLS.items()
        },
    }
    for name, url in urls.items():
        if len(url) > MAX_URL:
            notes.append(f"{name} link dropped: {len(url):,} characters (at most {MAX_URL:,})")
            urls[name] = ""
    return urls


_URLS = {"alert": "generator", "silence": "silence", "dashboard": "dashboard", "panel": "panel"}


def _capped(values: dict[str, T], limit: int, what: str, notes: list[str]) -> dict[str, T]:
    if len(values) <= limit:
        return values
    notes.append(f"{len(values):,} {what}, {limit} kept")
    return dict(list(values.items())[:limit])


def _first_value(sources: Iterable[Mapping[str, str]], keys: tuple[str, ...]) -> str | None:
    """First non-blank value whose key matches case-insensitively (rules write `Priority`)."""
    found = (v.strip() for source in sources for k, v in source.items() if k.lower() in keys)
    return next((value for value in found if value), None)


def _title(notification: Notification, primary: Alert) -> str:
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
    sources = (notification.group_labels, notification.common_labels, primary.labels)
    if name in NO_DATA_SUFFIX and (rule := _first_value(sources, ("rulename",))):
        name = rule + NO_DATA_SUFFIX[name]
    return name + suffix


NumberSources = tuple[dict[str, float | str], ...]


def _number_sources(alert: Alert) -> NumberSources:
    """Grafana's values, then annotations, then labels, keyed case-insensitively."""
    sources: tuple[Mapping[str, float | str], ...] = (alert.values, alert.annotations, alert.labels)
    return tuple({k.lower(): v for k, v in source.items()} for source in sources)


def _alert_number(sources: NumberSources, names: tuple[str, ...]) -> float | None:
    """One named number of an alert; Alertmanager carries numbers as strings. The first found
    ends the search: an alert is read for a dozen names in three places each."""
    found = (
        finite(v) for by_key in sources for name in names if (v := by_key.get(name)) is not None
    )
    return next((number for number in found if number is not None), None)


def _alert_queue(alert: Alert, sources: NumberSources) -> RunnerQueue:
    """The queue size and wait one alert reports; else the largest of its valueString series."""
    found = []
    for names in (QUEUE_SIZE_NAMES, QUEUE_TIME_NAMES):
        series = (s.value for s in alert.series if s.name.lower() in names and s.value is not None)
        found.append(first_known(_alert_number(sources, names), max(series, default=None)))
    return RunnerQueue(queued=found[0], longest_wait_mins=found[1])


def queue_numbers(firing: Iterable[Alert]) -> QueueNumbers:
    """Worst queue across firing alerts; thresholds from the first alert that states them.
    PyTorch's rule names its two conditions `queue_time_threshold` and `queue_size_threshold`
    (`$B > 60`: 1 or 0) and their OR `threshold_breached`: there they say whether each number is
    over, not where the threshold is."""
    worst = RunnerQueue()
    thresholds: dict[str, float | None] = dict.fromkeys(THRESHOLD_NAMES)
    over: dict[str, bool | None] = dict.fromkeys(THRESHOLD_NAMES)
    for alert in firing:
        sources = _number_sources(alert)
        worst = _worse(worst, _alert_queue(alert, sources))
        stated = {name: _alert_number(sources, (name,)) for name in THRESHOLD_NAMES}
        known = {name: value for name, value in stated.items() if value is not None}
        flagged = _alert_number(sources, (BREACHED,)) is not None
        if flagged and known and set(known.values()) <= {0, 1}:
            over |= {name: bool(over[name]) or value == 1 for name, value in known.items()}
        else:
            thresholds = {
                name: first_known(found, stated[name]) for name, found in thresholds.items()
            }
    time, size = THRESHOLD_NAMES  # named as `QueueNumbers` names its thresholds
    return QueueNumbers(
        max_queue_time_mins=worst.longest_wait_mins,
        max_queue_size=worst.queued,
        **thresholds,
        queue_time_over=over[time],
        queue_size_over=over[size],
    )


def _worse(a: RunnerQueue, b: RunnerQueue) -> RunnerQueue:
    return RunnerQueue(
        max_known(a.queued, b.queued), max_known(a.longest_wait_mins, b.longest_wait_mins)
    )


def other_values(firing: Iterable[Alert]) -> dict[str, float]:
    """Named results that are not queue numbers; the first alert's wins, so nothing flickers."""
    found: dict[str, float] = {}
    for alert in firing:
        for name, value in alert.values.items():
            if name.lower() not in QUEUE_NAMES:
                found.setdefault(name, value)
    return found


def runner_types(firing: Iterable[Alert]) -> dict[str, RunnerQueue]:
    """Per type, the worse of each number where two name one: from alerts labelled with a type
    (Alertmanager) and from valueString series labelled with one (Grafana)."""
    queues: dict[str, RunnerQueue] = {}

    def merge(runner: str | None, queue: RunnerQueue) -> None:
        if runner:
            queues[runner] = _worse(queues.get(runner, RunnerQueue()), queue)

    for alert in firing:
        if runner := _first_value((alert.labels,), RUNNER_KEYS):
            merge(runner, _alert_queue(alert, _number_sources(alert)))
        for series in alert.series:
            if series.value is None:
                continue
            runner = _first_value((series.labels,), RUNNER_KEYS)
            name = series.name.lower()
            if name in QUEUE_SIZE_NAMES:
                merge(runner, RunnerQueue(queued=series.value))
            elif name in QUEUE_TIME_NAMES:
                merge(runner, RunnerQueue(longest_wait_mins=series.value))
    return queues


# A label name holds no `=`, `!` or `~`, so the first of them starts the operator: one pass with
# nothing to backtrack into (a silence link with 2,000 spaces must not hold the event loop).
_OPERATOR = re.compile(r"[^=!~]*+(=~|!~|!=|=)")


def parse_matcher(text: str) -> Matcher | None:
    """`name=value`, `!=`, `=~`, `!~`, spaces ignored; anything else is skipped, not guessed at."""
    operator = _OPERATOR.match(text)
    name = text[: operator.start(1)].strip() if operator else ""
    if not operator or not name:
        return None
    is_equal, is_regex = OPERATORS[operator[1]]
    value = text[operator.end() :].strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':  # newer syntax quotes values
        value = re.sub(r"\\(.)", r"\1", value[1:-1])
    return Matcher(name, value, is_equal, is_regex)


def matchers_from_silence_url(url: str) -> tuple[Matcher, ...]:
    """Repeated `matcher=` (current Grafana), a comma list in `matchers=` (older Grafana), or
    Alertmanager UI's `filter={...}` in the fragment: exactly what Grafana would silence."""
    if not url:
        return ()
    try:
        parts = urlsplit(url.replace("\\u0026", "&"))
    except ValueError:  # "https://[host…": urlsplit refuses an unclosed IPv6 bracket
        return ()
    expressions: list[str] = []
    for query in (parts.query, parts.fragment.partition("?")[2]):
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == "matcher":
                expressions.append(value)
            elif key in ("matchers", "filter"):
                expressions.extend(p for p in matcher_pieces(value.strip()) if p.strip())
    matchers = (parse_matcher(e) for e in expressions)
    return tuple(m for m in matchers if m is not None)


RULE_UID = "__alert_rule_uid__"
_RULE_LINK = re.compile(r"/alerting/grafana/([^/?#]+)/")  # Grafana's `/alerting/grafana/<uid>/view`


def group_matchers(notification: Notification) -> tuple[Matcher, ...]:
    """For a silence made from Slack. Grafana: the rule every alert shares, the matchers every
    silence link carries, and the group labels. Alertmanager: the group labels (what `group_by`
    grouped on), else the common labels."""
    alerts = notification.firing or notification.alerts
    labels = notification.group_labels or notification.common_labels
    grouped = [Matcher(name, value) for name, value in sorted(labels.items())]
    if notification.source != "grafana":
        return tuple(grouped)
    links = [matchers_from_silence_url(a.silence_url) for a in alerts if a.silence_url]
    shared = [m for m in links[0] if all(m in other for other in links[1:])] if links else []
    shared = [m for m in shared if m.name != RULE_UID]
    matchers = [*shared, *(m for m in grouped if m.name not in {s.name for s in shared})]
    from_links = {m.value for link in links for m in link if m.name == RULE_UID and m.is_equal}
    from_alerts = {match[1] for a in alerts if (match := _RULE_LINK.search(a.generator_url))}
    uids = from_links or from_alerts
    rule = next(iter(uids)) if len(uids) == 1 else ""
    return (*([Matcher(RULE_UID, rule)] if rule else []), *matchers)
