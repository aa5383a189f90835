"""PROMETHEUS_SELECTOR: label matchers in PromQL's syntax (`cluster="prod", region=~"eu-.*"`)
added to every default query's series, so one cluster's scale sets are read from a Prometheus
holding several clusters' same-named ones. Read as Prometheus's lexer reads them
(`promql/parser/lex.go`); written back double-quoted (`selector_text`), so a value cannot end
the selector or add to the query."""

from __future__ import annotations

import json
import re

from bot.domain.alerting.alerts import OPERATORS, Matcher
from bot.domain.alerting.label_regex import label_regex

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_SPACE = " \t\n\r"  # the lexer's `isSpace`
_SPACES = re.compile(f"[{_SPACE}]*")
# What an operator may have meant as a name or an operator: read whole, then judged.
_WORD = re.compile(r"[^=!~<>:,\"'`\s{}]+")
_SIGNS = re.compile(r"[=!~<>:]+")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
# `\` then: digits of an octal escape, or the letter and digit count of a hex one.
_NUMERIC = {"x": (2, 16), "u": (4, 16), "U": (8, 16)}
_FIX = 'write label="value", comma-separated: cluster="prod", namespace=~"arc-.*"'


def parse_selector(text: str) -> tuple[Matcher, ...]:
    """The matchers of `text` (one `{…}` around them allowed); a ValueError naming the fix."""
    body = text.strip(_SPACE)
    if body.startswith("{") != body.endswith("}"):
        raise ValueError(f"a brace without its pair: {_FIX}")
    body = body.removeprefix("{").removesuffix("}")
    matchers: list[Matcher] = []
    i = _SPACES.match(body, 0).end()
    while i < len(body):
        matcher, i = _matcher(body, i)
        matchers.append(matcher)
        i = _SPACES.match(body, i).end()
        if i < len(body) and body[i] != ",":
            after = selector_text([matcher])
            raise ValueError(f"{body[i:][:20]!r} after {after}: separate matchers with a comma")
        i = _SPACES.match(body, i + 1).end()
    return tuple(matchers)


def selector_text(matchers: tuple[Matcher, ...] | list[Matcher]) -> str:
    """`cluster="prod", region=~"eu-.*"` (JSON's escapes are Go's)."""
    return ", ".join(
        f"{m.name}{m.operator}{json.dumps(m.value, ensure_ascii=False)}" for m in matchers
    )


def vector(metric: str, *matchers: str, where: str = "") -> str:
    """`metric{matchers…, where}`, `where` the written PROMETHEUS_SELECTOR."""
    inside = ", ".join([*matchers, where] if where else matchers)
    return f"{metric}{{{inside}}}" if inside else metric


def _matcher(text: str, i: int) -> tuple[Matcher, int]:
    word = _WORD.match(text, i)
    if word is None:
        raise ValueError(f"{text[i:][:20]!r} is not a matcher: {_FIX}")
    name = word[0]
    if not LABEL_NAME.fullmatch(name):
        raise ValueError(
            f"{name[:40]!r} is not a label name: letters, digits and _, not starting with a digit"
        )
    if name == "__name__":
        raise ValueError("__name__ is each query's own: select by other labels")
    i = _SPACES.match(text, word.end()).end()
    signs = _SIGNS.match(text, i)
    if signs is None:
        raise ValueError(f'{name} needs an operator and a value: {name}="…" (or !=, =~, !~)')
    operator = signs[0]
    if operator not in OPERATORS:
        raise ValueError(f"{name}{operator}: unknown operator {operator!r}; use =, !=, =~ or !~")
    i = _SPACES.match(text, signs.end()).end()
    value, i = _value(text, i, f"{name}{operator}")
    is_equal, is_regex = OPERATORS[operator]
    if is_regex:
        try:
            label_regex(value)
        except ValueError as exc:
            raise ValueError(f"{name}{operator}{json.dumps(value)}: bad regex ({exc})") from None
    return Matcher(name, value, is_equal, is_regex), i


def _value(text: str, i: int, said: str) -> tuple[str, int]:
    """The string at `i` and where it ends: "…", '…' (Go's escapes) or `…` (raw)."""
    quote = text[i] if i < len(text) else ""
    if quote not in ('"', "'", "`"):
        bare = _WORD.match(text, i)
        shown = bare[0] if bare else "value"
        raise ValueError(f'{said}{shown[:40]}: quote the value: {said}"{shown[:40]}"')
    value: list[str] = []
    i += 1
    while i < len(text) and text[i] != quote and (quote == "`" or text[i] != "\n"):
        if text[i] == "\\" and quote != "`":
            char, i = _escape(text, i + 1, quote, said)
            value.append(char)
        else:
            value.append(text[i])
            i += 1
    if i >= len(text) or text[i] != quote:
        raise ValueError(f"{said}{quote}…: the value's closing {quote} is missing")
    found = "".join(value)
    if any("\ud800" <= char <= "\udfff" for char in found):  # an undecodable byte of the setting
        raise ValueError(f"{said}: the value is not valid UTF-8")
    return found, i + 1


def _escape(text: str, i: int, quote: str, said: str) -> tuple[str, int]:
    """The character the escape after a `\\` at `i - 1` stands for, and where it ends."""
    char = text[i] if i < len(text) else ""
    if char in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[char], i + 1
    if char in ("\\", quote):
        return char, i + 1
    octal = char != "" and char in "01234567"
    if char in _NUMERIC or octal:
        digits, base = (3, 8) if octal else _NUMERIC[char]
        start = i if octal else i + 1
        number = text[start : start + digits]
        allowed = "01234567" if base == 8 else "0123456789abcdefABCDEF"
        if len(number) < digits or any(d not in allowed for d in number):
            raise ValueError(f"{said}: \\{char} needs {digits} digits of base {base}")
        code = int(number, base)
        # `\x` and octal escapes are bytes: past ASCII they would be half of a character.
        if (octal or char == "x") and code > 0x7F:
            raise ValueError(f"{said}: \\{text[i : start + digits]} is a byte: write the character")
        if code > 0x10FFFF or 0xD800 <= code < 0xE000:
            raise ValueError(f"{said}: \\{text[i : start + digits]} is no Unicode character")
        return chr(code), start + digits
    shown = f"\\{char}" if char else "a \\ at the end"
    raise ValueError(f"{said}: unknown escape {shown} (a backslash itself is \\\\)")
