"""Grafana and Alertmanager webhook payloads, one path for both: tolerant where senders
legitimately differ (unknown keys, Go's nulls and zero time, numbers where strings are expected),
strict where a mistake would open a wrong incident. A `PayloadError` names the field, so an
operator fixes their contact point from the 400."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AliasChoices,
    AliasGenerator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from bot.domain.alerting.label_regex import label_regex
from bot.domain.alerting.value_string import Series, finite, parse_value_string

Source = Literal["grafana", "alertmanager"]

MAX_ALERTS = 1000
EXPECTED_VERSION: dict[str, str] = {"grafana": "1", "alertmanager": "4"}
ENDPOINT: dict[Source, str] = {"grafana": "/alerts/grafana", "alertmanager": "/alerts/alertmanager"}
SENDER: dict[str, str] = {"grafana": "a Grafana", "alertmanager": "an Alertmanager"}


class PayloadError(ValueError):
    pass


def _json_type(value: object) -> str:
    kinds = (
        *((type(None), "null"), (bool, "a boolean"), (int | float, "a number")),
        *((str, "a string"), (list, "a list"), (dict, "an object")),
    )
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def _string_map(value: object) -> dict[str, str]:
    """Null is Go's nil map; templated values may be numbers."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"must be an object, got {_json_type(value)}")
    return {
        str(k): v
        if isinstance(v, str)
        else json.dumps(v, separators=(",", ":"), ensure_ascii=False)
        for k, v in value.items()
        if v is not None
    }


def _text(value: object) -> str:
    if value is None:  # Go's empty string
        return ""
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {_json_type(value)}")
    return value


def _org(value: object) -> str:
    """Grafana's organization ID, a number: as JavaScript's `String()` writes it."""
    ok = isinstance(value, (int, str)) and not isinstance(value, bool)
    return str(value) if ok else ""


def _url(value: object) -> str:
    """Grafana's Test button double-escapes `&` in URLs as the six characters `\\u0026`."""
    return _text(value).replace("\\u0026", "&")


def _count(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"must be an integer, got {_json_type(value)}")


def _values(value: object) -> dict[str, float]:
    """Grafana's named expression results; a null (no data) is dropped."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"must be an object or null, got {_json_type(value)}")
    return {str(k): n for k, v in value.items() if (n := finite(v)) is not None}


_RFC3339 = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def parse_timestamp(value: object) -> datetime | None:
    """Go's zero time (year 1) and empty give None. Checked by hand: `fromisoformat` refuses
    Go's nanoseconds and accepts forms RFC 3339 does not."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC)
    shown = repr(value)[:60]
    match = _RFC3339.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"must be an RFC 3339 timestamp like 2025-09-16T17:12:20Z, got {shown}")
    if match[1].startswith("0001-"):
        return None
    fraction = (match[4] or "0")[:6].ljust(6, "0")  # Go sends nanoseconds
    iso = f"{match[1]}T{match[2]}:{min(int(match[3]), 59):02d}.{fraction}{match[5].upper()}"
    try:
        return datetime.fromisoformat(iso).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"must be a valid RFC 3339 timestamp, got {shown} ({exc})") from None


def time_of(value: object) -> datetime | None:
    """A time in a backend's or a sender's JSON as UTC; None when it is not one."""
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


StringMap = Annotated[dict[str, str], BeforeValidator(_string_map)]
Text = Annotated[str, BeforeValidator(_text)]
Url = Annotated[str, BeforeValidator(_url)]
Timestamp = Annotated[datetime | None, BeforeValidator(parse_timestamp)]
_MODEL = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class Alert(BaseModel):
    model_config = _MODEL

    status: Literal["firing", "resolved"]
    labels: StringMap = Field(default_factory=dict)
    annotations: StringMap = Field(default_factory=dict)
    starts_at: Timestamp = Field(None, alias="startsAt")
    ends_at: Timestamp = Field(None, alias="endsAt")
    generator_url: Url = Field("", alias="generatorURL")
    fingerprint: Text = ""
    silence_url: Url = Field("", alias="silenceURL")
    dashboard_url: Url = Field("", alias="dashboardURL")
    panel_url: Url = Field("", alias="panelURL")
    values: Annotated[dict[str, float], BeforeValidator(_values)] = Field(default_factory=dict)
    series: list[Series] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_value_string(cls, data: Any) -> Any:
        """`series` from valueString, and `values` from it where Grafana sent null (the Test
        button and no-data alerts do)."""
        if not isinstance(data, dict) or "valueString" not in data:
            return data
        series = parse_value_string(data["valueString"])
        derived = dict(data, series=series)
        if data.get("values") is None:
            unlabeled = {s.name: s.value for s in series if not s.labels and s.value is not None}
            derived["values"] = unlabeled
        return derived


