"""Alert payload parsing and incident facts, against real Grafana and Alertmanager payloads."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

import pytest

from bot.domain.alerting.alerts import (
    Matcher,
    Notification,
    PayloadError,
    QueueNumbers,
    Series,
    Source,
    max_known,
    parse_json_body,
    parse_notification,
    parse_value_string,
)
from bot.domain.alerting.delivery import (
    MAX_MATCHERS,
    facts_of,
    matchers_from_silence_url,
    parse_matcher,
)
from tests.support.payloads import FIXTURES

ALL_FIXTURES = sorted(FIXTURES.glob("*/*.json"))


def load(name: str) -> Notification:
    """Parse a fixture under the source its folder names, as the webhook handler would."""
    path = FIXTURES / name
    return parse_notification(cast(Source, path.parent.name), parse_json_body(path.read_bytes()))


def raw(name: str) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads((FIXTURES / name).read_text()))


def problem(source: Source, data: object) -> str:
    with pytest.raises(PayloadError) as caught:
        parse_notification(source, data)
    return str(caught.value)


def test_fixtures_are_present() -> None:
    assert {p.parent.name for p in ALL_FIXTURES} == {"grafana", "alertmanager"}
    assert len(ALL_FIXTURES) >= 10


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_parses_under_its_source(path: Path) -> None:
    notification = load(f"{path.parent.name}/{path.name}")
    assert notification.source == path.parent.name
    assert notification.alerts and notification.group_key
    for alert in notification.alerts:
        for moment in (alert.starts_at, alert.ends_at):
            assert moment is None or moment.tzinfo == UTC
        assert "\\u0026" not in alert.silence_url + alert.generator_url
    facts = facts_of(notification)
    assert facts.title and facts.firing_count == len(notification.firing)


def test_queue_alert_firing() -> None:
    notification = load("grafana/queue-alert-firing.json")
    facts = facts_of(notification)
    assert not notification.is_test
    assert facts.title == "Jobs queueing in autoscaled machines"
    assert facts.priority == "P2"
    assert facts.team == "pytorch-dev-infra"
    # PyTorch's rule: `queue_time_threshold` and `queue_size_threshold` are its conditions
    # (1: crossed), `threshold_breached` their OR; where the thresholds are, it does not say.
    assert facts.numbers == QueueNumbers(
        max_queue_time_mins=114, max_queue_size=14, queue_time_over=True, queue_size_over=False
    )
    assert facts.other_values == {"threshold_breached": 1}
    assert facts.runbook_url == "https://hud.pytorch.org/metrics"
    assert facts.summary == "Jobs are queueing in the autoscaled machines"
    assert facts.alert_url == (
        "https://pytorchci.grafana.net/alerting/grafana/dez2aomgvru2oe/view?orgId=1"
    )
    assert facts.silence_matchers == (
        Matcher("__alert_rule_uid__", "dez2aomgvru2oe"),
        Matcher("type", "alerting-infra"),
        Matcher("alertname", "Jobs queueing in autoscaled machines"),
        Matcher("grafana_folder", "Dev Infra"),
    )
    assert facts.firing_count == len(notification.alerts) == 1


def test_queue_alert_resolved_ignores_zeroed_numbers() -> None:
    notification = load("grafana/queue-alert-resolved.json")
    facts = facts_of(notification)
    assert facts.numbers == QueueNumbers()
    assert facts.other_values == {}
    assert (facts.firing_count, len(notification.alerts)) == (0, 1)


def test_alertmanager_firing_runner_type() -> None:
    notification = load("alertmanager/runner-queue-am-00-firing.json")
    facts = facts_of(notification)
    assert notification.version == "4"
    assert facts.priority == "P2"
    assert facts.title == "RunnerQueueTimeHigh"
    assert set(facts.runner_types) == {"linux.g5.4xlarge.nvidia.gpu"}
    queue = facts.runner_types["linux.g5.4xlarge.nvidia.gpu"]
    assert (queue.queued, queue.longest_wait_mins) == (14, 114)
    assert facts.numbers.max_queue_time_mins == 114 and facts.numbers.max_queue_size == 14
    assert notification.alerts[0].ends_at is None


def test_alertmanager_resolved() -> None:
    notification = load("alertmanager/runner-queue-am-03-resolved.json")
    facts = facts_of(notification)
    assert notification.status == "resolved"
    assert facts.firing_count == 0 and len(notification.alerts) == 2
    assert facts.numbers == QueueNumbers()
    assert facts.runner_types == {}
    assert notification.alerts[0].ends_at == datetime(2026, 11, 22, 1, 28, 2, tzinfo=UTC)


def test_grafana_test_button_notification() -> None:
    notification = load("grafana/test-notification.json")
    alert = notification.alerts[0]
    assert notification.is_test
    assert "&matcher=alertname%3DTestAlert&matcher=instance%3DGrafana" in alert.silence_url
    assert alert.series == [Series(name="foo", labels={"instance": "bar"}, value=10)]
    assert alert.values == {}  # values: null and the only series is labelled
    assert alert.generator_url == ""
    assert alert.starts_at == datetime(2025, 9, 16, 17, 11, 19, 283071, tzinfo=UTC)
    assert facts_of(notification).silence_matchers == (
        Matcher("alertname", "TestAlert"),
        Matcher("instance", "Grafana"),
    )


def test_docs_example_two_alerts() -> None:
    notification = load("grafana/docs-example-two-alerts.json")
    facts = facts_of(notification)
    assert len(notification.alerts) == 2
    assert facts.title == "High memory usage (+1 more)"
    assert facts.rule == "High memory usage"  # alerting-infra's title: the first alert's name
    assert facts.other_values == {"B": pytest.approx(44.23943737541908), "C": 1}
    assert facts.team == "blue"
    assert facts.priority is None
    # Two rules in one group: a silence of the group takes what both alerts' links share.
    assert facts.silence_matchers == (Matcher("team", "blue"),)
    assert notification.alerts[0].starts_at == datetime(2021, 10, 12, 7, 51, 3, 157076, tzinfo=UTC)


def test_datasource_nodata_is_named_by_its_rule() -> None:
    notification = load("grafana/datasource-nodata-firing.json")
    facts = facts_of(notification)
    assert facts.title == "viable/strict is broken (no data)"
    assert facts.rule == "viable/strict is broken"
    assert facts.priority == "P1"
    assert notification.alerts[0].values == {} and notification.alerts[0].series == []
    assert facts.silence_matchers[0] == Matcher("__alert_rule_uid__", "eewi8oa4ccef4e")
    assert Matcher("rulename", "viable/strict is broken") in facts.silence_matchers


def test_the_pipelines_key_is_alerting_infras_fingerprint() -> None:
    """alerting-infra's `generateFingerprint` for this, its own test payload, run under Node."""
    facts = facts_of(load("grafana/scale-up-failure-firing.json"))
    assert facts.rule == "Runners Scale Up Failure"
    assert facts.pipeline_key == "86747880faccc4a3474aa9fc815b3f50e3d4310fbb5ed052bce2062c81b63e83"


