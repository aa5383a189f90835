"""SLACK_ROUTES: which team channel an incident goes to, first match wins, with Alertmanager's
matcher semantics (anchored regexes, an absent label is empty)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain.alerting.alerts import (
    AlertFacts,
    Matcher,
    QueueNumbers,
    RunnerQueue,
    parse_notification,
)
from bot.domain.alerting.delivery import facts_of
from bot.domain.alerting.routes import Route, Routing, channel_for, parse_routes
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
    assert Routing(routes, DEFAULT).channel_of_type("rocm.gpu") == "C0ROCM"
    assert Routing(routes, DEFAULT).channel_of_type("linux.2xlarge") == DEFAULT


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


def test_the_documented_shape_and_alertmanagers_word_for_it() -> None:
    documented = '[{"match": ["team=\\"ci\\"", "runner_type=~\\"rocm.*\\""], "channel": "C0CI"}]'
    [route] = parse_routes(documented)
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
MATCHER_TEXT = st.text(alphabet='abc=!~"\\.*+?[]():{}|^$ ,\nPdzQE', max_size=16)


@settings(max_examples=300, deadline=None)
@given(
    raw=JSONS
    | st.text(max_size=200)
    | st.lists(
        st.fixed_dictionaries(
            {
                "match": st.lists(MATCHER_TEXT, max_size=3),
                # Mostly a valid channel, so the matchers are what is tried.
                "channel": st.sampled_from(["C0A", "G0B"]) | st.text(max_size=12),
            }
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


# --- Alertmanager's matcher syntax, as Alertmanager reads it ------------------------------------


def matchers_of(*texts: str) -> tuple[Matcher, ...]:
    return parse_routes(json.dumps([{"match": list(texts), "channel": "C0A"}]))[0].matchers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Classic Alertmanager keeps a backslash that escapes nothing it knows: `\d`, `\.`.
        ('priority=~"P\\d"', [Matcher("priority", "P\\d", is_regex=True)]),
        ('runner_type=~"linux\\.rocm"', [Matcher("runner_type", "linux\\.rocm", is_regex=True)]),
        ("runner_type=~linux\\.rocm", [Matcher("runner_type", "linux\\.rocm", is_regex=True)]),
        ('team="a\\"b"', [Matcher("team", 'a"b')]),
        ('team="a\\\\b"', [Matcher("team", "a\\b")]),
        ('team="a\\nb"', [Matcher("team", "a\nb")]),
        ('team = "a, b"', [Matcher("team", "a, b")]),
        ("team=ci,", [Matcher("team", "ci")]),  # a trailing comma, as ParseMatchers takes it
        ('  team  !~  "x|y"  ', [Matcher("team", "x|y", is_equal=False, is_regex=True)]),
        # One string, several matchers: Alertmanager's `matchers:` list items take this form.
        (
            '{team="ci", runner_type=~"rocm.*"}',
            [Matcher("team", "ci"), Matcher("runner_type", "rocm.*", is_regex=True)],
        ),
        ('team="ci",priority!=P3,', [Matcher("team", "ci"), Matcher("priority", "P3", False)]),
        ('{team="ci"}', [Matcher("team", "ci")]),
        # Braces that enclose nothing: no matcher, a route that takes every alert (as amtool).
        ("{}", []),
    ],
)
def test_matchers_read_as_alertmanager_reads_them(text: str, expected: list[Matcher]) -> None:
    assert list(matchers_of(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        'team="ci',  # a quote left open
        'team=c"i',  # a quote inside an unquoted value
        'team="c"i"',
        "te am=ci",  # not a label name
        "te{am=ci",  # a brace inside a name
        'team="ci" priority="P1"',  # two matchers need a comma
        # Names of the UTF-8 parser only (0.27+): the classic parser, and so 0.25, refuses them.
        '"service.name"="x"',
        "service.name=x",
        " , ",
        "team=ci,,priority=P1",  # an empty matcher: ParseMatcher("") refuses it
        ",team=ci",
    ],
)
def test_what_alertmanager_refuses_is_refused_not_a_route_that_never_matches(text: str) -> None:
    with pytest.raises(ValueError, match="route 1"):
        matchers_of(text)


def test_a_classic_escape_in_a_regex_still_means_the_regex() -> None:
    [route] = parse_routes('[{"match": ["priority=~\\"P\\\\d\\""], "channel": "C0P"}]')
    assert route.takes({"priority": "P1"}, ()) and not route.takes({"priority": "Pd"}, ())
    [route] = parse_routes(
        json.dumps([{"match": ['runner_type=~"linux\\.rocm\\..*"'], "channel": "C0R"}])
    )
    assert route.takes({}, ("linux.rocm.gpu.2",))
    assert not route.takes({}, ("linuxXrocmYgpu",))  # `.` escaped: not any character


@pytest.mark.parametrize(
    "regex",
    [
        "(?=rocm)rocm.*",  # lookahead: Python has it, RE2 (Alertmanager) does not
        "(?!cuda).*",
        "(?<=x)y",
        "(?<!x)y",
        "(a)\\1",  # backreference
        "(?P<t>a)(?P=t)",
        "(?>rocm)",  # atomic group
        "rocm.*+",  # possessive repeat
        "(?x)rocm",  # a flag RE2 lacks
        "(?#note)rocm",
        "(?(1)a|b)",
        "a{1001}",
        "(?<team>ci)",  # Go 1.22's syntax: Alertmanager 0.25 (Go 1.19) refuses it
        "a\\C",  # one byte: RE2 takes it, Go does not
    ],
)
def test_a_regex_re2_would_not_run_the_same_is_refused(regex: str) -> None:
    with pytest.raises(ValueError, match="bad regex"):
        matchers_of(f"team=~{json.dumps(regex)}")


@pytest.mark.parametrize(
    ("regex", "matching", "not_matching"),
    [
        ("[[:alpha:]]+", "rocm", "rocm1"),  # Python alone reads `[[:alpha:]]` as a set of `[:alph`
        ("[[:digit:][:lower:]]+", "p1", "P1"),
        ("x(?i)ci", "xCI", "XCI"),  # RE2's flags from there to the group's end
        ("a(?i)b|c", "C", "Ab"),
        ("a{,3}", "a{,3}", "aa"),  # not a repeat to RE2
        ("\\Qlinux.rocm\\E.*", "linux.rocm.gpu", "linuxXrocm"),
        ("a\\z", "a", "a\n"),
        ("(?P<team>ci)", "ci", "cd"),
        ("\\x{41}+", "AA", "B"),
        ("\\d+", "12", "١٢"),  # RE2's \d is ASCII
        ("a.b", "a-b", "a\nb"),  # Alertmanager compiles ^(?:…)$: `.` is not a newline
        ("(?s:a.b)", "a\nb", "ab"),  # unless the pattern says so
        ("\\pL+", "rocm", "rocm1"),  # RE2 has Unicode classes; Python's re does not
        ("[[:^alpha:]]+", "12", "a"),
    ],
)
def test_a_regex_means_what_it_means_to_re2(regex: str, matching: str, not_matching: str) -> None:
    [route] = parse_routes(
        json.dumps([{"match": [f"team=~{json.dumps(regex)}"], "channel": "C0A"}])
    )
    assert route.takes({"team": matching}, ())
    assert not route.takes({"team": not_matching}, ())


LABEL_NAME = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True)
OPERATOR = {"=": (True, False), "!=": (False, False), "=~": (True, True), "!~": (False, True)}
SPACE = st.sampled_from(["", " ", "  ", "\t"])


def go_quoted(value: str) -> str:
    """A value as Alertmanager's own `Matcher.String()` writes it: double-quoted, `\\`, `"` and a
    line feed escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def re2_literal(text: str) -> str:
    """A regex for exactly `text` in RE2's syntax (Go's `regexp.QuoteMeta`)."""
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$" else c for c in text)


