"""A label matcher's regex as Alertmanager and Prometheus compile it (`pkg/labels.NewMatcher`:
`^(?:` + value + `)$`, Go's regexp, whose syntax is RE2's), run on RE2: a regex either of them
would refuse is refused here, with its reason, before it reaches them."""

from __future__ import annotations

import re
from functools import lru_cache

import re2

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused regex is reported by `check` and `serve`, not on stderr
_GO_CAPTURE_NAME = re.compile(r"\(\?P<([^>]*)>")


@lru_cache(maxsize=256)
def label_regex(pattern: str) -> re2._Regexp:
    """So `a)|(b` is `^(?:a)|(b)$` and takes `axyz`; a refusal is a ValueError with its reason."""
    composed = f"^(?:{pattern})$"
    if refused := _refused_by_go(composed):
        raise ValueError(refused)
    try:
        return re2.compile(composed, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        shown = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ValueError(shown) from None


def _refused_by_go(pattern: str) -> str:
    """Why Go's regexp (Go 1.19, Alertmanager 0.25's) refuses what RE2 takes: `\\C`, `(?<name>`,
    a group name beyond ASCII letters, digits and `_` ("" when it would not)."""
    i = 0
    while i < len(pattern):
        if pattern.startswith("\\Q", i):  # literal up to `\E`
            end = pattern.find("\\E", i + 2)
            i = len(pattern) if end < 0 else end + 2
        elif pattern.startswith("\\C", i):
            return "invalid escape sequence: \\C"
        elif pattern[i] == "\\":
            i += 2
        elif pattern[i] == "[":
            i = _class_end(pattern, i)
        elif pattern.startswith("(?<", i):
            return (
                "invalid or unsupported Perl syntax: (?< (Go before 1.22; name a group (?P<name>…))"
            )
        elif (named := _GO_CAPTURE_NAME.match(pattern, i)) and not re.fullmatch(
            r"[A-Za-z0-9_]+", named[1]
        ):
            return f"invalid named capture: {named[0]}"
        else:
            i += 1
    return ""


def _class_end(pattern: str, i: int) -> int:
    """A `]` first is a member; `[:alpha:]` and escapes are passed whole."""
    j = i + 2 if pattern.startswith("[^", i) else i + 1
    first = True
    while j < len(pattern) and (pattern[j] != "]" or first):
        first = False
        posix_end = pattern.find(":]", j + 2) if pattern.startswith("[:", j) else -1
        j = posix_end + 2 if posix_end >= 0 else j + (2 if pattern[j] == "\\" else 1)
    return j + 1