def test_scale_up_failure_pair() -> None:
    firing = load("grafana/scale-up-failure-firing.json")
    resolved = load("grafana/scale-up-failure-resolved.json")
    facts = facts_of(firing)
    assert facts.title == "Runners Scale Up Failure"
    assert facts.priority == "P1" and facts.team == "dev-infra"
    assert facts.silence_url == ""
    assert facts.silence_matchers == (Matcher("alertname", "Runners Scale Up Failure"),)
    assert facts.dashboard_url == ""
    assert firing.alerts[0].ends_at is None
    assert resolved.alerts[0].ends_at == datetime(2025, 9, 3, 19, 25, 1, tzinfo=UTC)


def test_pytorch_toggling_values_and_team_any_case() -> None:
    facts = facts_of(load("grafana/pytorch-toggling-firing.json"))
    assert facts.team == "pytorch-dev-infra"  # annotation key "TEAM"
    assert facts.other_values == {"C": 1, "reducer": 1}
    assert facts.priority is None  # "CustomAnnotationPriority" is not a priority key


# --- rules on synthetic payloads ------------------------------------------------------------------


def grafana(**alert: Any) -> dict[str, Any]:
    """A minimal valid Grafana payload with one alert, overridden by keyword."""
    base: dict[str, Any] = {"status": "firing", "labels": {"alertname": "Q"}, "annotations": {}}
    return {
        "version": "1",
        "groupKey": "{}:{}",
        "status": "firing",
        "alerts": [{**base, **alert}],
    }


