"""The queue at an incident's recent statuses, and it as a sparkline."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from bot.domain.alerts import RunnerQueue
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
        self, at: datetime, total: float | None, types: Mapping[str, RunnerQueue], *, limit: int
    ) -> Trend:
        """With one more status, keeping the first (the chart starts where the incident did)
        and the latest, `limit` in all; a type none of them shows is dropped."""
        size = len(self)
        drop = max(size + 1 - limit, 0)
        first = bool(drop) and limit > 1

        def extended(column: str | None, cell: str) -> str:
            # String surgery, not split and join: every status rewrites every column.
            if column is None:  # new to this trend: empty cells before this status
                return "," * (size - drop) + cell
            if not drop:
                return f"{column},{cell}"
            head, tail = column.split(",", 1) if first else ("", column)
            kept = [head] if first else []
            kept += tail.split(",", drop)[drop:]
            return ",".join([*kept, cell])

        queued: dict[str, str] = {}
        waits: dict[str, str] = {}
        for name in dict.fromkeys([*self.queued, *types]):
            queue = types.get(name, RunnerQueue())
            q_col = extended(self.queued.get(name), _cell(queue.queued))
            w_col = extended(self.waits.get(name), _cell(queue.longest_wait_mins))
            if q_col.strip(",") or w_col.strip(","):
                queued[name], waits[name] = q_col, w_col
        return Trend.model_construct(
            at=extended(self.at if size else None, str(int(at.timestamp()))),
            total=extended(self.total if size else None, _cell(total)),
            queued=queued,
            waits=waits,
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
        columns = zip(
            self.times(), _column(self.queued[name]), _column(self.waits[name]), strict=True
        )
        return [(at, q, w) for at, q, w in columns if q is not None or w is not None]

    def peak_at(self) -> datetime | None:
        """When the most jobs queued (the first such status on a tie)."""
        known = [
            (t, at) for at, t in zip(self.times(), self.totals(), strict=True) if t is not None
        ]
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
