"""Which Slack channel an alert group's incident goes to: `SLACK_ROUTES`, first match wins. Each
match string is read as Alertmanager's classic `pkg/labels.ParseMatchers` reads it, each regex
run on RE2 as Go composes it: a route's `matchers:` copied from an Alertmanager config means the
same here, and one Alertmanager would refuse is refused at start."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bot.domain.alerting.alerts import OPERATORS, AlertFacts, Matcher
from bot.domain.alerting.label_regex import label_regex

MAX_ROUTES = 100
MAX_MATCHERS = 20
RUNNER_TYPE = "runner_type"
# Slack's channel IDs: C (public), G (private, older), D is a DM and not a place for incidents.
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,}")
# Alertmanager's classic `ParseMatcher`: Go's `\s` is ASCII, and `\v` is not among it.
_MATCHER = re.compile(
    r"[\t\n\f\r ]*([a-zA-Z_:][a-zA-Z0-9_:]*)[\t\n\f\r ]*(=~|=|!=|!~)[\t\n\f\r ]*(.*?)[\t\n\f\r ]*",
    re.S,
)
# Go's `unicode.IsSpace`, which `strings.TrimSpace` trims from the last matcher of a string.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)

# A value: an optional quote, escapes or anything but a quote (possessive: nothing to backtrack
# into), a lone trailing backslash, a closing quote iff it opened with one. Only `\"`, `\\`
# and `\n` are escapes, so `"linux\.rocm"` stays the regex `linux\.rocm`.
_VALUE = re.compile(r'("?)((?:\\.|[^"\\])*+\\?)("?)', re.S)
_ESCAPES = {"n": "\n", '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class Route:
    matchers: tuple[Matcher, ...]
    channel: str
    # What its matchers most likely meant (`typo_of`), for `check` and `serve` to warn of.
    typos: tuple[str, ...] = field(default=(), compare=False)

    def takes(self, labels: Mapping[str, str], runner_types: Iterable[str] = ()) -> bool:
        return all(_holds(m, labels, tuple(runner_types)) for m in self.matchers)

    @property
    def on_type(self) -> bool:
        return all(m.name == RUNNER_TYPE for m in self.matchers)

    @property
    def text(self) -> str:
        return ", ".join(f"{m.name}{m.operator}{m.value!r}" for m in self.matchers) or "everything"


def parse_routes(text: str | None) -> tuple[Route, ...]:
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
    shown = {**facts.labels}
    told = (("team", facts.team), ("priority", facts.priority))
    shown |= {name: value for name, value in told if value and not shown.get(name)}
    return next((r.channel for r in routes if r.takes(shown, facts.runner_types)), default)


@dataclass(frozen=True)
class Routing:
    routes: tuple[Route, ...] = ()
    default: str = ""

    def owns(self, channel: str, runner_type: str) -> bool:
        """Without routes every type is every channel's."""
        return not self.routes or not channel or self.channel_of_type(runner_type) == channel

    @property
    def channels(self) -> frozenset[str]:
        return frozenset({self.default, *(r.channel for r in self.routes)}) - {""}

    def types_of(self, channel: str, runner_types: Iterable[str]) -> tuple[str, ...] | None:
        """The runner types `channel` owns; None when it answers for every type: without routes,
        in a channel no route names, and in a team channel whose routes match other labels only
        (`team="rocm"`), where an empty answer would hide its queues."""
        if not self.routes or channel not in self.channels:
            return None
        typed = any(r.on_type for r in self.routes if r.channel == channel)
        if not typed and channel != self.default:
            return None
        return tuple(name for name in runner_types if self.owns(channel, name))

    def channel_of_type(self, runner_type: str) -> str:
        """Where a type's early warning goes: it has no labels, so the first route made of
        `runner_type` matchers alone that takes it."""
        taking = (r.channel for r in self.routes if r.on_type and r.takes({}, (runner_type,)))
        return next(taking, self.default)


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
    typos: list[str] = []
    for text in texts:
        try:
            matchers += [_matcher(piece) for piece in matcher_pieces(text)]
        except ValueError as exc:
            raise ValueError(f"route {n}: {text!r}: {exc}") from None
        typos += filter(None, map(typo_of, matcher_pieces(text)))
    if len(matchers) > MAX_MATCHERS:
        raise ValueError(f"route {n}: at most {MAX_MATCHERS} matchers")
    return Route(tuple(matchers), channel, tuple(typos))