def test_runner_types_from_labelled_series_and_alerts() -> None:
    value_string = (
        "[ var='max_queue_size' labels={runner_label=linux.2xlarge} value=7 ], "
        "[ var='max_queue_time_mins' labels={runner_label=linux.2xlarge} value=42.5 ], "
        "[ var='max_queue_size' labels={runner_label=linux.4xlarge} value=null ]"
    )
    data = grafana(valueString=value_string, values=None)
    data["alerts"].append(
        {"status": "firing", "labels": {"runner_type": "linux.2xlarge"}, "annotations": {}}
    )
    facts = facts_of(parse_notification("grafana", data))
    queue = facts.runner_types["linux.2xlarge"]
    assert (queue.queued, queue.longest_wait_mins) == (7, 42.5)
    assert "linux.4xlarge" not in facts.runner_types
    assert facts.numbers.max_queue_size == 7  # labelled series still count toward the max


def test_numbers_take_max_across_firing_alerts_and_aliases() -> None:
    data = grafana(annotations={"queued_jobs": "3", "queue_time_mins": "not a number"})
    data["alerts"] += [
        {"status": "firing", "labels": {"queue_size": 9, "queue_time_mins": "12"}},
        {"status": "resolved", "labels": {"max_queue_size": "500"}},
    ]
    numbers = facts_of(parse_notification("grafana", data)).numbers
    assert (numbers.max_queue_size, numbers.max_queue_time_mins) == (9, 12)


def test_priority_and_severity_keys() -> None:
    data = grafana(labels={"alertname": "Q", "Severity": "critical"})
    assert facts_of(parse_notification("grafana", data)).priority == "critical"
    data = grafana(annotations={"priority": "3"})
    assert facts_of(parse_notification("grafana", data)).priority == "P3"


def test_label_values_are_coerced_to_text() -> None:
    alert = parse_notification(
        "alertmanager", {**grafana(labels={"n": 3, "b": True}), "version": "4"}
    )
    assert alert.alerts[0].labels == {"n": "3", "b": "true"}


def test_value_string_grammar() -> None:
    series = parse_value_string(
        "[ var='A' labels={a=1, b=x y} value=2.5 ], [ var='B' labels={} value=NaN ], "
        "[ metric='m' labels={} value=oops ]"
    )
    assert series == [
        Series(name="A", labels={"a": "1", "b": "x y"}, value=2.5),
        Series(name="B", labels={}, value=None),
        Series(name="m", labels={}, value=None),
    ]
    assert parse_value_string("") == [] and parse_value_string(None) == []


def test_silence_matcher_operators_and_quoting() -> None:
    url = (
        "https://g/alerting/silence/new?matcher=a%21%3Db&matcher=c%3D~x.%2A&matcher=d%21~y"
        "&matchers=e%3D%221%2C2%22%2Cf%3Dg"
    )
    assert matchers_from_silence_url(url) == (
        Matcher("a", "b", is_equal=False),
        Matcher("c", "x.*", is_regex=True),
        Matcher("d", "y", is_equal=False, is_regex=True),
        Matcher("e", "1,2"),
        Matcher("f", "g"),
    )
    assert matchers_from_silence_url("") == ()


