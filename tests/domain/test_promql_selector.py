"""PROMETHEUS_SELECTOR read as Prometheus's lexer reads label matchers: whatever way a value is
quoted and escaped, the same matchers; what Prometheus would refuse, refused with the fix; and the
text put into a query, one quoted string per value, read back as the same matchers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.alerting.alerts import OPERATORS, Matcher
from bot.domain.alerting.promql_selector import parse_selector, selector_text, vector

NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True).filter(
    lambda name: name != "__name__"
)
# Any text a label value may hold: every Unicode character but the surrogates, which no UTF-8
# label carries.
VALUES = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
# A regex RE2 takes: literal text, its metacharacters escaped, around some of RE2's own syntax.
LITERAL = VALUES.map(lambda text: "".join(f"\\{c}" if c in r"\.+*?()|[]{}^$" else c for c in text))
REGEXES = st.lists(st.one_of(LITERAL, st.sampled_from([".*", "a|b", "[0-9]+", "(x)?"])), max_size=3)


@st.composite
def matchers(draw: st.DrawFn) -> Matcher:
    operator = draw(st.sampled_from(sorted(OPERATORS)))
    is_equal, is_regex = OPERATORS[operator]
    value = "".join(draw(REGEXES)) if is_regex else draw(VALUES)
    return Matcher(draw(NAMES), value, is_equal, is_regex)


SELECTORS = st.lists(matchers(), min_size=1, max_size=4).map(tuple)
SPACE = st.text(" \t\n\r", max_size=2)


@st.composite
def written(draw: st.DrawFn, value: str) -> str:
    """`value` as an operator may write it: in double or single quotes, each character itself
    or any escape Go's string syntax has for it, or raw between backticks."""
    quotes = ['"', "'"] + (["`"] if "`" not in value else [])
    quote = draw(st.sampled_from(quotes))
    if quote == "`":
        return f"`{value}`"
    simple = {"\a": "a", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", "\v": "v"}
    out = []
    for char in value:
        code = ord(char)
        ways = [f"\\U{code:08x}"]
        if code <= 0xFFFF:
            ways.append(f"\\u{code:04x}")
        if code < 0x80:
            ways += [f"\\x{code:02X}", f"\\{code:03o}"]
        if char in simple:
            ways.append("\\" + simple[char])
        if char in ("\\", quote):
            ways.append("\\" + char)
        elif char != "\n":
            ways.append(char)
        out.append(draw(st.sampled_from(ways)))
    return quote + "".join(out) + quote


@given(SELECTORS)
def test_the_text_put_into_queries_reads_back_as_the_same_matchers(chosen: tuple) -> None:
    text = selector_text(chosen)
    assert parse_selector(text) == chosen
    assert parse_selector("{" + text + "}") == chosen
    assert selector_text(parse_selector(text)) == text


@given(st.data(), SELECTORS)
def test_any_way_a_value_is_quoted_and_escaped_is_the_same_matcher(
    data: st.DataObject, chosen: tuple
) -> None:
    parts = [
        data.draw(SPACE)
        + m.name
        + data.draw(SPACE)
        + m.operator
        + data.draw(SPACE)
        + data.draw(written(m.value))
        + data.draw(SPACE)
        for m in chosen
    ]
    trailing = data.draw(st.sampled_from(["", ","]))
    text = ",".join(parts) + trailing
    if data.draw(st.booleans()):
        text = "{" + text + "}"
    assert parse_selector(text) == chosen


@given(st.text(max_size=40))
def test_any_text_is_matchers_or_a_reason(text: str) -> None:
    try:
        found = parse_selector(text)
    except ValueError as exc:
        assert str(exc)
    else:
        assert parse_selector(selector_text(found)) == found


@given(st.text("a=!~\"'`\\{},_ 0x", max_size=30))
def test_text_made_of_the_syntax_is_matchers_or_a_reason(text: str) -> None:
    try:
        parse_selector(text)
    except ValueError as exc:
        assert str(exc)


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("", ()),
        ('cluster="prod"', (Matcher("cluster", "prod"),)),
        (' { cluster = "prod" , } ', (Matcher("cluster", "prod"),)),
        (
            "cluster!='staging', namespace=~`arc-.*`",
            (
                Matcher("cluster", "staging", is_equal=False),
                Matcher("namespace", "arc-.*", is_regex=True),
            ),
        ),
        ('region!~"us-(east|west)-\\\\d"', (Matcher("region", "us-(east|west)-\\d", False, True),)),
        ('a="\\x41\\101\\u00e9\\U0001F600\\t\\"\\\\"', (Matcher("a", 'AAé😀\t"\\'),)),
    ],
)
def test_promql_matchers_are_read(text: str, read: tuple) -> None:
    assert parse_selector(text) == read


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cluster=prod", 'cluster=prod: quote the value: cluster="prod"'),
        ('cluster=="prod"', "unknown operator '=='; use =, !=, =~ or !~"),
        ('cluster=~~"prod"', "unknown operator '=~~'"),
        ('cluster:"prod"', "unknown operator ':'"),
        ('9cluster="prod"', "'9cluster' is not a label name: letters, digits and _"),
        ('cluster.name="prod"', "'cluster.name' is not a label name"),
        ('cluster=~"(prod"', 'cluster=~"(prod": bad regex (missing )'),
        ('cluster=~"(?<n>prod)"', "name a group (?P<name>…)"),
        ('cluster="prod" region="eu"', "separate matchers with a comma"),
        ('cluster="prod",,region="eu"', "is not a matcher"),
        ('cluster="prod', "the value's closing \" is missing"),
        ('cluster="pr\nod"', "the value's closing \" is missing"),
        ('cluster="\\q"', "unknown escape \\q"),
        ("cluster='\\\"'", 'unknown escape \\"'),
        ('cluster="\\xff"', "\\xff is a byte: write the character"),
        ('cluster="\\ud800"', "is no Unicode character"),
        ('cluster="\\u00"', "\\u needs 4 digits of base 16"),
        ('__name__="up"', "__name__ is each query's own"),
        ('{cluster="prod"', "a brace without its pair"),
        ("cluster", 'cluster needs an operator and a value: cluster="…"'),
    ],
)
def test_what_prometheus_would_refuse_is_refused_with_the_fix(text: str, says: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_selector(text)
    assert says in str(refused.value)


def test_a_series_gets_its_own_matchers_and_the_selectors() -> None:
    where = 'cluster="prod"'
    assert vector("up") == "up"
    assert vector("up", where=where) == 'up{cluster="prod"}'
    assert vector("up", 'job="x"', where=where) == 'up{job="x", cluster="prod"}'
    assert vector("", '__name__=~"a|b"', where=where) == '{__name__=~"a|b", cluster="prod"}'
