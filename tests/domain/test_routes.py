"""SLACK_ROUTES: which team channel an incident goes to, first match wins, with Alertmanager's
matcher semantics (anchored regexes, an absent label is empty)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.alert_facts import facts_of
from bot.domain.alerts import AlertFacts, QueueNumbers, RunnerQueue, parse_notification
from bot.domain.routes import Route, channel_for, channel_for_type, parse_routes
from tests.support.payloads import fixture_json

DEFAULT = "C0DEFAULT"
ROUTES = json.dumps(
    [
        {"match": ["team=rocm"], "channel": "C0ROCM"},
        {"match": ['runner_type=~"linux\\\\.rocm\\\\..*"'], "channel": "C0ROCM"},
        {"match": ["priority=~P[12]", "team!=rocm"], "channel": "C0PAGE"},
        {"match": ["grafana_folder=Dev Infra"], "channel": "C0INFRA"},
    ]
)


def facts(
    labels: dict[str, str] | None = None,
    *,
    team: str | None = None,
    priority: str | None = None,
    runner_types: tuple[str, ...] = (),
) -> AlertFacts:
    return AlertFacts(
        title="t",
        priority=priority,
        team=team,
        summary="",
        description="",
        runbook_url="",
        alert_url="",
        silence_url="",
        dashboard_url="",
        panel_url="",
        numbers=QueueNumbers(),
        runner_types={name: RunnerQueue(queued=1) for name in runner_types},
        labels=labels or {},
    )


@pytest.mark.parametrize(
    ("given_facts", "channel"),
    [
        (facts({"team": "rocm", "priority": "P1"}), "C0ROCM"),  # first match wins
        (facts(team="rocm"), "C0ROCM"),  # a Grafana rule's team annotation counts
        (facts(runner_types=("linux.2xlarge", "linux.rocm.gpu.2")), "C0ROCM"),  # any type
        (facts(runner_types=("xlinux.rocm.gpu",)), DEFAULT),  # anchored: the whole value
        (facts(priority="P1"), "C0PAGE"),  # team absent is "", not rocm
        (facts({"priority": "P12"}), DEFAULT),  # anchored
        (facts({"grafana_folder": "Dev Infra"}), "C0INFRA"),
        (facts({"grafana_folder": "dev infra"}), DEFAULT),  # values are case-sensitive
        (facts(), DEFAULT),
    ],
)
def test_the_first_route_whose_matchers_all_hold_takes_the_incident(
    given_facts: AlertFacts, channel: str
) -> None:
    assert channel_for(parse_routes(ROUTES), given_facts, DEFAULT) == channel


def test_a_warning_goes_where_a_route_on_its_runner_type_alone_sends_it() -> None:
    routes = parse_routes(
        '[{"match": ["team!=x"], "channel": "C0ANY"},'
        ' {"match": ["team=rocm", "runner_type=~rocm.*"], "channel": "C0BOTH"},'
        ' {"match": ["runner_type=~rocm.*"], "channel": "C0ROCM"}]'
    )
    assert channel_for_type(routes, "rocm.gpu", DEFAULT) == "C0ROCM"
    assert channel_for_type(routes, "linux.2xlarge", DEFAULT) == DEFAULT


def test_a_negative_matcher_on_runner_types_means_none_of_them() -> None:
    [route] = parse_routes('[{"match": ["runner_type!~linux\\\\.rocm.*"], "channel": "C0CUDA"}]')
    assert route.takes({}, ("linux.2xlarge", "linux.g5.4xlarge"))
    assert not route.takes({}, ("linux.2xlarge", "linux.rocm.gpu"))


def test_the_labels_come_from_the_notification() -> None:
    notification = parse_notification("grafana", fixture_json("grafana/queue-alert-firing.json"))
    found = facts_of(notification)
    assert found.labels["grafana_folder"] == "Dev Infra"
    assert found.labels["type"] == "alerting-infra"
    # Its Priority annotation (P2) comes before its folder in the routes' order.
    assert found.priority == "P2"
    assert channel_for(parse_routes(ROUTES), found, DEFAULT) == "C0PAGE"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not JSON"),
        ('{"match": ["a=b"], "channel": "C1"}', "a JSON list"),
        ('[{"match": ["a=b"]}]', "route 1: channel must be a channel ID"),
        ('[{"match": ["a=b"], "channel": "#ci"}]', "channel must be a channel ID"),
        ('[{"match": ["a=b"], "channel": "D0DM"}]', "channel must be a channel ID"),
        ('[{"match": [], "channel": "C0A"}]', "non-empty list"),
        ('[{"channel": "C0A"}]', "non-empty list"),
        ('[{"match": "a=b", "channel": "C0A"}]', "non-empty list"),
        ('[{"match": ["a"], "channel": "C0A"}]', "'a' is not a matcher"),
        ('[{"match": ["a=~("], "channel": "C0A"}]', "bad regex"),
        ('[{"match": ["a=b"], "channel": "C0A", "continue": true}]', '"match" and "channel"'),
        ('[{"match": ["a=b"], "matchers": ["a=b"], "channel": "C0A"}]', "not both"),
        ('[{"match": ["a=b"], "channel": "C0A"}, 3]', "route 2"),
    ],
)
def test_a_bad_route_is_refused_saying_which_and_why(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace("[", r"\[")):
        parse_routes(text)


def test_the_contracts_shape_and_alertmanagers_word_for_it() -> None:
    contract = '[{"match": ["team=\\"ci\\"", "runner_type=~\\"rocm.*\\""], "channel": "C0CI"}]'
    [route] = parse_routes(contract)
    assert route.takes({"team": "ci"}, ("rocm.gpu.2",)) and not route.takes({"team": "ci"}, ("x",))
    assert parse_routes('[{"matchers": ["team=ci"], "channel": "C0CI"}]')[0].channel == "C0CI"


def test_no_routes_is_every_incident_in_the_default_channel() -> None:
    assert parse_routes("") == parse_routes(None) == parse_routes("  ") == ()
    assert parse_routes("[]") == ()


JSONS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)
MATCHER_TEXT = st.text(alphabet='abc=!~"\\.*[]() ,', max_size=16)


@settings(max_examples=300, deadline=None)
@given(
    raw=JSONS
    | st.text(max_size=200)
    | st.lists(
        st.fixed_dictionaries(
            {"match": st.lists(MATCHER_TEXT, max_size=3), "channel": st.text(max_size=12)}
        ),
        max_size=4,
    ).map(json.dumps),
    labels=st.dictionaries(st.sampled_from(["a", "b", "c", "team"]), st.text(max_size=8)),
)
def test_any_setting_is_routes_or_a_value_error_and_routing_never_fails(
    raw: object, labels: dict[str, str]
) -> None:
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        routes = parse_routes(text)
    except ValueError as exc:
        assert str(exc)
        return
    assert all(isinstance(route, Route) for route in routes)
    chosen = channel_for(routes, facts(labels, runner_types=("a",)), DEFAULT)
    assert chosen in {DEFAULT, *(route.channel for route in routes)}