def test_a_silence_links_raw_label_value_is_kept_whole() -> None:
    """Grafana writes each label into the link as `name=value`, raw: a quote or a backslash in a
    value is the label's own. Dropping such a matcher would make the silence broader."""
    url = "https://g/alerting/silence/new?" + urlencode(
        [("matcher", 'alertname=Runner "x" queue'), ("matcher", "path=C:\\runners\\n1")]
    )
    assert matchers_from_silence_url(url) == (
        Matcher("alertname", 'Runner "x" queue'),
        Matcher("path", "C:\\runners\\n1"),
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-09-16T17:11:19.283071388Z", datetime(2025, 9, 16, 17, 11, 19, 283071, tzinfo=UTC)),
        ("2021-10-12T09:51:03.157076+02:00", datetime(2021, 10, 12, 7, 51, 3, 157076, tzinfo=UTC)),
        ("2025-09-03T19:10:01.000Z", datetime(2025, 9, 3, 19, 10, 1, tzinfo=UTC)),
        ("2025-01-01T00:30:00-01:30", datetime(2025, 1, 1, 2, 0, tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", None),
    ],
)
def test_timestamps(text: str, expected: datetime | None) -> None:
    assert parse_notification("grafana", grafana(startsAt=text)).alerts[0].starts_at == expected


# --- refusals -------------------------------------------------------------------------------------


def test_wrong_version_on_each_endpoint_points_at_the_other() -> None:
    am = raw("alertmanager/runner-queue-am-00-firing.json")
    message = problem("grafana", am)
    assert message.startswith("version: expected '1'") and "/alerts/alertmanager" in message
    message = problem("alertmanager", raw("grafana/queue-alert-firing.json"))
    assert message.startswith("version: expected '4'") and "/alerts/grafana" in message
    assert problem("grafana", {**am, "version": 1}).startswith("version: expected '1'")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"groupKey": None}, "groupKey: must be a non-empty string"),
        ({"groupKey": ""}, "groupKey: must be a non-empty string"),
        ({"status": "pending"}, "status: must be 'firing' or 'resolved'"),
        ({"alerts": []}, "alerts: must not be empty"),
        ({"alerts": {}}, "alerts: must be a list"),
        ({"alerts": [{"status": "firing"}] * 1001}, "alerts: at most 1000"),
        ({"alerts": ["x"]}, "alerts[0]: must be an object"),
        ({"alerts": [{"status": "ok"}]}, "alerts[0].status: must be 'firing' or 'resolved'"),
        ({"alerts": [{}]}, "alerts[0].status: is required"),
        ({"alerts": [{"status": "firing", "labels": ["a"]}]}, "alerts[0].labels: must be an obj"),
        ({"commonLabels": "x"}, "commonLabels: must be an object"),
        ({"alerts": [{"status": "firing", "startsAt": "yesterday"}]}, "alerts[0].startsAt: must"),
        ({"alerts": [{"status": "firing", "endsAt": "2025-13-01T00:00:00Z"}]}, "alerts[0].endsAt"),
        ({"alerts": [{"status": "firing", "values": [1]}]}, "alerts[0].values: must be an object"),
        ({"truncatedAlerts": "many"}, "truncatedAlerts: must be an integer"),
    ],
)
def test_invalid_fields_are_named(change: dict[str, Any], expected: str) -> None:
    data = {**raw("grafana/queue-alert-firing.json"), **change}
    assert problem("grafana", data).startswith(expected)


def test_missing_group_key() -> None:
    data = raw("grafana/queue-alert-firing.json")
    del data["groupKey"]
    assert problem("grafana", data).startswith("groupKey:")


@pytest.mark.parametrize("data", [[], "x", 1, None])
def test_body_must_be_an_object(data: object) -> None:
    assert problem("grafana", data).startswith("body: must be a JSON object")


def test_deep_nesting_is_refused_without_recursion_error() -> None:
    depth = 100_000
    with pytest.raises(PayloadError, match="nested deeper than 32 levels"):
        parse_json_body(b"[" * depth + b"]" * depth)
    with pytest.raises(PayloadError, match="nested deeper"):
        parse_json_body(b'{"a":' * depth + b"1" + b"}" * depth)
    brackets_in_a_string = json.dumps({"a": "[{" * 40 + '\\"]'}).encode()
    assert parse_json_body(brackets_in_a_string) == {"a": "[{" * 40 + '\\"]'}
    assert parse_json_body(b"[" * 32 + b"]" * 32) is not None


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b'{"a": NaN}', b"{'a': 1}", b'{"a": 1} x', b"1" * 5000],
)
def test_invalid_json(body: bytes) -> None:
    with pytest.raises(PayloadError, match="body is not valid JSON"):
        parse_json_body(body)


def test_non_utf8_body() -> None:
    with pytest.raises(PayloadError, match="not UTF-8"):
        parse_json_body(b'{"a": "\xff\xfe"}')


# --- hostile input: linear time, nothing invented -------------------------------------------------

# Each of these froze the event loop (seconds to minutes) or probes the same backtracking: the
# bound is 100x what they take now and far below the old time, so it flags a blow-up, not noise.
SECONDS_BOUND = 1.0
T = TypeVar("T")


def timed(parse: Callable[[], T]) -> T:
    """Run `parse` and fail if it takes longer than SECONDS_BOUND."""
    start = time.perf_counter()
    result = parse()
    elapsed = time.perf_counter() - start
    assert elapsed < SECONDS_BOUND, f"took {elapsed:.2f}s"
    return result


