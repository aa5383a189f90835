"""Slack's `data_visualization` block (line, bar, area and pie charts drawn by Slack), judged as
Slack judges it.

slack_sdk (3.48) has no model for this block, so its rules are written here, from Slack's
reference page, docs.slack.dev/reference/block-kit/blocks/data-visualization-block ("the page"):

- block: `type`, `title` (at most 50 characters) and `chart` required, `block_id` optional (the
  page's "Fields"; 255 characters is every block's `block_id` limit).
- chart `type` one of pie, bar, area, line (the page's "Chart-specific fields").
- pie: `segments`, min 1 max 6, each a `label` of at most 20 characters and a `value` greater
  than 0 (the page's "Pie" and "Segment").
- bar, area, line: `series`, min 1 max 6 (the page's "Bar", "Area", "Line"), each a `name` of at
  most 20 characters, unique in the chart, and `data`, 1 to 20 points of a `label` of at most 20
  characters and a numeric `value` ("Data Series", "Data Point"); `axis_config` with `categories`
  (1 to 20, at most 20 characters each) and optional `x_label` and `y_label` (at most 50
  characters) ("Axis Config"); each series' point labels are the categories, one value for each.
  The stored copy of the page read for this module breaks off at "Data Series"; those last tables
  are as the kaicoh/slack-messaging crate (0.7.7) transcribes them, each linked to the page's
  anchor. Other third parties (slack-morphism, OpenClaw) say 1 to 12 series and segments; the
  page says 6, and so does this module.
- at most two such blocks in one message (announced with the block, changelog 2026-06-16).

Two rules are this emulator's reading rather than the page's words, both on the strict side so a
bot that passes here passes on Slack: a required string may not be empty, and categories must be
unique (a category named twice could not have "one value" in a series). Values are JSON numbers:
a boolean or a string is not one, and NaN or an infinity (which Python's json module decodes) is
refused as Slack's JSON would refuse it; a bar, area or line value may be 0 or negative.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BLOCK_TYPE = "data_visualization"
MAX_PER_MESSAGE = 2
MAX_TITLE = 50
MAX_BLOCK_ID = 255
MAX_LABEL = 20  # a segment's label, a series' name, a data point's label, a category
MAX_AXIS_TITLE = 50  # x_label, y_label
MAX_SEGMENTS = 6
MAX_SERIES = 6
MAX_POINTS = 20
MAX_CATEGORIES = 20
CHART_TYPES = ("pie", "bar", "area", "line")

# (JSON pointer below the block, Slack-style wording)
Problem = tuple[str, str]


@dataclass
class _Found:
    """The problems found so far; a check reports here and returns what it could read."""

    problems: list[Problem] = field(default_factory=list)

    def __call__(self, at: str, wording: str) -> None:
        self.problems.append((at, wording))


def chart_problems(block: Mapping[str, Any]) -> list[Problem]:
    """What Slack would refuse in one `data_visualization` block; empty means valid."""
    found = _Found()
    _text(found, block, "title", "", MAX_TITLE)
    _text(found, block, "block_id", "", MAX_BLOCK_ID, required=False)
    chart = _object(found, block, "chart", "")
    if chart is not None:
        _chart(found, chart)
    return found.problems


def excess_charts(blocks: Sequence[object]) -> list[int]:
    """Indexes of the `data_visualization` blocks past the two a message may hold."""
    charts = [
        i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("type") == BLOCK_TYPE
    ]
    return charts[MAX_PER_MESSAGE:]


def _chart(found: _Found, chart: Mapping[str, Any]) -> None:
    kind = chart.get("type")
    if kind is None:
        found("/chart", "missing required field: type")
    elif not isinstance(kind, str) or kind not in CHART_TYPES:
        found("/chart/type", f"must be one of the following values: {', '.join(CHART_TYPES)}")
    elif kind == "pie":
        for i, item in enumerate(_array(found, chart, "segments", "/chart", MAX_SEGMENTS)):
            segment = _item_object(found, item, f"/chart/segments/{i}")
            if segment is not None:
                _text(found, segment, "label", f"/chart/segments/{i}", MAX_LABEL)
                _number(found, segment, f"/chart/segments/{i}", positive=True)
    else:
        _series_chart(found, chart)


def _series_chart(found: _Found, chart: Mapping[str, Any]) -> None:
    """bar, area and line: named series over the axis' categories."""
    categories = _categories(found, chart)
    names: set[str] = set()
    for i, item in enumerate(_array(found, chart, "series", "/chart", MAX_SERIES)):
        at = f"/chart/series/{i}"
        series = _item_object(found, item, at)
        if series is None:
            continue
        name = _text(found, series, "name", at, MAX_LABEL)
        if name in names:
            found(f"{at}/name", f"series names must be unique, {name!r} is repeated")
        if name is not None:
            names.add(name)
        points = _array(found, series, "data", at, MAX_POINTS)
        labels = [_point(found, p, f"{at}/data/{j}") for j, p in enumerate(points)]
        if categories is not None and labels and None not in labels:
            _one_value_per_category(found, [str(label) for label in labels], categories, at)