@st.composite
def written_matchers(draw: st.DrawFn) -> tuple[list[str], list[Matcher]]:
    """Matchers, and how a user might write them in `match`: one a string or several in one,
    braces or not, spaces around the operator and the commas."""
    wanted: list[Matcher] = []
    written: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        name = draw(LABEL_NAME)
        op = draw(st.sampled_from(list(OPERATOR)))
        is_equal, is_regex = OPERATOR[op]
        literal = draw(st.text(max_size=12))
        value = re2_literal(literal) if is_regex else literal
        wanted.append(Matcher(name, value, is_equal, is_regex))
        written.append(f"{draw(SPACE)}{name}{draw(SPACE)}{op}{draw(SPACE)}{go_quoted(value)}")
    if draw(st.booleans()):
        return written, wanted
    joined = ",".join(written) + draw(st.sampled_from(["", ","]))
    return [f"{{{joined}}}" if draw(st.booleans()) else joined], wanted


@settings(max_examples=300, deadline=None)
@given(written_matchers(), st.text(max_size=12))
def test_written_as_alertmanager_writes_them_matchers_come_back_and_regexes_are_literal(
    case: tuple[list[str], list[Matcher]], other: str
) -> None:
    texts, wanted = case
    [route] = parse_routes(json.dumps([{"match": texts, "channel": "C0A"}]))
    assert list(route.matchers) == wanted
    for matcher in wanted:
        if matcher.is_regex:  # the escaped literal matches itself, and only itself
            literal = re.sub(r"\\(.)", r"\1", matcher.value, flags=re.S)
            single = Route((Matcher("x", matcher.value, True, True),), "C0A")
            assert single.takes({"x": literal}, ())
            assert single.takes({"x": other}, ()) == (other == literal)