@pytest.mark.parametrize(
    "value_string",
    [
        "[ var='x' labels={" * 5000,  # 7.7 s at 700 repeats before the fix, roughly cubic
        "[ var='x' metric='" * 5000,  # the same blow-up through the metric group
        "[ var='x' labels={} value=1 " * 5000,  # entries that never close
        "[" * 100_000,
        "'" * 100_000,
        "labels={" * 12_500,
        "[ labels={" + "}value=" * 14_000,  # every `}` could start the tail
    ],
    ids=["var-labels", "var-metric", "unclosed", "brackets", "quotes", "labels", "tails"],
)
def test_hostile_value_string_is_linear(value_string: str) -> None:
    data = grafana(valueString=value_string, values=None)
    alert = timed(lambda: parse_notification("grafana", data)).alerts[0]
    assert alert.series == [] and alert.values == {}


def silence_facts(url: str) -> tuple[Matcher, ...]:
    return facts_of(parse_notification("grafana", grafana(silenceURL=url))).silence_matchers


def test_hostile_silence_urls_are_linear() -> None:
    base = "https://g/alerting/silence/new?"
    assert timed(lambda: silence_facts(base + "matcher=" + "%20" * 5000 + "x")) == ()
    for key in ("matcher", "matchers", "filter"):
        assert timed(lambda key=key: silence_facts(f"{base}{key}=" + "=~!" * 17_000)) == ()
    url = base + "&".join(f"matcher=a{i}%3Db" for i in range(10_000))
    many = timed(lambda: matchers_from_silence_url(url))
    assert len(many) == 10_000 and many[-1] == Matcher("a9999", "b")


def test_an_incident_keeps_a_bounded_number_of_matchers_and_says_it_cut_them() -> None:
    url = "https://g/alerting/silence/new?" + "&".join(f"matcher=a{i}%3Db" for i in range(500))
    facts = facts_of(parse_notification("grafana", grafana(silenceURL=url)))
    assert len(facts.silence_matchers) == MAX_MATCHERS
    assert facts.silence_matchers[0] == Matcher("a0", "b")
    assert "silence link has 500 matchers, 64 kept" in facts.truncated


def test_oversized_text_and_links_are_cut_and_the_cut_is_named() -> None:
    long_url = "https://g/d/" + "x" * 5000
    data = grafana(dashboardURL=long_url, annotations={"summary": "s" * 10_000})
    facts = facts_of(parse_notification("grafana", data))
    assert facts.dashboard_url == ""
    assert len(facts.summary) == 3000
    assert any("dashboard link dropped" in note for note in facts.truncated)
    assert any("summary cut to 3000" in note for note in facts.truncated)


# --- grammar edges the linear parsers keep -------------------------------------------------------


def test_value_string_names_and_label_values_may_hold_delimiters() -> None:
    series = parse_value_string(
        "[ metric='seriesByTag('name=cpu')' labels={} value=3 ], "
        "[ var='A' labels={path=/a}b, q=x]['y} value=1 ]"
    )
    assert series == [
        Series(name="seriesByTag('name=cpu')", value=3),
        Series(name="A", labels={"path": "/a}b", "q": "x]['y"}, value=1),
    ]


def test_value_string_skips_malformed_entries() -> None:
    broken_head = "[ var='A' labls={} value=1 ], [ var='B' labels={} value=2 ]"
    assert parse_value_string(broken_head) == [Series(name="B", value=2)]
    truncated = "[ var='A' labels={} value=1 ], [ var='B' labels={} value=2"
    assert parse_value_string(truncated) == [Series(name="A", value=1)]
    assert parse_value_string("[ var='A' labels={} value=1 } ]") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('  team  =~  "a b"  ', Matcher("team", "a b", is_regex=True)),
        ("a b=c", Matcher("a b", "c")),
        ("a==b", Matcher("a", "=b")),
        ("a=", Matcher("a", "")),
        ("=x", None),
        (" =x", None),  # a blank name matches nothing a silence could use
        ("a~b", None),
        ("a!b", None),
        ("", None),
    ],
)
def test_parse_matcher_edges(text: str, expected: Matcher | None) -> None:
    assert parse_matcher(text) == expected


def test_max_known_treats_none_as_unknown() -> None:
    assert max_known(None, None) is None
    assert max_known(None, 0) == 0 and max_known(-1, None) == -1
    assert max_known(2, 3.5) == 3.5 and max_known(3.5, 2) == 3.5


# --- matchers for a silence made from Slack: this alert group, and only it -------------------


def _matchers(
    name: str, source: Source, edit: Callable[[dict[str, Any]], None] | None = None
) -> list[tuple[str, str]]:
    payload = raw(name)
    if edit is not None:
        edit(payload)
    facts = facts_of(parse_notification(source, payload))
    return [(m.name, m.value) for m in facts.silence_matchers]


