"""The trend as Slack draws it: a Block Kit `data_visualization` line chart, no upload.

Slack's limits for the block: a title of at most 50 characters; a line chart has 1 to 6 uniquely
named series (names of at most 20 characters) over 1 to 20 unique categories (labels of at most 20
characters), every series with one finite value per category. A workspace that refuses the block
(`invalid_blocks`) gets the picture instead: the sender takes the block out (`without_charts`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bot.domain.message import Rendered
from bot.render.chart import ChartData

BLOCK_TYPE = "data_visualization"
_BLOCK_POINTER = re.compile(r"json-pointer:/blocks/(\d+)")
MAX_TITLE = 50
MAX_SERIES = 6
MAX_CATEGORIES = 20
MAX_LABEL = 20


def chart_block(data: ChartData) -> dict[str, Any] | None:
    """Queued jobs per runner type at up to 20 moments, evenly spread and ending with the latest;
    None when there is no line to draw."""
    series = {name: points for name, points in data.series.items() if points}
    times = sorted({at for points in series.values() for at, _, _ in points})
    if len(times) > MAX_CATEGORIES:
        step = (len(times) - 1) / (MAX_CATEGORIES - 1)
        times = [times[round(i * step)] for i in range(MAX_CATEGORIES)]
    if len(times) < 2:
        return None
    categories = _labels(times)
    names = list(series)[:MAX_SERIES]
    labels = series_labels([name or "all runner types" for name in names])
    drawn = []
    for name, shown in zip(names, labels, strict=True):
        # One value per moment: a type the reading did not show then was not queueing (a view
        # lists the types that queue), so it is 0, not its last value.
        queued = {at: q for at, q, _ in series[name]}
        values = [queued.get(at) or 0.0 for at in times]
        points = zip(categories, values, strict=True)
        drawn.append({"name": shown, "data": [{"label": lb, "value": v} for lb, v in points]})
    axes = {"categories": categories, "x_label": "UTC", "y_label": "queued jobs"}
    return {
        "type": BLOCK_TYPE,
        "block_id": "queue_trend",
        "title": cut(data.title or "Queue trend", MAX_TITLE),
        "chart": {"type": "line", "series": drawn, "axis_config": axes},
    }


def has_charts(rendered: Rendered) -> bool:
    return any(block.get("type") == BLOCK_TYPE for block in rendered.blocks)


def blames_charts(rendered: Rendered, details: Sequence[str]) -> bool:
    """Whether Slack's refusal (invalid_blocks) is the chart's: a json-pointer in its messages
    names a chart block, or it names none and the message has one."""
    if not has_charts(rendered):
        return False
    pointed = [int(found) for d in details for found in _BLOCK_POINTER.findall(d)]
    return not pointed or any(
        0 <= i < len(rendered.blocks) and rendered.blocks[i].get("type") == BLOCK_TYPE
        for i in pointed
    )


def without_charts(rendered: Rendered) -> Rendered:
    if not has_charts(rendered):
        return rendered
    return Rendered(rendered.text, [b for b in rendered.blocks if b.get("type") != BLOCK_TYPE])


def _labels(times: list[float]) -> list[str]:
    """Unique UTC time labels: minutes when they tell the moments apart, seconds when not, a
    counter as the last resort (two readings in a second)."""
    for shape in ("%H:%M", "%H:%M:%S"):
        labels = [datetime.fromtimestamp(at, UTC).strftime(shape) for at in times]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{label} #{i + 1}" for i, label in enumerate(labels)]


def series_labels(names: Sequence[str], most: int = MAX_LABEL) -> list[str]:
    """A label of at most `most` characters for each name, all different.

    A runner type says what it is from the left (`linux.g5.48xlarge.nvidia.gpu`), so a long one
    keeps its leading dot-separated parts (`linux.g5.48xlarge…`); types that still read the same
    keep their ends instead (`…nightly.a`), and only when those match too does a number part them.
    """
    labels = [_leading(name, most) for name in names]
    for label, count in Counter(labels).items():
        if count > 1:
            same = [i for i, other in enumerate(labels) if other == label]
            ends = [_trailing(names[i], most) for i in same]
            if len(set(ends)) == len(ends):
                for i, end in zip(same, ends, strict=True):
                    labels[i] = end
    taken: set[str] = set()
    for i, label in enumerate(labels):
        n = 2
        while label in taken:
            suffix = f" {n}"
            label, n = _leading(names[i], most - len(suffix)) + suffix, n + 1
        taken.add(label)
        labels[i] = label
    return labels


def _leading(name: str, most: int) -> str:
    """The leading dot-separated parts that fit before "…" (a plain cut where whole parts would
    leave less than half the room)."""
    if len(name) <= most:
        return name
    dot = name.rfind(".", 0, most)
    return (name[:dot] if dot >= most // 2 else name[: most - 1]) + "…"


def _trailing(name: str, most: int) -> str:
    """The trailing dot-separated parts that fit after "…", likewise."""
    if len(name) <= most:
        return name
    tail = name[-most:]
    dot = tail.find(".")
    return "…" + (tail[dot + 1 :] if 0 <= dot <= most // 2 else tail[1:])


def cut(text: str, most: int) -> str:
    """`text` within `most` characters, "…" where it was cut."""
    return text if len(text) <= most else text[: most - 1] + "…"
