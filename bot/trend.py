"""Recent readings of a queue as a picture and a rate: a sparkline and a least-squares slope.

Pure functions over (time, value) points, so status replies, the root and `/queue` agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

BARS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 12
# A slope needs readings at least this far apart, or one noisy reading sets the trend.
MIN_SPAN_MINS = 2.0


def sparkline(values: Sequence[float | None], *, points: int = SPARK_POINTS) -> str:
    """The last `points` values as bars scaled from 0 to their maximum; unknown ones as gaps."""
    shown = list(values)[-points:]
    known = [v for v in shown if v is not None]
    if len(known) < 2:
        return ""
    top = max(max(known), 0)

    def bar(value: float) -> str:
        if top <= 0 or value <= 0:
            return BARS[0]
        return BARS[min(int(value / top * (len(BARS) - 1) + 0.5), len(BARS) - 1)]

    return "".join(" " if v is None else bar(v) for v in shown)


def slope_per_min(points: Sequence[tuple[datetime, float]]) -> float | None:
    """Least-squares change per minute of the points; None when they span too little time."""
    if len(points) < 2:
        return None
    t0 = points[0][0]
    xs = [(at - t0).total_seconds() / 60 for at, _ in points]
    if xs[-1] - xs[0] < MIN_SPAN_MINS:
        return None
    ys = [value for _, value in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
