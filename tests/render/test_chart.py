"""The trend chart's data: the worst runner types that have a line, as the sender draws them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.alerting.alerts import RunnerQueue
from bot.domain.incident.incidents import Snapshot
from bot.domain.incident.trend import Trend
from bot.render.chart import MAX_SERIES, chart_data, incident_chart, render_chart
from tests.support.incidents import make_incident

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
def test_the_chart_draws_the_worst_types_with_a_line(
    statuses: list[dict[str, RunnerQueue | None]], worst: list[str]
) -> None:
    trend = trend_of(statuses)
    data = chart_data("Queue trend · incident 7", trend, worst=worst)

    drawable = [n for n in worst if len(trend.points(n)) >= 2]
    assert list(data.series) == drawable[:MAX_SERIES]
    assert all(data.series[n] == trend.points(n) for n in data.series)


def test_the_chart_draws_and_says_in_words_what_it_shows() -> None:
    statuses: list[dict[str, RunnerQueue | None]] = [
        {"gpu": RunnerQueue(queued=4, longest_wait_mins=12)},
        {"gpu": RunnerQueue(longest_wait_mins=15), "cpu": RunnerQueue(queued=1)},
        {"gpu": RunnerQueue(queued=9), "cpu": RunnerQueue(queued=2, longest_wait_mins=3)},
    ]
    t = [(T0 + timedelta(minutes=10 * i)).timestamp() for i in range(3)]

    data = chart_data("Queue trend · incident 7", trend_of(statuses), worst=["gpu", "cpu"])

    assert data.series == {
        "gpu": [(t[0], 4, 12), (t[1], None, 15), (t[2], 9, None)],
        "cpu": [(t[1], 1, None), (t[2], 2, 3)],
    }
    assert "gpu: queued from 4 to 9 (peak 9), longest wait peak 15 min" in data.alt_text
    assert render_chart(data).startswith(b"\x89PNG")


def test_a_wait_of_arcs_starts_is_named_so_on_the_chart_never_longest_wait() -> None:
    """With Prometheus alone a type's wait is ARC's slowest recent start: the chart's words and
    its wait axis say so; beside a type of the other measure, it is not drawn on that axis."""
    started = RunnerQueue(queued=9, longest_wait_mins=4, wait_of_starts=True)
    aged = RunnerQueue(queued=2, longest_wait_mins=7)
    alone = trend_of([{"gpu": started}, {"gpu": started}])
    peak = Snapshot(at=T0, runner_types={"gpu": started})
    data = incident_chart(make_incident(trend=alone, peak_snapshot=peak))
    assert "gpu: queued from 9 to 9 (peak 9), slowest recent start peak 4 min" in data.alt_text
    assert "longest wait" not in data.alt_text
    assert data.wait_label == "slowest recent start" and data.waits_of("gpu")

    both = trend_of([{"gpu": started, "cpu": aged}, {"gpu": started, "cpu": aged}])
    mixed = incident_chart(make_incident(trend=both, peak_snapshot=peak))
    assert "cpu: queued from 2 to 2 (peak 2), longest wait peak 7 min" in mixed.alt_text
    assert mixed.wait_label == "longest wait"
    assert mixed.waits_of("cpu") and not mixed.waits_of("gpu")
