"""Grafana's `valueString` (`[ var='B' labels={k=v, k2=v2} value=1 ], ...`, escaping nothing),
parsed in time linear in its length: it runs on the webhook's event loop against unauthenticated
input (a regex with overlapping lazy groups once took 7.7 s on 12.7 KB). An entry ends at the
first `} value=<v> ]`, starts at the first `[` before that which opens `var='`, `metric='` or
`labels={`; a malformed or truncated entry is skipped, not refused."""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, Field

# Possessive quantifiers and classes that exclude the next literal: nothing here can backtrack.
_TAIL = re.compile(r"\}\s*+value=([^\s\]}]*+)\s*+\]")
_OPEN = re.compile(r"\[\s*+(?=var='|metric='|labels=\{)")
_NAME_END = {
    "var='": re.compile(r"'\s*+(?=metric='|labels=\{)"),
    "metric='": re.compile(r"'\s*+(?=labels=\{)"),
}
_LABELS = "labels={"


class Series(BaseModel, frozen=True):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: float | None = None


def finite(value: object) -> float | None:
    """From a JSON number or numeric text; NaN, infinities and anything else give None."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):  # text, or an integer beyond float range
        return None
    return number if math.isfinite(number) else None


def _head(text: str, start: int, end: int) -> tuple[str, int] | None:
    """The name and labels' index of the entry in `text[start:end]`: every search stops at `end`,
    so an entry costs its own length whatever stray `[` it holds."""
    opening = _OPEN.search(text, start, end)
    if opening is None:
        return None
    name, at = "", opening.end()
    for keyword, name_end in _NAME_END.items():
        if not text.startswith(keyword, at, end):
            continue
        closing = name_end.search(text, at + len(keyword), end)
        if closing is None:
            return None
        name = name or text[at + len(keyword) : closing.start()]
        at = closing.end()
    if not text.startswith(_LABELS, at, end):
        return None
    return name, at + len(_LABELS)


def parse_value_string(text: object) -> list[Series]:
    """The only place labelled results live."""
    if not isinstance(text, str) or not text.strip():
        return []
    series: list[Series] = []
    start = 0
    for tail in _TAIL.finditer(text):
        head = _head(text, start, tail.start())
        start = tail.end()
        if head is not None:
            name, labels_start = head
            # `k=v, k2=v2`: Grafana prints label sets unquoted, comma-space separated.
            pairs = (part.partition("=") for part in text[labels_start : tail.start()].split(", "))
            labels = {k.strip(): v.strip() for k, sep, v in pairs if sep}
            series.append(Series(name=name, labels=labels, value=finite(tail[1])))
    return series