def _point(found: _Found, item: object, at: str) -> str | None:
    """A data point's label, once the point is valid (None when it is not)."""
    point = _item_object(found, item, at)
    if point is None:
        return None
    label = _text(found, point, "label", at, MAX_LABEL)
    return label if _number(found, point, at, positive=False) else None


def _categories(found: _Found, chart: Mapping[str, Any]) -> list[str] | None:
    """The axis' categories when they are valid, else None (the labels cannot be matched)."""
    axis = _object(found, chart, "axis_config", "/chart")
    if axis is None:
        return None
    at = "/chart/axis_config"
    _text(found, axis, "x_label", at, MAX_AXIS_TITLE, required=False)
    _text(found, axis, "y_label", at, MAX_AXIS_TITLE, required=False)
    before = len(found.problems)
    items = _array(found, axis, "categories", at, MAX_CATEGORIES)
    categories = [
        _label(found, item, f"{at}/categories/{i}", MAX_LABEL) for i, item in enumerate(items)
    ]
    for name, count in Counter(c for c in categories if c is not None).items():
        if count > 1:
            found(f"{at}/categories", f"categories must be unique, {name!r} is repeated")
    if len(found.problems) > before or not categories:
        return None
    return [str(c) for c in categories]


def _one_value_per_category(
    found: _Found, labels: list[str], categories: list[str], at: str
) -> None:
    """Slack's page: each series' data point labels are the categories, one value for each."""
    counts = Counter(labels)
    for label in counts:
        if label not in categories:
            found(f"{at}/data", f"label {label!r} is not one of axis_config.categories")
        elif counts[label] > 1:
            found(f"{at}/data", f"more than one value for category {label!r}")
    for category in categories:
        if category not in counts:
            found(f"{at}/data", f"no value for category {category!r}")


# -- fields -----------------------------------------------------------------------------------


def _object(found: _Found, parent: Mapping[str, Any], name: str, at: str) -> dict[str, Any] | None:
    """A required object field, None (and reported) when absent or not an object."""
    value = parent.get(name)
    if value is None:
        found(at, f"missing required field: {name}")
        return None
    return _item_object(found, value, f"{at}/{name}")


def _item_object(found: _Found, value: object, at: str) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        found(at, "must provide an object")
        return None
    return value


def _array(found: _Found, parent: Mapping[str, Any], name: str, at: str, most: int) -> list[Any]:
    """A required array field with 1 to `most` items; [] when absent or not an array."""
    value = parent.get(name)
    if value is None:
        found(at, f"missing required field: {name}")
        return []
    if not isinstance(value, list):
        found(f"{at}/{name}", "must provide an array")
        return []
    if not value:
        found(f"{at}/{name}", "must contain at least 1 item")
    elif len(value) > most:
        found(f"{at}/{name}", f"no more than {most} items allowed")
    return value


def _text(
    found: _Found,
    parent: Mapping[str, Any],
    name: str,
    at: str,
    most: int,
    *,
    required: bool = True,
) -> str | None:
    """A string field of at most `most` characters; None when absent or invalid."""
    value = parent.get(name)
    if value is None:
        if required:
            found(at, f"missing required field: {name}")
        return None
    return _label(found, value, f"{at}/{name}", most)


def _label(found: _Found, value: object, at: str, most: int) -> str | None:
    if not isinstance(value, str):
        found(at, "must be a string")
        return None
    if not value:
        found(at, "must be more than 0 characters")
        return None
    if len(value) > most:
        found(at, f"must be less than {most + 1} characters")
        return None
    return value


def _number(found: _Found, parent: Mapping[str, Any], at: str, *, positive: bool) -> bool:
    """Whether `value` is a finite JSON number (greater than 0 when `positive`, as a pie
    segment's must be); reported when not."""
    value = parent.get("value")
    if value is None:
        found(at, "missing required field: value")
        return False
    # bool is an int to Python, never a number to JSON.
    if isinstance(value, bool) or not isinstance(value, int | float):
        found(f"{at}/value", "must be a number")
        return False
    if not _finite(value):
        found(f"{at}/value", "must be a finite number")
        return False
    if positive and value <= 0:
        found(f"{at}/value", "must be greater than 0")
        return False
    return True


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer past any double, which Slack cannot read as a number
        return False
