"""The trend chart: queued jobs and longest wait per runner type over the incident, as a PNG.

Drawn by the channel's sender when the chart's turn comes (in a worker thread: matplotlib is slow
and blocking). The picture carries its own white background and dark text, so it reads the same in
Slack's light and dark themes; the alt text says in words what it shows.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from itertools import islice

from bot.domain.fleet import FleetSnapshot, worst_first
from bot.domain.incidents import Incident
from bot.domain.trend import Trend
from bot.domain.units import minutes, number

WIDTH_PX, HEIGHT_PX, DPI = 800, 450, 100
MAX_SERIES = 5  # the worst few types: more lines make a chart nobody can read
MIN_POINTS = 2  # fewer is a dot, not a line
# Colour-blind-safe (Okabe-Ito), dark enough on the white background.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00")
INK = "#222222"

Point = tuple[float, float | None, float | None]  # (unix time, queued, longest wait in min)


@dataclass(frozen=True)
class ChartData:
    """The worst types' columns of the trend, kept as text and expanded into points once."""

    title: str
    trend: Trend = field(default_factory=Trend)

    @cached_property
    def series(self) -> dict[str, list[Point]]:
        """runner type -> its points, oldest first; types with too few to draw are left out."""
        drawn = {name: self.trend.points(name) for name in self.trend.names()}
        return {name: points for name, points in drawn.items() if len(points) >= MIN_POINTS}

    @property
    def alt_text(self) -> str:
        parts = []
        for name, points in self.series.items():
            queued = [q for _, q, _ in points if q is not None]
            waits = [w for _, _, w in points if w is not None]
            text = f"{name or 'all runner types'}:"
            if queued:
                text += (
                    f" queued from {number(queued[0])} to {number(queued[-1])}"
                    f" (peak {number(max(queued))})"
                )
            if waits:
                text += f", longest wait peak {minutes(max(waits))}"
            parts.append(text)
        return f"{self.title}. " + "; ".join(parts)


def chart_data(title: str, trend: Trend, *, worst: list[str]) -> ChartData:
    """The chart of the `worst` runner types (at most MAX_SERIES) that have a line to draw."""
    drawable = (name for name in worst if trend.known_at_least(name, MIN_POINTS))
    return ChartData(title, trend.keeping(list(islice(drawable, MAX_SERIES))))


def incident_chart(
    incident: Incident, *, trend: Trend | None = None, live: FleetSnapshot | None = None
) -> ChartData:
    """The incident's chart (of its own trend and live view unless given): the live view's worst
    types, then the others by their peak in the trend."""
    trend = trend if trend is not None else incident.trend
    live = live if live is not None else incident.live
    names = [n for n, _ in worst_first(live.runner_types)] if live else []
    peaks = {
        name: max((q or 0 for _, q, _ in trend.points(name)), default=0) for name in trend.names()
    }
    names += sorted((n for n in peaks if n not in names), key=lambda n: (-peaks[n], n))
    return chart_data(f"Queue trend · incident {incident.id}", trend, worst=names)


def render_chart(data: ChartData) -> bytes:
    """A WIDTH_PX × HEIGHT_PX PNG; blocking, call it off the event loop."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import dates
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, facecolor="white")
    queued_ax, wait_ax = figure.subplots(2, 1, sharex=True)
    for ax, label in ((queued_ax, "queued jobs"), (wait_ax, "longest wait (min)")):
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
