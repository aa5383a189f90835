"""SLACK_ROUTES held to Alertmanager itself: Debian's `amtool` (Alertmanager 0.25, its classic
matcher parser and Go's regexp) routes generated labels through generated routes, and
`parse_routes` must refuse what amtool refuses and `channel_for` pick the route amtool picks.

Each route is an Alertmanager child route with `continue: true`, so amtool names every route that
takes the labels; the first of them is the one Alertmanager's first match (`continue: false`)
would take, and `SLACK_CHANNEL` is the root's receiver when none does."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.domain.alerting.alerts import AlertFacts, QueueNumbers, RunnerQueue
from bot.domain.alerting.routes import Route, channel_for, parse_routes

AMTOOL = shutil.which("amtool")
pytestmark = pytest.mark.skipif(AMTOOL is None, reason="amtool (prometheus-alertmanager) absent")

DEFAULT = "C0DEFAULT"
Routes = list[list[str]]
Labels = dict[str, str]

# Label names the labels use, and what a matcher may name besides: names the classic parser
# refuses (quoted, dotted, UTF-8, a digit first) and ones that are merely absent.
LABEL_NAMES = ["team", "priority", "runner_type", "a", "b_2", ":x"]
NAMES = st.sampled_from(LABEL_NAMES) | st.sampled_from(
    ["absent", "_", "x:y", '"team"', "service.name", "é", "1a", "te am", ""]
)
OPERATORS = st.sampled_from(["=", "!=", "=~", "!~"]) | st.sampled_from(["==", "~", "!", "=!", ""])
# Go's regexp's spaces (ASCII, not `\v`), Go's TrimSpace's (Unicode), and neither.
SPACES = st.sampled_from(["", "", " ", "  ", "\t", "\n", "\r", "\f", "\v"]) | st.sampled_from(
    ["\u00a0", "\u2003", "\x85", "\u3000", "\u2028", "\x1f", "\u200b"]
)
VALUE_PIECES = st.sampled_from(
    [
        *["rocm", "P1", "P[12]", "a", "b", "x", "axyz", "é", "日本", "\U0001f600"],
        *[".", "*", "+", "?", "|", "(", ")", "[", "]", "{", "}", "^", "$", ",", ":", "=", "~"],
        *["\\", "\\\\", '"', '\\"', "\\n", "\n", " ", "\t", "\u00a0", "'", "`", "!"],
        *["a)|(b", ")|(", "(?i)", "(?s)", "(?m)", "(?U)", "(?i:", "\\d", "\\pL", "\\p{Greek}"],
        *["\\C", "(?<n>", "(?P<n>", "(?P<é>", "(?=", "\\1", "[[:alpha:]]", "[^]a]", "\\Q", "\\E"],
        *["{2}", "{,3}", "{1000}", "{1001}", "{2}{3}", "**", "\\z", "\\Z", "\\b", "\\x{41}"],
    ]
)
VALUES = st.lists(VALUE_PIECES | st.text(st.characters(exclude_characters="\0"), max_size=3))


def go_quoted(value: str) -> str:
    """`value` double-quoted as Alertmanager's `Matcher.String()` writes it."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@st.composite
def written_values(draw: st.DrawFn) -> str:
    value = "".join(draw(VALUES.map(lambda pieces: pieces[:6])))
    how = draw(st.sampled_from(["quoted", "quoted", "bare", "raw quotes"]))
    return {"quoted": go_quoted(value), "bare": value, "raw quotes": f'"{value}"'}[how]