def test_alertmanager_silences_by_its_group_labels() -> None:
    assert _matchers("alertmanager/runner-queue-am-00-firing.json", "alertmanager") == [
        ("alertname", "RunnerQueueTimeHigh")
    ]


def test_alertmanager_without_group_labels_silences_by_the_common_labels() -> None:
    def ungrouped(payload: dict[str, Any]) -> None:
        payload["groupLabels"] = {}

    got = _matchers("alertmanager/runner-queue-am-00-firing.json", "alertmanager", ungrouped)
    assert ("runner_type", "linux.g5.4xlarge.nvidia.gpu") in got
    assert ("alertname", "RunnerQueueTimeHigh") in got


def test_grafana_alerts_of_different_rules_share_only_their_common_matchers() -> None:
    got = _matchers("grafana/docs-example-two-alerts.json", "grafana")
    assert got == [("team", "blue")], "no rule matcher when the alerts come from two rules"


def test_grafana_without_a_silence_link_takes_the_rule_from_the_alert_link() -> None:
    def no_link(payload: dict[str, Any]) -> None:
        for alert in payload["alerts"]:
            alert.pop("silenceURL", None)

    got = _matchers("grafana/queue-alert-firing.json", "grafana", no_link)
    assert got[0] == ("__alert_rule_uid__", "dez2aomgvru2oe")
    assert ("alertname", "Jobs queueing in autoscaled machines") in got


def test_grafana_no_data_alert_keeps_every_matcher_of_its_link() -> None:
    got = dict(_matchers("grafana/datasource-nodata-firing.json", "grafana"))
    assert got["__alert_rule_uid__"] == "eewi8oa4ccef4e"
    assert got["datasource_uid"] == "grafanacloud-prom"
    assert got["alertname"] == "DatasourceNoData"


def test_a_silence_url_urlsplit_refuses_gives_no_matchers() -> None:
    """Found by the property test: an unclosed IPv6 bracket made the whole notification fail."""
    from bot.domain.alerting.delivery import matchers_from_silence_url

    url = "https://[lay.grafana.org/alerting/silence/new?matcher=alertname%3DT2"
    assert matchers_from_silence_url(url) == ()


@pytest.mark.parametrize(
    ("values", "numbers"),
    [
        # PyTorch's rule: its conditions (1: crossed) and their OR.
        (
            {"queue_time_threshold": 1, "queue_size_threshold": 0, "threshold_breached": 1},
            QueueNumbers(114, 14, queue_time_over=True, queue_size_over=False),
        ),
        # A rule that states where its thresholds are, beside the same OR.
        (
            {"queue_time_threshold": 60, "queue_size_threshold": 20, "threshold_breached": 1},
            QueueNumbers(114, 14, queue_time_threshold=60, queue_size_threshold=20),
        ),
        # Without the OR there is nothing to say they are conditions: thresholds, as stated.
        (
            {"queue_time_threshold": 1, "queue_size_threshold": 0},
            QueueNumbers(114, 14, queue_time_threshold=1, queue_size_threshold=0),
        ),
        # One condition stated: the other stays unknown.
        (
            {"queue_time_threshold": 0, "threshold_breached": 1},
            QueueNumbers(114, 14, queue_time_over=False),
        ),
    ],
)
def test_a_rules_thresholds_or_its_conditions(
    values: dict[str, float], numbers: QueueNumbers
) -> None:
    payload = raw("grafana/queue-alert-firing.json")
    payload["alerts"][0]["values"] = {"max_queue_size": 14, "max_queue_time_mins": 114, **values}
    payload["alerts"][0]["valueString"] = ""
    assert facts_of(parse_notification("grafana", payload)).numbers == numbers


def test_a_condition_crossed_in_any_firing_alert_is_crossed() -> None:
    payload = raw("grafana/queue-alert-firing.json")
    first = payload["alerts"][0]
    second = json.loads(json.dumps(first))
    second["labels"]["runner_type"] = "linux.4xlarge"
    second["fingerprint"] = "0" * 16
    first["values"]["queue_size_threshold"], second["values"]["queue_size_threshold"] = 0, 1
    payload["alerts"] = [first, second]
    numbers = facts_of(parse_notification("grafana", payload)).numbers
    assert numbers.queue_size_over is True and numbers.queue_time_over is True