def typo_of(piece: str) -> str:
    """What a matcher whose unquoted value starts with `=` or `~` most likely meant, or "".
    Alertmanager reads `team==rocm` as team equal to "=rocm", and so does this, but such a value
    is no team's; a quoted one (`team="=rocm"`) was meant."""
    found = _MATCHER.fullmatch(piece)
    if found is None:
        return ""
    name, operator, raw = found.groups()
    if not raw.startswith(("=", "~")):
        return ""
    meant = json.dumps(raw.lstrip("=~"), ensure_ascii=False)
    said = json.dumps(raw, ensure_ascii=False)
    # `team=~rocm-.*` read as `=` then "~rocm-.*" was a regex match: `=~` (`!=~`: `!~`).
    regex = raw.startswith("~") and operator in ("=", "!=")
    wanted = {"=": "=~", "!=": "!~"}[operator] if regex else operator
    return f"{name}{operator}{raw}: the value is {said}; did you mean {name}{wanted}{meant}?"


def matcher_pieces(text: str) -> list[str]:
    """Cut as `ParseMatchers` cuts: braces dropped, at commas outside quotes, only the last piece
    trimmed and dropped when blank."""
    text = text.removeprefix("{").removesuffix("}")
    pieces: list[str] = []
    start, quoted, escaped = 0, False, False
    for i, char in enumerate(text):
        if char == "," and not quoted:
            pieces.append(text[start:i])
            start = i + 1
        elif char == '"':
            quoted, escaped = quoted != (not escaped), False
        elif char == "\\":
            escaped = not escaped
        elif char != ",":
            escaped = False
    last = text[start:].strip(_GO_SPACE)
    return [*pieces, last] if last else pieces


def _matcher(piece: str) -> Matcher:
    found = _MATCHER.fullmatch(piece)
    if found is None:
        if not piece.strip(_GO_SPACE):  # `a=b,,c=d`: Alertmanager refuses it too
            raise ValueError("has an empty matcher between commas")
        raise ValueError(
            f"{piece.strip()!r} is not a matcher (label=value, !=, =~, !~; a label name of "
            "letters, digits, _ and :, unquoted; a value with spaces, commas or quotes in double "
            "quotes)"
        )
    name, operator, raw = found.groups()
    if any("\ud800" <= char <= "\udfff" for char in raw):  # an undecodable byte of the setting
        raise ValueError(f"the value of {name!r} is not valid UTF-8")
    quoted = _VALUE.fullmatch(raw)
    if quoted is None or quoted[1] != quoted[3]:
        raise ValueError(f'{raw!r}: a double quote left open or inside the value (write \\")')
    value = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[0]), quoted[2], flags=re.S)
    is_equal, is_regex = OPERATORS[operator]
    if is_regex:
        try:
            label_regex(value)
        except ValueError as exc:
            raise ValueError(f"bad regex {value!r} ({exc})") from None
    return Matcher(name, value, is_equal, is_regex)


def _holds(matcher: Matcher, labels: Mapping[str, str], runner_types: tuple[str, ...]) -> bool:
    if matcher.name == RUNNER_TYPE and RUNNER_TYPE not in labels and runner_types:
        hits = [matcher.holds(name) for name in runner_types]
        # `=`/`=~`: some runner type matches; `!=`/`!~`: none does.
        return any(hits) if matcher.is_equal else all(hits)
    return matcher.holds(labels.get(matcher.name, ""))
