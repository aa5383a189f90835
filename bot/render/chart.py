"""The trend chart: queued jobs (and the PNG's longest wait) per runner type over the incident.
Slack draws it from a `data_visualization` block; a workspace that refuses the block gets
`render_chart`'s PNG (drawn in a worker thread: matplotlib is slow and blocking).
"""

from __future__ import annotations

import io
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from itertools import islice
from typing import Any

from bot.domain.incident.incidents import Incident, Snapshot
from bot.domain.incident.trend import Trend
from bot.domain.message import Rendered
from bot.domain.reading.fleet import worst_first
from bot.domain.units import minutes, number
from bot.render import mrkdwn as md

WIDTH_PX, HEIGHT_PX, DPI = 800, 450, 100
MAX_SERIES = 5  # the worst few types (Slack takes 6): more lines make a chart nobody can read
MIN_POINTS = 2  # fewer is a dot, not a line
# Colour-blind-safe (Okabe-Ito), dark enough on the white background.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00")
INK = "#222222"
BLOCK_TYPE = "data_visualization"
_BLOCK_POINTER = re.compile(r"json-pointer:/blocks/(\d+)")
MAX_TITLE = 50
MAX_CATEGORIES = 20
MAX_LABEL = 20

Point = tuple[float, float | None, float | None]  # (unix time, queued, longest wait in min)


@dataclass(frozen=True)
class ChartData:
    """The worst types' points, with the peak reading where the trend did not keep it."""

    title: str
    trend: Trend = field(default_factory=Trend)
    peak: Snapshot | None = None
    starts: frozenset[str] = frozenset()  # waits of ARC's slowest recent start: never on one axis

    @property
    def wait_label(self) -> str:
        drawn = set(self.series)
        return "slowest recent start" if drawn and drawn <= self.starts else "longest wait"

    def waits_of(self, name: str) -> bool:
        return (name in self.starts) == (self.wait_label == "slowest recent start")

    @cached_property
    def series(self) -> dict[str, list[Point]]:
        drawn = {name: points_of(self.trend, name, self.peak) for name in self.trend.names()}
        return {name: points for name, points in drawn.items() if len(points) >= MIN_POINTS}

    @property
    def times(self) -> list[float]:
        return sorted({at for points in self.series.values() for at, _, _ in points})

    @property
    def peak_at(self) -> datetime | None:
        if self.peak is None:
            return self.trend.peak_at()
        return datetime.fromtimestamp(_second(self.peak.at), UTC)

    @property
    def alt_text(self) -> str:
        parts = []
        for name, points in self.series.items():
            queued = [q for _, q, _ in points if q is not None]
            waits = [w for _, _, w in points if w is not None]
            text = f"{name or 'all runner types'}:"
            if queued:
                first, last, top = (number(q) for q in (queued[0], queued[-1], max(queued)))
                text += f" queued from {first} to {last} (peak {top})"
            if waits:
                label = "slowest recent start" if name in self.starts else "longest wait"
                text += f", {label} peak {minutes(max(waits))}"
            parts.append(text)
        return f"{self.title}. " + "; ".join(parts)


def points_of(trend: Trend, name: str, peak: Snapshot | None = None) -> list[Point]:
    points = trend.points(name)
    if peak is None or name not in peak.runner_types or _second(peak.at) in trend.times():
        return points
    queue = peak.runner_types[name]
    at_peak = (_second(peak.at), queue.queued, queue.longest_wait_mins)
    return sorted([*points, at_peak], key=lambda p: p[0])


def _second(moment: datetime) -> float:
    return float(int(moment.timestamp()))


def chart_data(
    title: str,
    trend: Trend,
    *,
    worst: list[str],
    peak: Snapshot | None = None,
    starts: frozenset[str] = frozenset(),
) -> ChartData:
    drawable = (name for name in worst if len(points_of(trend, name, peak)) >= MIN_POINTS)
    return ChartData(title, trend.keeping(list(islice(drawable, MAX_SERIES))), peak, starts)


def incident_chart(incident: Incident) -> ChartData:
    """The incident's chart: its live view's worst types, then the others by their peak."""
    trend, live = incident.trend, incident.live
    names = [n for n, _ in worst_first(live.runner_types)] if live else []
    peaks = {
        name: max((q or 0 for _, q, _ in trend.points(name)), default=0) for name in trend.names()
    }
    names += sorted((n for n in peaks if n not in names), key=lambda n: (-peaks[n], n))
    title, peak = f"Queue trend · incident {incident.id}", incident.peaks.moment
    seen = [queue for view in (live, peak) if view for queue in view.runner_types.items()]
    starts = frozenset(name for name, queue in seen if queue.wait_of_starts)
    return chart_data(title, trend, worst=names, peak=peak, starts=starts)


def chart_block(data: ChartData) -> dict[str, Any] | None:
    """Queued jobs at up to 20 moments spread evenly, the peak's among them; None: no line."""
    series = data.series
    times = sampled(data.times, MAX_CATEGORIES, data.peak_at)
    if len(times) < 2:
        return None
    labels = series_labels([name or "all runner types" for name in series])
    drawn: dict[str, list[float]] = {}
    for name, shown in zip(series, labels, strict=True):
        # A type the reading did not show then was not queueing: 0, not its last value.
        queued = {at: q for at, q, _ in series[name]}
        drawn[shown] = [queued.get(at) or 0.0 for at in times]
    title = md.truncate(data.title or "Queue trend", MAX_TITLE)
    axes = {"categories": _labels(times), "x_label": "UTC", "y_label": "queued jobs"}
    return chart("queue_trend", title, "line", drawn, axes)


