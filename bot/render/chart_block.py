"""The trend as Slack draws it: a Block Kit `data_visualization` line chart, no upload.

Slack's limits for the block (docs.slack.dev/reference/block-kit/blocks/data-visualization-block):
a title of at most 50 characters; a line chart has 1 to 6 uniquely named series (names of at most
20 characters) over 1 to 20 categories (labels of at most 20 characters), and every series has
exactly one finite value per category; a message holds at most two such blocks. The chart shows
queued jobs per runner type (the worst few, as the picture does) at up to 20 moments of the
incident, evenly spread and always ending with the latest.

A workspace that refuses the block (`invalid_blocks`) gets the picture instead: the sender takes
the block out (`without_charts`) and the tick uploads the PNG (`bot.render.chart`).
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
    """The line chart of `data`'s queued jobs; None when there is no line to draw."""
    series = {name: points for name, points in data.series.items() if points}
    if not series:
        return None
    times = sorted({at for points in series.values() for at, _, _ in points})
    times = _spread(times, MAX_CATEGORIES)
    if len(times) < 2:
        return None
    categories = _labels(times)
    names = _names(list(series)[:MAX_SERIES])
    drawn = []
    # Slack wants one value per moment in every series: a type the reading did not show then
    # was not queueing (a view lists the types that queue), so it is 0, not its last value.
    for name, shown in names.items():
        queued = {at: q for at, q, _ in series[name]}
        values = [queued.get(at) or 0.0 for at in times]
        drawn.append(
            {
                "name": shown,
                "data": [
                    {"label": label, "value": value}
                    for label, value in zip(categories, values, strict=True)
                ],
            }
        )
    return {
        "type": BLOCK_TYPE,
        "block_id": "queue_trend",
        "title": cut(data.title or "Queue trend", MAX_TITLE),
        "chart": {
            "type": "line",
            "series": drawn,
            "axis_config": {
                "categories": categories,
                "x_label": "UTC",
                "y_label": "queued jobs",
            },
        },
    }


def has_charts(rendered: Rendered) -> bool:
    return any(block.get("type") == BLOCK_TYPE for block in rendered.blocks)


def blames_charts(rendered: Rendered, details: Sequence[str]) -> bool:
    """Whether Slack's refusal of `rendered` (invalid_blocks) is its chart's: a json-pointer in
    its messages names a chart block, or it names none and the message has one (a workspace
    that does not know the block type may say no more)."""
    if not has_charts(rendered):
        return False
    pointed = [int(found) for d in details for found in _BLOCK_POINTER.findall(d)]
    if not pointed:
        return True
    return any(
        0 <= i < len(rendered.blocks) and rendered.blocks[i].get("type") == BLOCK_TYPE
        for i in pointed
    )


def without_charts(rendered: Rendered) -> Rendered:
    """The message with its chart blocks taken out (for a workspace that refuses them)."""
    if not has_charts(rendered):
        return rendered
    blocks = [block for block in rendered.blocks if block.get("type") != BLOCK_TYPE]
    return Rendered(rendered.text, blocks)


def _spread(times: list[float], most: int) -> list[float]:
    """At most `most` of `times`, evenly spread, the first and the latest always among them."""
    if len(times) <= most:
        return times
    step = (len(times) - 1) / (most - 1)
    return [times[round(i * step)] for i in range(most)]


def _labels(times: list[float]) -> list[str]:
    """Time labels (UTC), unique as Slack's categories must be: minutes when they tell the
    moments apart, seconds when not, a counter as the last resort (two readings in a second)."""
    for shape in ("%H:%M", "%H:%M:%S"):
        labels = [datetime.fromtimestamp(at, UTC).strftime(shape) for at in times]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{label} #{i + 1}" for i, label in enumerate(labels)]


def _names(names: list[str]) -> dict[str, str]:
    """Each runner type's legend name: at most 20 characters, unique among the series."""
    return dict(zip(names, series_labels([n or "all runner types" for n in names]), strict=True))


def series_labels(names: Sequence[str], most: int = MAX_LABEL) -> list[str]:
    """A label of at most `most` characters for each name, all different.

    A runner type says what it is from the left (`linux.g5.48xlarge.nvidia.gpu`: OS, family,
    size), so a long one keeps its leading dot-separated parts and ends in "…"
    (`linux.g5.48xlarge…`); cutting out its middle lost the size that tells two GPU types apart.
    Types that still read the same keep their ends instead (`…nightly.a`, `…nightly.b`), and
    only when those match too does a number set them apart.
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
    """`name`'s leading dot-separated parts that fit before "…" (a plain cut where whole
    parts would leave less than half the room)."""
    if len(name) <= most:
        return name
    dot = name.rfind(".", 0, most)
    return (name[:dot] if dot >= most // 2 else name[: most - 1]) + "…"


def _trailing(name: str, most: int) -> str:
    """`name`'s trailing dot-separated parts that fit after "…" (a plain cut where whole
    parts would leave less than half the room)."""
    if len(name) <= most:
        return name
    tail = name[-most:]
    dot = tail.find(".")
    return "…" + (tail[dot + 1 :] if 0 <= dot <= most // 2 else tail[1:])


def cut(text: str, most: int) -> str:
    """`text` within `most` characters, "…" where it was cut."""
    if len(text) <= most:
        return text
    return text[: most - 1] + "…"
