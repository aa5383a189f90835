"""The trend chart's data: what the tick stores with the reply is what the sender draws."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.alerts import RunnerQueue
from bot.domain.trend import Trend
from bot.render.chart import MAX_SERIES, ChartData, chart_data, render_chart

T0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
NAMES = ["cpu", "gpu", "arm", "mac", "win", "big"]

_queue = st.one_of(
    st.none(),
    st.builds(
        RunnerQueue,
        queued=st.one_of(st.none(), st.integers(0, 99)),
        longest_wait_mins=st.one_of(st.none(), st.integers(0, 99)),
    ),
)
_statuses = st.lists(st.dictionaries(st.sampled_from(NAMES), _queue, max_size=6), max_size=10)


def trend_of(statuses: list[dict[str, RunnerQueue | None]]) -> Trend:
    trend = Trend()
    for i, shown in enumerate(statuses):
        types = {n: q for n, q in shown.items() if q is not None}
        trend = trend.appended(T0 + timedelta(minutes=10 * i), None, types, limit=48)
    return trend


@given(statuses=_statuses, worst=st.permutations(NAMES))
def test_the_chart_draws_the_worst_types_with_a_line_and_survives_the_outbox(
    statuses: list[dict[str, RunnerQueue | None]], worst: list[str]
) -> None:
    trend = trend_of(statuses)
    data = chart_data("Queue trend · incident 7", trend, worst=worst)

    drawable = [n for n in worst if len(trend.points(n)) >= 2]
    assert list(data.series) == drawable[:MAX_SERIES]
    assert all(data.series[n] == trend.points(n) for n in data.series)
    stored = orjson.loads(orjson.dumps(data.to_extra()))  # as the reply waits in Redis
    assert ChartData.from_extra(stored).series == data.series


def test_a_chart_queued_by_0_7_as_points_still_draws() -> None:
    t = [(T0 + timedelta(minutes=10 * i)).timestamp() for i in range(3)]
    extra = {
        "title": "Queue trend · incident 7",
        "series": {
            "gpu": [[t[0], 4, 12], [t[1], None, 15], [t[2], 9, None]],
            "cpu": [[t[1], 1, None], [t[2], 2, 3]],
        },
    }

    data = ChartData.from_extra(extra)

    assert data.series == {
        "gpu": [(t[0], 4, 12), (t[1], None, 15), (t[2], 9, None)],
        "cpu": [(t[1], 1, None), (t[2], 2, 3)],
    }
    assert "gpu: queued from 4 to 9 (peak 9), longest wait peak 15 min" in data.alt_text
    assert render_chart(data).startswith(b"\x89PNG")