OWNING = Routing(
    parse_routes(
        json.dumps(
            [
                {"match": ['runner_type=~"linux\\.g5\\..*"'], "channel": "C0GPU"},
                # Also matches the g5 types, which the route above took: first match wins (a
                # route has no `continue`: it is refused), so each type has one channel.
                {"match": ['runner_type=~"linux\\.(g5|rocm)\\..*"'], "channel": "C0ACCEL"},
                {"match": ["team=rocm"], "channel": "C0TEAM"},
                # A type alone carries no team: this route owns no type, the next one does.
                {"match": ["team=cuda", 'runner_type="linux.2xlarge"'], "channel": "C0MIXED"},
                {"match": ['runner_type="linux.2xlarge"'], "channel": "C0MIXED"},
            ]
        )
    ),
    DEFAULT,
)
FLEET = ("linux.2xlarge", "linux.g5.4xlarge", "macos-m1", "linux.rocm.gpu.2", "linux.g5.48xl")


@pytest.mark.parametrize(
    ("routing", "channel", "owned"),
    [
        (OWNING, "C0GPU", ("linux.g5.4xlarge", "linux.g5.48xl")),
        (OWNING, "C0ACCEL", ("linux.rocm.gpu.2",)),  # the g5 types are the first route's
        (OWNING, "C0MIXED", ("linux.2xlarge",)),
        (OWNING, DEFAULT, ("macos-m1",)),  # the types no route takes: their alerts land here
        (OWNING, "C0TEAM", None),  # routed by team: its types cannot be told, it sees them all
        (OWNING, "D0ALICE", None),  # a DM: the whole fleet
        (OWNING, "C0NOROUTE", None),  # a channel no route names
        (OWNING, "", None),
        (Routing((), DEFAULT), DEFAULT, None),  # no routes: one channel has every type
        (Routing(OWNING.routes[:1], DEFAULT), DEFAULT, tuple(t for t in FLEET if ".g5." not in t)),
    ],
)
def test_the_runner_types_a_channel_owns_are_those_its_alerts_would_bring(
    routing: Routing, channel: str, owned: tuple[str, ...] | None
) -> None:
    assert routing.types_of(channel, FLEET) == owned


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([*FLEET, "linux.g5.", "g5", ""]) | st.text(max_size=12), unique=True)
)
def test_every_type_is_owned_by_exactly_the_channel_its_warning_goes_to(
    names: list[str],
) -> None:
    owners = {c: OWNING.types_of(c, names) for c in OWNING.channels}
    for name in names:
        holders = [c for c, owned in owners.items() if owned is not None and name in owned]
        # The channel its early warning goes to, as for every type.
        assert holders == [OWNING.channel_of_type(name)]


@pytest.mark.parametrize(
    ("match", "typo"),
    [
        ("team==rocm", 'team==rocm: the value is "=rocm"; did you mean team="rocm"?'),
        ("team=~~rocm.*", 'team=~~rocm.*: the value is "~rocm.*"; did you mean team=~"rocm.*"?'),
        ("team!==rocm", 'team!==rocm: the value is "=rocm"; did you mean team!="rocm"?'),
        ("team!~~rocm", 'team!~~rocm: the value is "~rocm"; did you mean team!~"rocm"?'),
        ("team!=~rocm.*", 'team!=~rocm.*: the value is "~rocm.*"; did you mean team!~"rocm.*"?'),
        ("priority=P1, team==rocm", 'team==rocm: the value is "=rocm"; did you mean team="rocm"?'),
    ],
)
def test_a_value_that_starts_with_an_operators_sign_is_doubted(match: str, typo: str) -> None:
    [route] = parse_routes(json.dumps([{"match": [match], "channel": "C0ROCM"}]))
    assert route.typos == (typo,)


def test_a_doubted_value_keeps_alertmanagers_meaning() -> None:
    """Alertmanager's `ParseMatchers` reads `team==rocm` as team equal to "=rocm": so does the
    route, which only `check` and `serve`'s log doubt."""
    routes = [{"match": ["team==rocm"], "channel": "C0ROCM"}]
    routes += [{"match": ["runner_type=~~rocm.*"], "channel": "C0ROCM"}]
    equal, regex = parse_routes(json.dumps(routes))
    assert equal.matchers == (Matcher("team", "=rocm"),)
    assert not equal.takes({"team": "rocm"}) and equal.takes({"team": "=rocm"})
    assert regex.matchers == (Matcher("runner_type", "~rocm.*", is_regex=True),)
    assert not regex.takes({"runner_type": "rocm.mi300"})


@pytest.mark.parametrize("match", ['team="=rocm"', "team=rocm", 'team=~"~rocm"', "team=r=ocm"])
def test_a_value_quoted_or_with_the_sign_inside_is_taken_as_meant(match: str) -> None:
    [route] = parse_routes(json.dumps([{"match": [match], "channel": "C0ROCM"}]))
    assert route.typos == ()
