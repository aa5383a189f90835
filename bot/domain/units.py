"""Quantities as people read them: "14", "2.5", "18 min", "1 h 18 min", "▲ +12 min".

Pure and plain text (nothing to escape): domain text (diagnostics, the incident's own notes) and
the Block Kit renderers say numbers the same way.
"""

from __future__ import annotations

import math
from datetime import timedelta


def number(value: float) -> str:
    """Integers without ".0", other values to one decimal: "14", "2.5"."""
    if not math.isfinite(value):
        return str(value)
    rounded = round(float(value), 1)
    if rounded.is_integer():
        return str(int(rounded))
    return f"{rounded:.1f}"


def minutes(value: float) -> str:
    """ "16 min", "2.5 min": a tenth of a minute tells something under ten minutes, never above."""
    if math.isfinite(value) and abs(value) >= 10:
        return f"{number(round(value))} min"
    return f"{number(value)} min"


def wait_said(
    mins: float | None, *, over: bool | None = None, of_starts: bool | None = None
) -> str:
    """A runner type's wait as it was measured: "longest wait 114 min" (the oldest job still
    queued, from its creation); "slowest recent start 12 min" (ARC's startup histogram: jobs that
    got a runner, timed from the scale set's assignment); "over 60 min" when a histogram's
    quantile fell past its top bucket, where no number is known. "" when nothing was read."""
    parts = wait_parts(mins, over=over, of_starts=of_starts)
    return " ".join(parts) if parts else ""


def wait_parts(
    mins: float | None, *, over: bool | None = None, of_starts: bool | None = None
) -> tuple[str, str] | None:
    """`wait_said`'s label and amount apart ("longest wait", "over 60 min"), for a renderer
    that sets the amount in bold."""
    if mins is None:
        return None
    label = "slowest recent start" if of_starts else "longest wait"
    return label, f"{'over ' if over else ''}{minutes(mins)}"


def duration(span: timedelta) -> str:
    """A human duration: "45 s", "18 min", "1 h 18 min", "2 d 3 h"; negative spans count as 0."""
    total = max(int(span.total_seconds()), 0)
    if total < 60:
        return f"{total} s"
    days, rest = divmod(total // 60, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {mins} min" if mins else f"{hours} h"
    return f"{mins} min"


def change(current: float | None, previous: float | None, unit: str = "") -> str | None:
    """The change since the previous value: "▲ +12 min", "▼ -3", "no change"; None if unknown."""
    if current is None or previous is None:
        return None
    diff = number(current - previous)
    if diff == "0":
        return "no change"
    suffix = f" {unit}" if unit else ""
    if diff.startswith("-"):
        return f"▼ {diff}{suffix}"
    return f"▲ +{diff}{suffix}"
