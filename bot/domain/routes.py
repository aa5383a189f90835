r"""Which Slack channel an alert group's incident goes to: `SLACK_ROUTES`, first match wins.

Teams route their own alerts (PyTorch's ROCm queue alerts go to another team than the CUDA
ones). A route is a list of label matchers in Alertmanager's syntax (`team="rocm"`,
`priority=~"P[12]"`, `runner_type=~"linux\.rocm\..*"`) and a channel ID; the routes are tried in
order and the first whose every matcher holds takes the incident, else `SLACK_CHANNEL` does.

The labels matched are the group's common and group labels, with `team` and `priority` as the
incident shows them (Grafana rules often carry those as annotations), and `runner_type` matching
when any runner type the alert names matches. As in Alertmanager, a regex matches the whole
value (anchored), and a label that is absent has the empty value.

`SLACK_ROUTES` is JSON: `[{"match": ["team=\"rocm\""], "channel": "C0ROCM"}, ...]` (`matchers`,
Alertmanager's own word, is taken for `match`). As in Alertmanager's own `matchers:` lists, one
string may hold several matchers, comma-separated and in braces if you like
(`{team="ci", runner_type=~"rocm.*"}`), and values are read as Alertmanager reads them (quoted or
not; `\"`, `\\`, `\n` escapes, any other backslash kept: `"linux\.rocm\..*"`).

Regexes run on RE2 (google-re2), the syntax Alertmanager's Go regexp speaks: a route Alertmanager
would refuse (a lookahead, a backreference) is refused at start, and one Python's `re` reads
otherwise (`[[:alpha:]]`, `\pL`, `(?i)` mid-pattern, `{,3}`) means what it means to Alertmanager.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import re2

from bot.domain.alert_facts import split_matchers
from bot.domain.alerts import AlertFacts, Matcher

MAX_ROUTES = 100
MAX_MATCHERS = 20
RUNNER_TYPE = "runner_type"
# Slack's channel IDs: C (public), G (private, older), D is a DM and not a place for incidents.
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,}")
# A label name as Alertmanager takes it: a Prometheus name, a quoted string, or (its UTF-8 parser)
# an unquoted run of anything but spaces and the characters its matcher syntax reserves.
_NAME_OPERATOR = re.compile(
    r'\s*([a-zA-Z_:][a-zA-Z0-9_:]*|"(?:[^"\\]|\\.)*"|[^\s{}!=~,\\"\'`]+)\s*(=~|!~|!=|=)', re.S
)
_OPERATORS = {"=": (True, False), "!=": (False, False), "=~": (True, True), "!~": (False, True)}


@dataclass(frozen=True)
class Route:
    matchers: tuple[Matcher, ...]
    channel: str

    def takes(self, labels: Mapping[str, str], runner_types: Iterable[str] = ()) -> bool:
        return all(_holds(m, labels, tuple(runner_types)) for m in self.matchers)

    @property
    def text(self) -> str:
        return ", ".join(_shown(m) for m in self.matchers) or "everything"


def parse_routes(text: str | None) -> tuple[Route, ...]:
    """The routes of `SLACK_ROUTES`; ValueError saying which route is wrong and why."""
    if not text or not text.strip():
        return ()
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(raw, list):
        raise ValueError('a JSON list of {"match": [...], "channel": "C..."} objects')
    if len(raw) > MAX_ROUTES:
        raise ValueError(f"at most {MAX_ROUTES} routes, not {len(raw)}")
    return tuple(_route(n, item) for n, item in enumerate(raw, 1))


def channel_for(routes: Iterable[Route], facts: AlertFacts, default: str) -> str:
    """The first route's channel that takes the group, else `default`."""
    shown = {**facts.labels}
    for name, value in (("team", facts.team), ("priority", facts.priority)):
        if value and not shown.get(name):
            shown[name] = value
    names = tuple(facts.runner_types)
    return next((r.channel for r in routes if r.takes(shown, names)), default)


def channel_for_type(routes: Iterable[Route], runner_type: str, default: str) -> str:
    """Where a runner type's early warning goes (it has no labels, only its type): the first
    route made of `runner_type` matchers alone that takes it, else `default`."""
    on_type = (r for r in routes if all(m.name == RUNNER_TYPE for m in r.matchers))
    return next((r.channel for r in on_type if r.takes({}, (runner_type,))), default)


@dataclass(frozen=True)
class Routing:
    """The routes with their default channel, as the incidents' views ask them: does a runner
    type belong in this channel?"""

    routes: tuple[Route, ...] = ()
    default: str = ""

    def owns(self, channel: str, runner_type: str) -> bool:
        """Whether `runner_type` is `channel`'s: where a route on runner types sends its alerts,
        else the default channel's. Without routes every type is every channel's."""
        if not self.routes or not channel:
            return True
        return channel_for_type(self.routes, runner_type, self.default) == channel