@st.composite
def matcher_texts(draw: st.DrawFn) -> str:
    """One `match` string: matchers with spaces of every kind around their parts, joined by
    commas, in braces or not, whole or torn; sometimes text of the syntax's characters alone."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text('ab=!~"\\,{} \t\u00a0.*()|', max_size=14))
    parts = (SPACES, NAMES, SPACES, OPERATORS, SPACES, written_values(), SPACES)
    matchers = ["".join(draw(part) for part in parts) for _ in range(draw(st.integers(0, 3)))]
    separators = st.sampled_from([",", ",", ", ", " ,", ",,", ",\u00a0", ",\v"])
    text = "".join(m + draw(separators) for m in matchers[:-1]) + "".join(matchers[-1:])
    opening = draw(st.sampled_from(["", "", "{", " {", "{{", "}"]))
    closing = draw(st.sampled_from(["", "", "}", "} ", "}}", ",", ", ", ",\u00a0", "{"]))
    return opening + text + closing


LABEL_VALUES = st.sampled_from(
    ["", "rocm", "P1", "P2", "a", "b", "x", "axyz", "xb", "a)|(b", "b}", " a", "a ", "A", "é"]
) | st.text(st.characters(exclude_characters="\0"), max_size=4)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Routes, Labels]:
    routes = draw(
        st.lists(st.lists(matcher_texts(), min_size=1, max_size=2), min_size=1, max_size=4)
    )
    labels = draw(st.dictionaries(st.sampled_from(LABEL_NAMES), LABEL_VALUES, max_size=4))
    return routes, labels


def yaml_string(text: str) -> str:
    """`text` as a YAML double-quoted scalar: printable ASCII as it is, the rest escaped."""
    return (
        '"'
        + "".join(
            "\\" + char
            if char in '"\\'
            else char
            if " " <= char < "\x7f"
            else f"\\U{ord(char):08x}"
            for char in text
        )
        + '"'
    )


def alertmanager_config(routes: Routes) -> str:
    lines = ["route:", "  receiver: default", "  routes:"]
    for n, texts in enumerate(routes):
        lines += [f"  - receiver: r{n}", "    continue: true"]
        lines += ["    matchers:", *(f"    - {yaml_string(text)}" for text in texts)]
    lines += ["receivers:", "- name: default", *(f"- name: r{n}" for n in range(len(routes)))]
    return "\n".join(lines) + "\n"


def amtool_routes(config: Path, labels: Labels) -> tuple[list[int] | None, str]:
    """The routes (by index) amtool sends `labels` to, or None when it refuses the config; and
    what it said."""
    assert AMTOOL is not None
    arguments = [f"{name}={go_quoted(value)}" for name, value in labels.items()]
    done = subprocess.run(
        [AMTOOL, "config", "routes", "test", f"--config.file={config}", *arguments],
        capture_output=True,
        text=True,
        check=False,
    )
    said = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        assert "Failed to parse labels" not in said, said  # the test's labels, not the routes
        return None, said
    receivers = done.stdout.strip().split(",")
    return ([] if receivers == ["default"] else [int(r[1:]) for r in receivers]), said


def queuepilot_routes(routes: Routes) -> tuple[Route, ...] | None:
    setting = json.dumps([{"match": texts, "channel": f"C0R{n}"} for n, texts in enumerate(routes)])
    try:
        return parse_routes(setting)
    except ValueError:
        return None


def facts(labels: Labels, *, teams_from_annotations: bool) -> AlertFacts:
    """The group's facts with `labels`: `runner_type` the one runner type the alert names (so
    "any runner type matches" is the label's match), and `team` and `priority` as annotations
    or labels."""
    labels = dict(labels)
    runner_types = (labels.pop("runner_type"),) if "runner_type" in labels else ()
    annotations = {
        n: labels.pop(n) for n in ("team", "priority") if teams_from_annotations and n in labels
    }
    return AlertFacts(
        title="t",
        priority=annotations.get("priority"),
        team=annotations.get("team"),
        summary="",
        description="",
        runbook_url="",
        alert_url="",
        silence_url="",
        dashboard_url="",
        panel_url="",
        numbers=QueueNumbers(),
        runner_types={name: RunnerQueue(queued=1) for name in runner_types},
        labels=labels,
    )


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples every run: CI fails only on what changed
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=cases(), teams_from_annotations=st.booleans())
# The edges Alertmanager is known for, tried every run.
@example(case=([['a=~"a)|(b"']], {"a": "axyz"}), teams_from_annotations=False)
@example(case=([['a=~"a)|(b"']], {"a": "xb"}), teams_from_annotations=False)
@example(case=([['a=~"(?m)x)$\\n(?-m"']], {"a": "x\n"}), teams_from_annotations=False)
@example(
    case=([["{a=b"], ["a=b}"], ["{a=b} "], ['{a="b"}']], {"a": "b"}), teams_from_annotations=False
)
@example(case=([[" {a=b}"]], {"a": "b"}), teams_from_annotations=False)
@example(case=([["{a=b} "]], {"a": "b}"}), teams_from_annotations=False)
@example(
    case=([["\u00a0a=b"], ["a=b,\u00a0"], ["a=b\u00a0"]], {"a": "b"}), teams_from_annotations=False
)
@example(case=([["a=b\u00a0,team=x"]], {"a": "b\u00a0", "team": "x"}), teams_from_annotations=False)
@example(case=([["\u00a0a=b,team=x"]], {"a": "b"}), teams_from_annotations=False)
@example(case=([["a=b\v"]], {"a": "b\v"}), teams_from_annotations=False)
@example(case=([['a="\\,",b_2=c']], {}), teams_from_annotations=False)
@example(case=([['a=\\,b_2="c']], {}), teams_from_annotations=False)
@example(case=([["{}"], [""], ["{"], ["}"]], {}), teams_from_annotations=False)
# An empty matcher set is no matcher in Alertmanager too (its config loads, amtool routes every
# alert there): a catch-all route, taking labels the routes before it do not.
@example(
    case=([["a=x"], ["{}"], ["{ }", "team=y"], ["{\t}"], ["\u00a0"]], {"a": "b", "team": "y"}),
    teams_from_annotations=False,
)
@example(case=([["a=b,,team=x"]], {}), teams_from_annotations=False)
@example(case=([['"service.name"=x']], {}), teams_from_annotations=False)
@example(case=([["service.name=x"]], {}), teams_from_annotations=False)
@example(case=([['a=~"(?<n>x)"']], {"a": "x"}), teams_from_annotations=False)
@example(case=([['a=~"(?P<é>x)"']], {"a": "x"}), teams_from_annotations=False)
@example(
    case=([['a=~"\\\\C"'], ['a=~"[\\\\C]"'], ['a=~"\\\\Q\\\\C\\\\E"']], {}),
    teams_from_annotations=False,
)
@example(
    case=([['a=~"[(?<]"'], ['a=~"\\\\(?<"'], ['a=~"[]\\\\C]"']], {"a": "<"}),
    teams_from_annotations=False,
)
@example(
    case=([['runner_type!~"linux\\\\.rocm.*"']], {"runner_type": "linux.rocm.gpu"}),
    teams_from_annotations=False,
)
@example(
    case=([["team=rocm", "priority=~P[12]"]], {"team": "rocm", "priority": "P1"}),
    teams_from_annotations=True,
)
@pytest.mark.slow
def test_routes_are_refused_and_taken_as_amtool_refuses_and_takes_them(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[Routes, Labels],
    teams_from_annotations: bool,
) -> None:
    routes, labels = case
    config = tmp_path_factory.mktemp("amtool") / "alertmanager.yml"
    config.write_text(alertmanager_config(routes), encoding="utf-8")
    taken_by_amtool, said = amtool_routes(config, labels)
    ours = queuepilot_routes(routes)
    shown = f"routes {routes!r}, labels {labels!r}; amtool said {said!r}"
    assert (ours is None) == (taken_by_amtool is None), f"refused by one alone: {shown}"
    if ours is None or taken_by_amtool is None:
        return
    plain = {name: value for name, value in labels.items() if name != "runner_type"}
    runner_types = (labels["runner_type"],) if "runner_type" in labels else ()
    taken = [n for n, route in enumerate(ours) if route.takes(plain, runner_types)]
    assert taken == taken_by_amtool, shown
    chosen = channel_for(
        ours, facts(labels, teams_from_annotations=teams_from_annotations), DEFAULT
    )
    assert chosen == (f"C0R{taken_by_amtool[0]}" if taken_by_amtool else DEFAULT), shown