class Notification(BaseModel):
    model_config = _MODEL

    source: Source
    version: str
    receiver: Text = ""
    status: Literal["firing", "resolved"]
    group_key: str = Field(alias="groupKey")
    group_labels: StringMap = Field(default_factory=dict, alias="groupLabels")
    common_labels: StringMap = Field(default_factory=dict, alias="commonLabels")
    common_annotations: StringMap = Field(default_factory=dict, alias="commonAnnotations")
    external_url: Url = Field("", alias="externalURL")
    title: Text = ""
    message: Text = ""
    truncated_alerts: Annotated[int, BeforeValidator(_count)] = Field(0, alias="truncatedAlerts")
    org_id: Annotated[str, BeforeValidator(_org)] = Field("", alias="orgId")
    alerts: tuple[Alert, ...]

    @property
    def is_test(self) -> bool:
        """Grafana's Test button sends `test-<fingerprint>-<unix time>`: show it as a test."""
        return self.group_key.startswith("test-")

    @property
    def firing(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.status == "firing")


def _check_envelope(source: Source, data: object) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise PayloadError(f"body: must be a JSON object, got {_json_type(data)}")
    version, expected = data.get("version"), EXPECTED_VERSION[source]
    if version != expected:
        other: Source = "alertmanager" if source == "grafana" else "grafana"
        hint = f"{SENDER[other]} payload (version {EXPECTED_VERSION[other]!r}) goes to"
        if version == EXPECTED_VERSION[other]:
            hint = f"this looks like {SENDER[other]} payload: send it to"
        raise PayloadError(
            f"version: expected {expected!r} for {SENDER[source]} webhook, got {version!r}; "
            f"{hint} {ENDPOINT[other]}"
        )
    group_key = data.get("groupKey")
    if not isinstance(group_key, str) or not group_key:
        raise PayloadError(f"groupKey: must be a non-empty string, got {_json_type(group_key)}")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError(f"alerts: must be a list, got {_json_type(alerts)}")
    if not alerts:
        raise PayloadError("alerts: must not be empty")
    if len(alerts) > MAX_ALERTS:
        raise PayloadError(f"alerts: at most {MAX_ALERTS} per notification, got {len(alerts)}")
    return data


_EXPECTED_TYPE = {"model_type": "an object", "dict_type": "an object", "string_type": "a string"}


def _reason(error: Any) -> str:
    """Pydantic's messages as "must ...", as every PayloadError reads."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return f"must be {ctx.get('expected', 'one of the allowed values')}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind in _EXPECTED_TYPE:
        return f"must be {_EXPECTED_TYPE[kind]}, got {_json_type(error.get('input'))}"
    return str(error["msg"])


def parse_notification(source: Source, data: object) -> Notification:
    """PayloadError names the bad field as its author reads it ("alerts[0].status")."""
    payload = _check_envelope(source, data)
    try:
        return Notification.model_validate({**payload, "source": source})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        path = ""
        for part in first["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        raise PayloadError(f"{path or 'body'}: {_reason(first)}") from None


def parse_json_body(body: bytes, *, max_depth: int = 32) -> object:
    """orjson (strict UTF-8, no NaN, no lone surrogates) nested at most `max_depth` levels, so a
    hostile body gets a 400 and never a RecursionError."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(
            f"body is not valid JSON: not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # orjson's own bound (1024) is past ours
            raise PayloadError(f"JSON nested deeper than {max_depth} levels") from None
        raise PayloadError(f"body is not valid JSON: {exc}") from None
    # Walked level by level, so depth costs no recursion.
    level = [data] if isinstance(data, dict | list) else []
    for _ in range(max_depth):
        children = (item.values() if isinstance(item, dict) else item for item in level)
        level = [v for values in children for v in values if isinstance(v, dict | list)]
    if level:
        raise PayloadError(f"JSON nested deeper than {max_depth} levels")
    return data