def chart(
    block_id: str, title: str, kind: str, values: dict[str, list[float]], axes: dict[str, Any]
) -> dict[str, Any]:
    series = [
        {
            "name": name,
            "data": [{"label": c, "value": v} for c, v in zip(axes["categories"], vs, strict=True)],
        }
        for name, vs in values.items()
    ]
    drawn = {"type": kind, "series": series, "axis_config": axes}
    return {"type": BLOCK_TYPE, "block_id": block_id, "title": title, "chart": drawn}


def sampled(times: list[float], most: int, peak: datetime | None = None) -> list[float]:
    """At most `most` of `times`, each the nearest to one of `most` moments evenly spread (drawn
    to scale, not by count), the first and last kept, the peak's in place of the nearest other."""
    if len(times) <= most:
        return times
    step = (times[-1] - times[0]) / (most - 1)
    picks = {_nearest(times, times[0] + i * step) for i in range(most)}
    at = peak.timestamp() if peak is not None else None
    if at in times and (index := times.index(at)) not in picks:
        inner = [p for p in picks if p not in (0, len(times) - 1)]
        picks.discard(min(inner, key=lambda p: (abs(p - index), p)))
        picks.add(index)
    return [times[i] for i in sorted(picks)]


def _nearest(times: list[float], moment: float) -> int:
    """The index of the time nearest `moment` in the sorted `times` (the earlier on a tie)."""
    after = min(bisect_left(times, moment), len(times) - 1)
    return after - 1 if after > 0 and moment - times[after - 1] <= times[after] - moment else after


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
    return Rendered(rendered.text, [b for b in rendered.blocks if b.get("type") != BLOCK_TYPE])


def _labels(times: list[float]) -> list[str]:
    """Unique UTC time labels: minutes, else seconds, else a counter (two readings in a second);
    a moment on a later day than the first names its day ("Dec 02 03:00")."""
    moments = [datetime.fromtimestamp(at, UTC) for at in times]
    first = moments[0].date() if moments else None
    for shape in ("%H:%M", "%H:%M:%S"):
        labels = [m.strftime(shape if m.date() == first else f"%b %d {shape}") for m in moments]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{label} #{i + 1}" for i, label in enumerate(labels)]


def series_labels(names: Sequence[str], most: int = MAX_LABEL) -> list[str]:
    """A label of at most `most` characters for each name, all different: a long one keeps its
    leading parts whole, "…", then its last parts that fit (`linux.g5.4xlarge…gpu`); types that
    still read the same keep their ends instead (`…nightly.a`), else a number parts them."""
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


_BOUNDARY = re.compile(r"(?<=[._-])")


def _leading(name: str, most: int) -> str:
    """A plain cut where the leading parts would leave less than half the room."""
    if len(name) <= most:
        return name
    parts = _BOUNDARY.split(name)
    lead = ""
    for part in parts[:-1]:
        if len((lead + part).rstrip("._-")) + 1 > most:
            break
        lead += part
    lead = lead.rstrip("._-")
    if len(lead) < most // 2:
        return name[: most - 1] + "…"
    tail = ""
    for part in reversed(parts[len(_BOUNDARY.split(lead)) :]):
        if len(lead) + 1 + len(part + tail) > most:
            break
        tail = part + tail
    return f"{lead}…{tail}"


def _trailing(name: str, most: int) -> str:
    if len(name) <= most:
        return name
    tail = name[-most:]
    dot = tail.find(".")
    return "…" + (tail[dot + 1 :] if 0 <= dot <= most // 2 else tail[1:])


def render_chart(data: ChartData) -> bytes:
    """A WIDTH_PX × HEIGHT_PX PNG; blocking, call it off the event loop."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import dates
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, facecolor="white")
    queued_ax, wait_ax = figure.subplots(2, 1, sharex=True)
    for ax, label in ((queued_ax, "queued jobs"), (wait_ax, f"{data.wait_label} (min)")):
        ax.set_facecolor("white")
        ax.set_ylabel(label, color=INK)
        ax.tick_params(colors=INK, labelsize=8)
        ax.grid(True, color="#dddddd", linewidth=0.6)
        for spine in ax.spines.values():
            spine.set_color("#888888")
    for colour, (name, points) in zip(COLOURS, data.series.items(), strict=False):
        times = [datetime.fromtimestamp(t, UTC) for t, _, _ in points]
        queued = [float("nan") if q is None else q for _, q, _ in points]
        waits = [float("nan") if w is None else w for _, _, w in points]
        queued_ax.plot(times, queued, color=colour, label=name or "all")
        if data.waits_of(name):
            wait_ax.plot(times, waits, color=colour)
    queued_ax.set_title(data.title, color=INK, fontsize=10)
    if data.series:
        queued_ax.legend(fontsize=7, loc="upper left", frameon=False)
    wait_ax.xaxis.set_major_formatter(dates.DateFormatter("%H:%M", tz=UTC))
    wait_ax.set_xlabel("UTC", color=INK, fontsize=8)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=DPI, facecolor="white")
    return out.getvalue()
