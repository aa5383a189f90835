"""Slack's `data_visualization` blocks (docs.slack.dev/reference/block-kit/blocks/
data-visualization-block) as the tests build them: a line (bar, area) chart over categories, a
pie, and a block with one field set or taken out."""

from __future__ import annotations

import copy
from typing import Any

DELETE = object()  # for `changed`: the field is taken out


def line(*series: tuple[str, list[float]], categories: list[str] | None = None) -> dict[str, Any]:
    """A line chart block; each series' values go with the categories in order."""
    series = series or (("queued", [3, 9, 4]),)
    categories = categories or ["08:00", "08:05", "08:10"]
    points = [
        {
            "name": name,
            "data": [{"label": c, "value": v} for c, v in zip(categories, vs, strict=True)],
        }
        for name, vs in series
    ]
    axis = {"categories": categories, "x_label": "UTC", "y_label": "jobs"}
    chart = {"type": "line", "series": points, "axis_config": axis}
    return {"type": "data_visualization", "title": "Queue trend", "chart": chart}


def pie(*segments: tuple[str, float]) -> dict[str, Any]:
    segments = segments or (("linux.2xlarge", 12), ("gpu", 3))
    chart = {"type": "pie", "segments": [{"label": k, "value": v} for k, v in segments]}
    return {"type": "data_visualization", "title": "Queued by runner type", "chart": chart}


def changed(block: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """`block` with the field at `path` (a JSON pointer below the block) set, or taken out."""
    out = copy.deepcopy(block)
    *parents, last = path.strip("/").split("/")
    target: Any = out
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key: Any = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]
    else:
        target[key] = value
    return out