def max_known(a: float | None, b: float | None) -> float | None:
    """None is "not reported", not zero: it neither erases a known number nor lowers a maximum."""
    if a is None:
        return b
    return a if b is None else max(a, b)


def first_known(*values: float | None) -> float | None:
    return next((value for value in values if value is not None), None)


def stored_short(short: str) -> ConfigDict:
    """Models kept per runner type in every incident are stored under short keys (`by_alias`) and
    read under either name: long names would be a fifth of its Redis. `short`: "field=key …"."""
    keys = dict(pair.split("=") for pair in short.split())
    return ConfigDict(
        alias_generator=AliasGenerator(
            validation_alias=lambda name: AliasChoices(name, keys.get(name, name)),
            serialization_alias=lambda name: keys.get(name, name),
        )
    )


@dataclass(frozen=True)
class RunnerQueue:
    __pydantic_config__ = stored_short(
        "queued=q longest_wait_mins=w wait_over=w+ wait_of_starts=ws"
    )
    queued: float | None = None
    longest_wait_mins: float | None = None
    wait_over: bool | None = None
    wait_of_starts: bool | None = None


@dataclass(frozen=True)
class QueueNumbers:
    __pydantic_config__ = stored_short(
        "max_queue_time_mins=wait max_queue_size=size queue_time_threshold=wait_limit "
        "queue_size_threshold=size_limit queue_time_over=wait_over queue_size_over=size_over "
        "slowest_start_mins=start"
    )

    # The oldest queued job's age: what "longest wait" names, an alert's queue time.
    max_queue_time_mins: float | None = None
    max_queue_size: float | None = None
    queue_time_threshold: float | None = None
    queue_size_threshold: float | None = None
    # Where the rule says whether each is over instead of its threshold.
    queue_time_over: bool | None = None
    queue_size_over: bool | None = None
    # The slowest recent start (ARC's startup histogram), a reading's: its own measure and row.
    slowest_start_mins: float | None = None


@dataclass(frozen=True)
class Matcher:
    name: str
    value: str
    is_equal: bool = True
    is_regex: bool = False

    @property
    def operator(self) -> str:
        return next(op for op, kind in OPERATORS.items() if kind == (self.is_equal, self.is_regex))

    def holds(self, value: str) -> bool:
        """Whether it selects a label of `value` ("" for a label absent), as Alertmanager's
        `pkg/labels.Matcher.Matches` decides: a regex anchored, a negation its opposite."""
        if self.is_regex:
            try:
                found = label_regex(self.value).search(value) is not None
            except (ValueError, UnicodeEncodeError):  # a lone surrogate: not a UTF-8 label
                found = False
        else:
            found = value == self.value
        return found if self.is_equal else not found


# A matcher's operator as (is_equal, is_regex).
OPERATORS = {"=": (True, False), "!=": (False, False), "=~": (True, True), "!~": (False, True)}


@dataclass(frozen=True)
class AlertFacts:
    title: str
    priority: str | None
    team: str | None
    summary: str
    description: str
    runbook_url: str
    alert_url: str
    silence_url: str
    dashboard_url: str
    panel_url: str
    numbers: QueueNumbers
    other_values: dict[str, float] = field(default_factory=dict)
    runner_types: dict[str, RunnerQueue] = field(default_factory=dict)
    firing_count: int = 0
    silence_matchers: tuple[Matcher, ...] = ()
    truncated: tuple[str, ...] = ()  # what the caps left out, in words the incident shows
    labels: dict[str, str] = field(default_factory=dict)  # what `SLACK_ROUTES` matches
    # How pytorch/alerting-infra names the alert (`alert_issue`).
    rule: str = ""
    pipeline_key: str = ""