def _route(n: int, item: object) -> Route:
    if not isinstance(item, dict) or set(item) - {"match", "matchers", "channel"}:
        raise ValueError(f'route {n}: an object of "match" and "channel" only')
    if "match" in item and "matchers" in item:
        raise ValueError(f'route {n}: "match" or "matchers", not both')
    channel = item.get("channel")
    if not isinstance(channel, str) or not _CHANNEL_ID.fullmatch(channel):
        raise ValueError(f"route {n}: channel must be a channel ID (C0123ABCD), not {channel!r}")
    texts = item.get("match", item.get("matchers"))
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(f'route {n}: "match" must be a non-empty list of strings')
    matchers: list[Matcher] = []
    for text in texts:
        try:
            matchers += parse_matchers(text)
        except ValueError as exc:
            raise ValueError(f"route {n}: {text!r}: {exc}") from None
    if len(matchers) > MAX_MATCHERS:
        raise ValueError(f"route {n}: at most {MAX_MATCHERS} matchers")
    return Route(tuple(matchers), channel)


def parse_matchers(text: str) -> list[Matcher]:
    """The matchers of one `match` string, as Alertmanager's `ParseMatchers` reads it: braces
    optional, commas outside double quotes between matchers. ValueError saying what is wrong."""
    pieces = split_matchers(text, keep_blank=True)
    if not pieces:  # `{}` would be a route that takes everything: surely not what was meant
        raise ValueError("holds no matcher")
    if any(not piece.strip() for piece in pieces):  # `a=b,,c=d`: Alertmanager refuses it too
        raise ValueError("has an empty matcher between commas")
    return [_matcher(piece) for piece in pieces]


def _matcher(piece: str) -> Matcher:
    head = _NAME_OPERATOR.match(piece)
    name = _unescaped(head[1]) if head is not None else None
    value = _unescaped(piece[head.end() :].strip()) if head is not None else None
    if head is None or not name or value is None:
        raise ValueError(
            f"{piece.strip()!r} is not a matcher (label=value, !=, =~, !~; a value with spaces, "
            "commas or quotes in double quotes)"
        )
    is_equal, is_regex = _OPERATORS[head[2]]
    if is_regex:
        try:
            _regex(value)
        except ValueError as exc:
            raise ValueError(f"bad regex {value!r} ({exc})") from None
    return Matcher(name, value, is_equal, is_regex)


def _unescaped(raw: str) -> str | None:
    """A name or value as Alertmanager's classic parser reads it (`pkg/labels.ParseMatcher`):
    double quotes optional; in it `\\"`, `\\\\` and `\\n` are escapes and any other backslash is
    itself, so `"linux\\.rocm"` stays the regex `linux\\.rocm`. None for a quote left open or
    one inside the value."""
    quoted = raw.startswith('"')
    body = raw[1:] if quoted else raw
    out: list[str] = []
    closed, i = not quoted, 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i < len(body) - 1:
            after = body[i + 1]
            out.append("\n" if after == "n" else after if after in '"\\' else char + after)
            i += 2
            continue
        if char == '"':
            if closed or i < len(body) - 1:
                return None
            closed = True
        else:
            out.append(char)
        i += 1
    return "".join(out) if closed else None


def _holds(matcher: Matcher, labels: Mapping[str, str], runner_types: tuple[str, ...]) -> bool:
    if matcher.name == RUNNER_TYPE and RUNNER_TYPE not in labels and runner_types:
        hits = [_equal(matcher, name) for name in runner_types]
        # `=`/`=~`: some runner type matches; `!=`/`!~`: none does (Alertmanager's sense of
        # a negative matcher, over a set).
        return any(hits) if matcher.is_equal else all(hits)
    return _equal(matcher, labels.get(matcher.name, ""))


def _equal(matcher: Matcher, value: str) -> bool:
    if matcher.is_regex:
        try:
            found = _regex(matcher.value).fullmatch(value) is not None
        except UnicodeEncodeError:  # a lone surrogate (JSON allows one): not a UTF-8 label
            found = False
    else:
        found = value == matcher.value
    return found if matcher.is_equal else not found


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re2._Regexp:
    """`pattern` compiled by RE2, as Alertmanager compiles it (`pkg/labels.NewMatcher`:
    `^(?:pattern)$` in Go's regexp, RE2's syntax): `fullmatch` anchors it, and `.` does not
    match a newline. What RE2 refuses (lookarounds, backreferences, possessive repeats) is a
    ValueError naming RE2's reason."""
    try:
        return re2.compile(f"(?:{pattern})", _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        shown = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ValueError(shown) from None


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused route is reported by `serve`, not on stderr


def _shown(matcher: Matcher) -> str:
    operator = {(True, False): "=", (False, False): "!=", (True, True): "=~", (False, True): "!~"}
    return f"{matcher.name}{operator[(matcher.is_equal, matcher.is_regex)]}{matcher.value!r}"
