"""The queue at an incident's recent statuses, and it as a sparkline."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.units import number

BARS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 12

Point = tuple[float, float | None, float | None]  # (epoch seconds, queued, longest wait)


def _cell(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else number(value)


def _column(text: str, last: int | None = None) -> list[float | None]:
    """Only the `last` are parsed of a long column."""
    cells = text.split(",") if last is None else text.rsplit(",", last)[-last:]
    return [float(cell) if cell else None for cell in cells]


class Trend(BaseModel):
    """The queue at each recent status. Every status rewrites it, so columns are kept as text
    ("4,6,,9"), split only where a message needs them."""

    model_config = ConfigDict(frozen=True)

    at: str = ""  # epoch seconds of each status
    total: str = ""  # jobs queued, all runner types shown
    queued: dict[str, str] = Field(default_factory=dict)
    waits: dict[str, str] = Field(default_factory=dict)

    def __len__(self) -> int:
        return self.at.count(",") + 1 if self.at else 0

    def appended(
        self,
        at: datetime,
        total: float | None,
        types: Mapping[str, RunnerQueue],
        *,
        limit: int,
        keep: Collection[float] = (),
    ) -> Trend:
        """With one more status; past `limit` statuses, thinned (`_thinnest`) so that it still
        starts at the first and holds the peak; a type none shows is dropped."""
        size = len(self)

        def extended(column: str | None, cell: str) -> str:
            # Appended as text: only past `limit` (`_without`) is a column split and joined.
            return "," * size + cell if column is None else f"{column},{cell}"

        queued: dict[str, str] = {}
        waits: dict[str, str] = {}
        for name in dict.fromkeys([*self.queued, *types]):
            queue = types.get(name, RunnerQueue())
            queued[name] = extended(self.queued.get(name), _cell(queue.queued))
            waits[name] = extended(self.waits.get(name), _cell(queue.longest_wait_mins))
        grown = Trend.model_construct(
            at=extended(self.at if size else None, str(int(at.timestamp()))),
            total=extended(self.total if size else None, _cell(total)),
            queued=queued,
            waits=waits,
        )
        while len(grown) > limit:
            grown = grown._without(grown._thinnest(limit, keep))
        shown = [n for n in queued if grown.queued[n].strip(",") or grown.waits[n].strip(",")]
        return grown.keeping(shown)

    def _thinnest(self, limit: int, keep: Collection[float]) -> int:
        """The status to forget: the first, the peak, those `keep` names and the latest half
        stay (statuses' sparklines and the alert's judgement read the latest); of the others, the
        one whose neighbours are closest, the oldest on a tie, so what is left is spread evenly
        over the incident and memory stays bounded."""
        times, peak = self.times(), self.peak_at()
        kept = {0} | {i for i, at in enumerate(times) if at in keep}
        if peak is not None:
            kept.add(times.index(peak.timestamp()))
        older = [i for i in range(1, len(times) - max(limit // 2, 1)) if i not in kept]
        if not older:  # a trend too short to keep them all: the oldest goes
            return 0
        return min(older, key=lambda i: (times[i + 1] - times[i - 1], i))

    def _without(self, index: int) -> Trend:
        def cut(column: str) -> str:
            cells = column.split(",")
            return ",".join(cells[:index] + cells[index + 1 :])

        return Trend.model_construct(
            at=cut(self.at),
            total=cut(self.total),
            queued={n: cut(c) for n, c in self.queued.items()},
            waits={n: cut(c) for n, c in self.waits.items()},
        )

    def times(self) -> list[float]:
        return [float(cell) for cell in self.at.split(",")] if self.at else []

    def totals(self) -> list[float | None]:
        return _column(self.total) if self.at else []

    def names(self) -> list[str]:
        return list(self.queued)

    def queued_of(self, name: str, last: int | None = None) -> list[float | None]:
        if name in self.queued:
            return _column(self.queued[name], last)
        size = len(self)
        return [None] * (size if last is None else min(size, last))

    def keeping(self, names: list[str]) -> Trend:
        kept = [n for n in names if n in self.queued]
        queued, waits = ({n: column[n] for n in kept} for column in (self.queued, self.waits))
        return self.model_copy(update={"queued": queued, "waits": waits})

    def points(self, name: str) -> list[Point]:
        if name not in self.queued:
            return []
        queued, waits = _column(self.queued[name]), _column(self.waits[name])
        columns = zip(self.times(), queued, waits, strict=True)
        return [(at, q, w) for at, q, w in columns if q is not None or w is not None]

    def peak_at(self) -> datetime | None:
        """When the most jobs queued (the first such status on a tie)."""
        totals = zip(self.times(), self.totals(), strict=True)
        known = [(t, at) for at, t in totals if t is not None]
        if not known:
            return None
        return datetime.fromtimestamp(max(known, key=lambda p: (p[0], -p[1]))[1], UTC)


def sparkline(values: Sequence[float | None], *, points: int = SPARK_POINTS) -> str:
    """The last `points` values as bars from 0 to their maximum; unknown ones as gaps."""
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
